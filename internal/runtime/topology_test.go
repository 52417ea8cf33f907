package runtime

import (
	"slices"
	"testing"
)

// TestEndOrder: a sub-topology ends after those that write the
// repartition topics it reads, whatever their indexes; a cycle keeps
// index order.
func TestEndOrder(t *testing.T) {
	sub := func(sources ...string) Subtopology { return Subtopology{Sources: sources} }
	cases := []struct {
		name string
		topo Topology
		want []int
	}{
		{"independent", Topology{Subtopologies: []Subtopology{sub("a"), sub("b")}}, []int{0, 1}},
		{"reader first", Topology{
			Subtopologies: []Subtopology{sub("r1"), sub("r2"), sub("in")},
			Repartitions:  []Repartition{{Topic: "r1", Writers: []int{1}}, {Topic: "r2", Writers: []int{2}}},
		}, []int{2, 1, 0}},
		{"cycle", Topology{
			Subtopologies: []Subtopology{sub("in", "resp"), sub("sub")},
			Repartitions:  []Repartition{{Topic: "sub", Writers: []int{0}}, {Topic: "resp", Writers: []int{1}}},
		}, []int{0, 1}},
		{"cycle fed from outside", Topology{
			Subtopologies: []Subtopology{sub("x"), sub("y"), sub("in")},
			Repartitions:  []Repartition{{Topic: "x", Writers: []int{1, 2}}, {Topic: "y", Writers: []int{0}}},
		}, []int{2, 0, 1}},
	}
	for _, tc := range cases {
		if got := tc.topo.EndOrder(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: EndOrder = %v, want %v", tc.name, got, tc.want)
		}
	}
}
