package runtime

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/kafka"
)

// TestRepartitionCounts: repartition topics are sized as Kafka Streams
// sizes them: a declared count wins, then the count of a topic they are
// joined with, then the largest source of their writers.
func TestRepartitionCounts(t *testing.T) {
	noop := func(TaskContext) (TaskProcessor, error) { return nil, nil }
	sub := func(sources ...string) Subtopology { return Subtopology{Sources: sources, NewTask: noop} }
	for _, tc := range []struct {
		name     string
		subs     []Subtopology
		reparts  []Repartition
		external map[string]int32
		want     string // the counts, in fmt's sorted map form
		err      string
	}{
		{"joined with a table", []Subtopology{sub("orders"), sub("r", "customers")},
			[]Repartition{{Topic: "r", Writers: []int{0}}},
			map[string]int32{"orders": 4, "customers": 3}, "map[r:3]", ""},
		{"read alone: the largest writer source", []Subtopology{sub("a"), sub("b"), sub("r")},
			[]Repartition{{Topic: "r", Writers: []int{0, 1}}},
			map[string]int32{"a": 2, "b": 6}, "map[r:6]", ""},
		{"not the largest of the app", []Subtopology{sub("small"), sub("r"), sub("big")},
			[]Repartition{{Topic: "r", Writers: []int{0}}},
			map[string]int32{"small": 2, "big": 8}, "map[r:2]", ""},
		{"two repartitions joined: the larger", []Subtopology{sub("l"), sub("rr"), sub("rl", "rr2")},
			[]Repartition{{Topic: "rl", Writers: []int{0}}, {Topic: "rr2", Writers: []int{1}}},
			map[string]int32{"l": 2, "rr": 5}, "map[rl:5 rr2:5]", ""},
		{"a chain: upstream sized first", []Subtopology{sub("in"), sub("r1"), sub("r2", "table")},
			[]Repartition{{Topic: "r2", Writers: []int{1}}, {Topic: "r1", Writers: []int{0}}},
			map[string]int32{"in": 4, "table": 3}, "map[r1:4 r2:3]", ""},
		{"a chain into a join of repartitions", []Subtopology{sub("in"), sub("r1"), sub("r2", "r3"), sub("x")},
			[]Repartition{{Topic: "r2", Writers: []int{1}}, {Topic: "r1", Writers: []int{0}}, {Topic: "r3", Writers: []int{3}}},
			map[string]int32{"in": 4, "x": 7}, "map[r1:4 r2:7 r3:7]", ""},
		// A sub-topology joining a stream with a re-keyed branch of
		// itself writes a repartition topic it reads (Nexmark q5).
		{"written and read by one sub-topology", []Subtopology{sub("in"), sub("r1", "self")},
			[]Repartition{{Topic: "r1", Writers: []int{0}}, {Topic: "self", Writers: []int{1}}},
			map[string]int32{"in": 4}, "map[r1:4 self:4]", ""},
		{"only itself to size it", []Subtopology{sub("self")},
			[]Repartition{{Topic: "self", Writers: []int{0}}},
			map[string]int32{}, "", "repartition topic self: no source to take a partition count from"},
		{"declared wins", []Subtopology{sub("orders"), sub("r", "customers")},
			[]Repartition{{Topic: "r", Partitions: 7, Writers: []int{0}}},
			map[string]int32{"orders": 4, "customers": 3}, "map[r:7]", ""},
		{"a declared topic sizes the ones joined with it", []Subtopology{sub("a"), sub("b"), sub("r1", "r2")},
			[]Repartition{{Topic: "r1", Writers: []int{0}}, {Topic: "r2", Partitions: 9, Writers: []int{1}}},
			map[string]int32{"a": 2, "b": 3}, "map[r1:9 r2:9]", ""},
		{"writers unknown: the largest external source", []Subtopology{sub("a"), sub("b"), sub("r")},
			[]Repartition{{Topic: "r"}},
			map[string]int32{"a": 2, "b": 6}, "map[r:6]", ""},
		{"no source to size it", []Subtopology{sub("r")},
			[]Repartition{{Topic: "r"}},
			map[string]int32{}, "", "repartition topic r: no source to take a partition count from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newPlan("app", Topology{Subtopologies: tc.subs, Repartitions: tc.reparts})
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := repartitionCounts(p, tc.reparts, tc.external)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := fmt.Sprint(got); s != tc.want {
				t.Errorf("counts %s, want %s", s, tc.want)
			}
		})
	}
}

// TestPrepareTopicsKeepsAnOlderRepartitionCount: a repartition topic whose
// count only its writers decide keeps the count it exists with (an older
// eddy gave it the largest source's); one whose count co-partitioning
// decides must have it.
func TestPrepareTopicsKeepsAnOlderRepartitionCount(t *testing.T) {
	h := newHarness(t)
	h.createTopics(kafka.TopicSpec{Name: "in3", Partitions: 3}, kafka.TopicSpec{Name: "table3", Partitions: 3},
		kafka.TopicSpec{Name: "app-free-repartition", Partitions: 5}, kafka.TopicSpec{Name: "app-joined-repartition", Partitions: 5})
	noop := func(TaskContext) (TaskProcessor, error) { return nil, nil }
	cfg := h.config(t.TempDir(), io.Discard)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	free := Topology{
		Subtopologies: []Subtopology{{Sources: []string{"in3"}, NewTask: noop}, {Sources: []string{"app-free-repartition"}, NewTask: noop}},
		Repartitions:  []Repartition{{Topic: "app-free-repartition", Writers: []int{0}}},
	}
	p, err := newPlan(cfg.AppID, free)
	if err != nil {
		t.Fatal(err)
	}
	if err := prepareTopics(ctx, cfg, p, free.Repartitions, nil); err != nil {
		t.Errorf("a repartition topic read alone, existing with 5 partitions: %v", err)
	}

	joined := Topology{
		Subtopologies: []Subtopology{{Sources: []string{"in3"}, NewTask: noop}, {Sources: []string{"app-joined-repartition", "table3"}, NewTask: noop}},
		Repartitions:  []Repartition{{Topic: "app-joined-repartition", Writers: []int{0}}},
	}
	if p, err = newPlan(cfg.AppID, joined); err != nil {
		t.Fatal(err)
	}
	err = prepareTopics(ctx, cfg, p, joined.Repartitions, nil)
	if err == nil || !strings.Contains(err.Error(), "app-joined-repartition has 5 partitions, the topology wants 3") {
		t.Errorf("a repartition topic joined with a 3-partition table, existing with 5: %v; want the mismatch named", err)
	}
}
