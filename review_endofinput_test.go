package eddy_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// TestEndOfInputChainedTopic: a sub-topology that reads a topic another
// sub-topology writes with To (a chain, not a repartition) ends after its
// writer, so the writer's final windows reach its windows in time. The
// reader is declared first, so index order alone would end it first.
func TestEndOfInputChainedTopic(t *testing.T) {
	topo := eddy.NewTopology()
	mid := eddy.Source(topo, "mid", serde.String(), serde.Int64())
	totals := eddy.WindowAggregate(eddy.WindowedBy(eddy.GroupByKey(mid, serde.String()),
		eddy.TumblingWindows(time.Minute)).Emit(eddy.EmitFinal), "totals",
		func() int64 { return 0 }, func(_ string, n, sum int64) int64 { return sum + n }, nil, serde.Int64())
	eddy.To(eddy.Map(eddy.ToStream(totals), func(k eddy.Windowed[string], n int64) (string, int64) {
		return fmt.Sprintf("%s@%d", k.Key, k.Window.Start), n
	}), "totals-out", serde.String(), serde.Int64())

	in := eddy.Source(topo, "in", serde.String(), serde.String())
	counts := eddy.WindowCount(eddy.WindowedBy(eddy.GroupByKey(in, serde.String()),
		eddy.TumblingWindows(10*time.Second)).Emit(eddy.EmitFinal), "counts")
	eddy.To(eddy.Map(eddy.ToStream(counts), func(k eddy.Windowed[string], n int64) (string, int64) { return k.Key, n }),
		"mid", serde.String(), serde.Int64())

	d := newDriver(t, topo)
	pin := eddytest.Input(d, "in", serde.String(), serde.String())
	for _, ts := range []int64{1000, 2000, 3000} {
		if err := pin.Pipe("a", "x", ts); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.EndOfInput(); err != nil {
		t.Fatal(err)
	}
	kvs, err := eddytest.Output(d, "totals-out", serde.String(), serde.Int64()).ReadKeyValues()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range kvs {
		got = append(got, fmt.Sprintf("%s=%d", kv.Key, kv.Value))
	}
	if want := []string{"a@0=3"}; !slices.Equal(got, want) {
		t.Errorf("totals after the end: %q, want %q (late dropped: %d)", got, want, d.LateRecordsDropped())
	}
}
