package eddy_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// TestGroupByRepartitions: grouping by a new key goes through a
// repartition topic, which splits the topology in two sub-topologies.
func TestGroupByRepartitions(t *testing.T) {
	topo := eddy.NewTopology()
	s := eddy.Source(topo, "words", serde.String(), serde.String())
	// Key: the line number; value: a word. Count per word.
	g := eddy.GroupBy(s, func(_, word string) string { return word }, "by-word", serde.String(), serde.String())
	eddy.To(eddy.ToStream(eddy.Count(g, "word-counts")), "counts", serde.String(), serde.Int64())

	rt, err := topo.Build(eddy.Config{AppID: "wc"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.Subtopologies) != 2 {
		t.Fatalf("%d sub-topologies, want 2", len(rt.Subtopologies))
	}
	if got := rt.Subtopologies[1].Sources; !slices.Equal(got, []string{"wc-by-word-repartition"}) {
		t.Errorf("second sub-topology reads %v", got)
	}
	if got := rt.Repartitions; len(got) != 1 || got[0].Topic != "wc-by-word-repartition" {
		t.Errorf("repartitions %+v", got)
	}

	d, err := eddytest.New(topo, eddytest.Options{Config: eddy.Config{AppID: "wc"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := eddytest.Input(d, "words", serde.String(), serde.String())
	for i, w := range strings.Fields("a b a c b a") {
		if err := in.Pipe(string(rune('0'+i)), w, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	kvs, err := eddytest.Output(d, "counts", serde.String(), serde.Int64()).ReadKeyValues()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range kvs {
		got = append(got, kv.Key+"="+string(rune('0'+kv.Value)))
	}
	if want := []string{"a=1", "b=1", "a=2", "c=1", "b=2", "a=3"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if n := eddytest.Output(d, "wc-by-word-repartition", serde.String(), serde.String()).Len(); n != 6 {
		t.Errorf("%d records in the repartition topic, want 6", n)
	}
}
