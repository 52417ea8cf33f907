package queries

import (
	"testing"

	"github.com/eddy-streams/eddy/eddytest"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
)

// TestAllBuild builds every query into its own topology: the suite's names
// in order, each with a title and a check, and the DSL reports no problem.
func TestAllBuild(t *testing.T) {
	want := []string{"q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q9", "q10", "q11", "q12", "q13", "q14", "q15", "q16", "q17", "q18", "q19", "q20", "q21", "q22"}
	qs := All()
	if len(qs) != len(want) {
		t.Fatalf("%d queries, want %d", len(qs), len(want))
	}
	for i, q := range qs {
		if q.Name != want[i] || q.Title == "" || q.Build == nil || q.NewCheck == nil {
			t.Errorf("query %d: %+v, want %s with a title, Build and NewCheck", i, q, want[i])
			continue
		}
		if got, ok := Lookup(q.Name); !ok || got.Name != q.Name {
			t.Errorf("Lookup(%s) = %v, %v", q.Name, got.Name, ok)
		}
		topo := eddy.NewTopology()
		out := "out"
		if q.Files != nil {
			out = t.TempDir() // a directory: the sink creates it at open
		}
		q.Build(topo, nexmark.DefaultTopics(), out)
		d, err := eddytest.New(topo, eddytest.Options{Config: eddy.Config{AppID: "nexmark-" + q.Name}})
		if err != nil {
			t.Errorf("%s: %v", q.Name, err)
			continue
		}
		d.Close()
	}
	if _, ok := Lookup("q6x"); ok {
		t.Error("Lookup found q6x, which the suite does not have")
	}
}
