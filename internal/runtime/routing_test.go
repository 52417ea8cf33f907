package runtime

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func rec(topic string, offset int64, ts int64) *kgo.Record {
	return &kgo.Record{Topic: topic, Offset: offset, Timestamp: time.UnixMilli(ts)}
}

// TestMergeByTimestamp: a task's records of one poll come in timestamp
// order across its sources, ties to the first source, and in offset order
// within a partition even when timestamps go back.
func TestMergeByTimestamp(t *testing.T) {
	tk := &task{
		pending: [][]*kgo.Record{
			{rec("left", 0, 10), rec("left", 1, 30), rec("left", 2, 5), rec("left", 3, 40)},
			{rec("right", 0, 10), rec("right", 1, 20), rec("right", 2, 50)},
		},
		pendingAt: make([]int, 2),
	}
	var got []string
	for r := tk.nextPending(); r != nil; r = tk.nextPending() {
		got = append(got, r.Topic[:1]+string(rune('0'+r.Offset)))
	}
	// left@2 (ts 5) waits behind left@1 (ts 30): a partition is never
	// reordered, only interleaved with the others.
	want := "l0 r0 r1 l1 l2 l3 r2"
	if strings.Join(got, " ") != want {
		t.Fatalf("merge order %v, want %s", got, want)
	}
}

func TestPlanRejectsBadTopologies(t *testing.T) {
	noop := func(TaskContext) (TaskProcessor, error) { return nil, nil }
	for name, tc := range map[string]struct {
		topo Topology
		want []string
	}{
		"empty": {Topology{}, []string{"no sub-topology"}},
		"shared source": {Topology{Subtopologies: []Subtopology{
			{Sources: []string{"a"}, NewTask: noop},
			{Sources: []string{"a", "b"}, NewTask: noop},
		}}, []string{"topic a is a source of sub-topology 0 and 1"}},
		"shared store": {Topology{Subtopologies: []Subtopology{
			{Sources: []string{"a"}, Stores: []Store{{Name: "s"}}, NewTask: noop},
			{Sources: []string{"b"}, Stores: []Store{{Name: "s"}}, NewTask: noop},
		}}, []string{`store "s" is declared by sub-topology 0 and 1`}},
		"no source and bad retention": {Topology{Subtopologies: []Subtopology{
			{Stores: []Store{{Name: "w", Retention: -time.Second}}, NewTask: noop},
		}}, []string{"sub-topology 0 has no source", "retention -1s is negative"}},
		"globals": {Topology{
			Subtopologies: []Subtopology{{Sources: []string{"a"}, NewTask: noop}},
			Globals:       []GlobalStore{{Name: "g/h", Topic: "gt"}, {Name: "ok", Topic: "a"}},
		}, []string{`global store "g/h"`, `global store "ok" reads topic a, a source`}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := newPlan("app", tc.topo)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestPlanRoutesTopicsToSubtopologies(t *testing.T) {
	p := balancerPlan(t)
	for _, tc := range []struct {
		topic string
		want  TaskID
	}{{"left", TaskID{0, 3}}, {"right", TaskID{0, 3}}, {"rekey", TaskID{1, 3}}} {
		if got, ok := p.taskOf(tc.topic, 3); !ok || got != tc.want {
			t.Errorf("%s/3: got %v %v, want %v", tc.topic, got, ok, tc.want)
		}
	}
	if _, ok := p.taskOf("elsewhere", 0); ok {
		t.Error("a topic outside the topology has a task")
	}
	got := p.tasksOf(map[string][]int32{"left": {1, 0}, "right": {0}, "rekey": {0}, "elsewhere": {9}})
	if want := []TaskID{{0, 0}, {0, 1}, {1, 0}}; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("tasksOf: got %v, want %v", got, want)
	}
	if strings.Join(p.changelogs, ",") != "app-joined-changelog,app-counts-changelog" {
		t.Fatalf("changelogs %v", p.changelogs)
	}
}
