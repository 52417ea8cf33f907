package runtime

import (
	"regexp"
	"slices"
	"testing"
)

// TestEndOrder: a sub-topology ends after those that write the topics
// it reads, by name or by pattern, whatever their indexes; a cycle keeps
// index order.
func TestEndOrder(t *testing.T) {
	sub := func(sources []string, writes ...string) Subtopology {
		return Subtopology{Sources: sources, Writes: writes}
	}
	in := func(sources ...string) []string { return sources }
	pattern := Subtopology{Patterns: []*regexp.Regexp{regexp.MustCompile(`^(?:out-.*)$`)}}
	cases := []struct {
		name string
		topo Topology
		want []int
	}{
		{"independent", Topology{Subtopologies: []Subtopology{sub(in("a")), sub(in("b"))}}, []int{0, 1}},
		{"reader first", Topology{
			Subtopologies: []Subtopology{sub(in("r1")), sub(in("r2"), "r1"), sub(in("in"), "r2", "out")},
		}, []int{2, 1, 0}},
		{"cycle", Topology{
			Subtopologies: []Subtopology{sub(in("in", "resp"), "sub"), sub(in("sub"), "resp")},
		}, []int{0, 1}},
		{"cycle fed from outside", Topology{
			Subtopologies: []Subtopology{sub(in("x"), "y"), sub(in("y"), "x"), sub(in("in"), "x")},
		}, []int{2, 0, 1}},
		// A sub-topology that reads a pattern ends after the writer of a
		// topic the pattern matches, as the records are routed to it; not
		// after the writer of a sink, which a pattern never reads.
		{"pattern reader", Topology{
			Subtopologies: []Subtopology{pattern, sub(in("in"), "out-a")},
		}, []int{1, 0}},
		{"pattern and a sink", Topology{
			Subtopologies: []Subtopology{pattern, sub(in("in"), "out-a")}, Sinks: []string{"out-a"},
		}, []int{0, 1}},
	}
	for _, tc := range cases {
		if got := tc.topo.EndOrder(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: EndOrder = %v, want %v", tc.name, got, tc.want)
		}
	}
}
