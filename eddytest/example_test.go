package eddytest_test

import (
	"fmt"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// Count clicks per user in ten-second windows, emitting each window once
// it closes, and test it without a broker.
func Example() {
	topo := eddy.NewTopology()
	clicks := eddy.Source(topo, "clicks", serde.String(), serde.String())
	windows := eddy.WindowedBy(eddy.GroupByKey(clicks, serde.String()),
		eddy.TumblingWindows(10*time.Second).WithGrace(time.Second)).Emit(eddy.EmitFinal)
	counts := eddy.WindowCount(windows, "clicks-per-window")
	eddy.To(eddy.ToStream(counts), "counts", eddy.WindowedSerde(serde.String()), serde.Int64())

	d, err := eddytest.New(topo, eddytest.Options{})
	if err != nil {
		panic(err)
	}
	defer d.Close()
	in := eddytest.Input(d, "clicks", serde.String(), serde.String())
	out := eddytest.Output(d, "counts", eddy.WindowedSerde(serde.String()), serde.Int64())

	in.Pipe("ann", "/home", 1_000)
	in.Pipe("bob", "/cart", 4_000)
	in.Pipe("ann", "/cart", 9_500)
	in.Pipe("ann", "/pay", 8_000)   // out of order, within the grace period
	in.Pipe("bob", "/home", 11_000) // stream time 11s: [0s, 10s) closes

	recs, _ := out.ReadAll()
	for _, r := range recs {
		fmt.Printf("%s [%d, %d): %d\n", r.Key.Key, r.Key.Start, r.Key.End, r.Value)
	}
	// Output:
	// ann [0, 10000): 3
	// bob [0, 10000): 1
}
