package runtime

import (
	"regexp"
	"slices"
	"testing"
)

// TestResolvePatterns: a pattern adds the topics it matches to its
// sub-topology's sources, sorted after the named ones, and never a topic
// the app names itself, Kafka's, the app's internal ones or a dead-letter
// topic; the plan then routes the matched topics to their sub-topology.
func TestResolvePatterns(t *testing.T) {
	topo := Topology{
		Subtopologies: []Subtopology{
			{Sources: []string{"named"}, Patterns: []*regexp.Regexp{regexp.MustCompile(`^(?:.*)$`)}, NewTask: nilTask},
			{Sources: []string{"app-rekey-repartition"}, NewTask: nilTask},
		},
		Globals: []GlobalStore{{Name: "g", Topic: "global-in"}},
		Sinks:   []string{"out"},
	}
	topics := []string{"out", "b", "named", "global-in", "__consumer_offsets", "app-x-changelog", "app-rekey-repartition", "a.dlq", "a"}
	got := resolvePatterns("app", topo, topics)
	if want := []string{"named", "a", "b"}; !slices.Equal(got.Subtopologies[0].Sources, want) {
		t.Errorf("sources %q, want %q", got.Subtopologies[0].Sources, want)
	}
	if len(topo.Subtopologies[0].Sources) != 1 {
		t.Errorf("resolving changed the topology it was given: %q", topo.Subtopologies[0].Sources)
	}
	if want := []string{"a", "b"}; !slices.Equal(patternTopics("app", &topo, topics), want) {
		t.Errorf("pattern topics %q, want %q", patternTopics("app", &topo, topics), want)
	}
	p, err := newPlan("app", got)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := p.taskOf("b", 2); !ok || id != (TaskID{0, 2}) {
		t.Errorf("task of b/2: %v %v, want 0_2", id, ok)
	}
}

// TestPlanPatternOnly: a sub-topology whose pattern matches no topic yet
// plans (it has no task until one appears); one with neither a source nor
// a pattern does not.
func TestPlanPatternOnly(t *testing.T) {
	only := Topology{Subtopologies: []Subtopology{{Patterns: []*regexp.Regexp{regexp.MustCompile(`x`)}, NewTask: nilTask}}}
	if _, err := newPlan("app", only); err != nil {
		t.Errorf("a pattern-only sub-topology: %v", err)
	}
	none := Topology{Subtopologies: []Subtopology{{NewTask: nilTask}}}
	if _, err := newPlan("app", none); err == nil {
		t.Error("a sub-topology with no source and no pattern planned")
	}
}

func nilTask(TaskContext) (TaskProcessor, error) { return nil, nil }
