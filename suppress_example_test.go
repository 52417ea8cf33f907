package eddy_test

import (
	"fmt"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// One count per user and minute, sent once the minute (and its 10 s of
// grace) is over: the alerting downstream sees final counts only, not
// every update.
func ExampleSuppress() {
	t := eddy.NewTopology()
	clicks := eddy.GroupByKey(eddy.Source(t, "clicks", serde.String(), serde.String()), serde.String())
	perMinute := eddy.WindowCount(eddy.WindowedBy(clicks, eddy.TumblingWindows(time.Minute).WithGrace(10*time.Second)), "clicks-per-minute")
	keys := eddy.WindowedSerde(serde.String())
	finals := eddy.Suppress(perMinute, "final-clicks", eddy.UntilWindowCloses(eddy.BufferConfig{MaxRecords: 100_000}), keys, serde.Int64())
	eddy.To(eddy.ToStream(finals), "final-clicks", keys, serde.Int64())

	d, err := eddytest.New(t, eddytest.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	in := eddytest.Input(d, "clicks", serde.String(), serde.String())
	out := eddytest.Output(d, "final-clicks", keys, serde.Int64())
	const s = 1000
	in.Pipe("ann", "home", 5*s)
	in.Pipe("ann", "shoes", 30*s)
	in.Pipe("bob", "home", 50*s)
	in.Pipe("ann", "cart", 65*s) // the next minute
	fmt.Println("at 65 s:", out.Len(), "sent")
	in.Pipe("bob", "cart", 70*s) // 60 s + 10 s of grace: the first minute closes
	finalCounts, _ := out.ReadAll()
	for _, r := range finalCounts {
		fmt.Printf("%s [%ds, %ds): %d clicks\n", r.Key.Key, r.Key.Start/s, r.Key.End/s, r.Value)
	}
	// Output:
	// at 65 s: 0 sent
	// ann [0s, 60s): 2 clicks
	// bob [0s, 60s): 1 clicks
}
