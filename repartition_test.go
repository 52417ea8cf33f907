package eddy_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/internal/plan"

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

	rt, err := plan.Build(topo, eddy.Config{AppID: "wc"})
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

// TestSelectKeyRepartitionsByItself: a grouping or a stream-table join
// after SelectKey repartitions with the source's value serde.
func TestSelectKeyRepartitionsByItself(t *testing.T) {
	topo := eddy.NewTopology()
	s := eddy.Source(topo, "words", serde.String(), serde.String())
	byWord := eddy.SelectKey(eddy.Filter(s, func(_, w string) bool { return w != "" }), func(_, w string) string { return w })
	eddy.To(eddy.ToStream(eddy.Count(eddy.GroupByKey(byWord, serde.String()), "counts")), "counts", serde.String(), serde.Int64())
	defs := eddy.TableFrom(topo, "defs", "defs", serde.String(), serde.String())
	eddy.To(eddy.JoinStreamTable(byWord, defs, eddy.InnerJoin, func(w, _ string, def string, _ bool) string { return def }), "defined", serde.String(), serde.String())
	rt, err := plan.Build(topo, eddy.Config{AppID: "app"})
	if err != nil {
		t.Fatal(err)
	}
	// One repartition serves both; the join and the count share the
	// second sub-topology.
	if len(rt.Repartitions) != 1 || len(rt.Subtopologies) != 2 || rt.Repartitions[0].Topic != "app-rekey-2-repartition" {
		t.Fatalf("%d repartitions %+v, %d sub-topologies; want 1 and 2", len(rt.Repartitions), rt.Repartitions, len(rt.Subtopologies))
	}
	d, err := eddytest.New(topo, eddytest.Options{Config: eddy.Config{AppID: "app"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.PipeRaw("defs", []byte("go"), []byte("a language"), 1); err != nil {
		t.Fatal(err)
	}
	in := eddytest.Input(d, "words", serde.String(), serde.String())
	for i, w := range []string{"go", "", "rust", "go"} {
		if err := in.Pipe(fmt.Sprint(i), w, int64(2+i)); err != nil {
			t.Fatal(err)
		}
	}
	counts, err := eddytest.Output(d, "counts", serde.String(), serde.Int64()).ReadKeyValues()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(counts) != "[{go 1} {rust 1} {go 2}]" {
		t.Errorf("counts %v", counts)
	}
	defined, err := eddytest.Output(d, "defined", serde.String(), serde.String()).ReadKeyValues()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(defined) != "[{go a language} {go a language}]" {
		t.Errorf("joined %v", defined)
	}
}
