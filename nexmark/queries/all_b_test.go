package queries

import (
	"testing"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
)

// TestQueriesBBuild builds every query of the batch into its own topology:
// names match, and the DSL reports no problem.
func TestQueriesBBuild(t *testing.T) {
	want := []string{"q7", "q8", "q11", "q12"}
	qs := queriesB()
	if len(qs) != len(want) {
		t.Fatalf("%d queries, want %d", len(qs), len(want))
	}
	for i, q := range qs {
		if q.Name != want[i] || q.Title == "" || q.Build == nil || q.NewCheck == nil {
			t.Errorf("query %d: %+v, want %s with a title, Build and NewCheck", i, q, want[i])
			continue
		}
		topo := eddy.NewTopology()
		q.Build(topo, nexmark.DefaultTopics(), "out")
		if _, err := topo.Build(eddy.Config{AppID: "nexmark-" + q.Name}); err != nil {
			t.Errorf("%s: %v", q.Name, err)
		}
	}
}
