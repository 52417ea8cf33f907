package eddy_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// TestWindowedTopologyErrors: a window definition or an aggregation that
// cannot work is refused when the topology is built, naming what to fix.
func TestWindowedTopologyErrors(t *testing.T) {
	sum := func(_ string, a, b int64) int64 { return a + b }
	add := func(_ string, _ string, n int64) int64 { return n + 1 }
	zero := func() int64 { return 0 }
	cases := []struct {
		name  string
		build func(g eddy.GroupedStream[string, string])
		want  string
	}{
		{"zero tumbling size", func(g eddy.GroupedStream[string, string]) {
			eddy.WindowCount(eddy.WindowedBy(g, eddy.TumblingWindows(0)), "w")
		}, "window size 0s: use at least 1ms"},
		{"hop longer than the size", func(g eddy.GroupedStream[string, string]) {
			eddy.WindowCount(eddy.WindowedBy(g, eddy.HoppingWindows(time.Second, 2*time.Second)), "w")
		}, "at most the size"},
		{"negative sliding grace", func(g eddy.GroupedStream[string, string]) {
			eddy.WindowCount(eddy.WindowedBy(g, eddy.SlidingWindowsWithTimeDifference(time.Second).WithGrace(-time.Second)), "w")
		}, "sliding window grace -1s"},
		{"zero session gap", func(g eddy.GroupedStream[string, string]) {
			eddy.WindowCount(eddy.WindowedBy(g, eddy.SessionWindowsWithGap(0)), "w")
		}, "session gap 0s"},
		{"no windows", func(g eddy.GroupedStream[string, string]) {
			eddy.WindowCount(eddy.WindowedBy(g, nil), "w")
		}, "no windows given"},
		{"sessions without merge", func(g eddy.GroupedStream[string, string]) {
			eddy.WindowAggregate(eddy.WindowedBy(g, eddy.SessionWindowsWithGap(time.Second)), "w", zero, add, nil, serde.Int64())
		}, "pass a merge function"},
		{"no add", func(g eddy.GroupedStream[string, string]) {
			eddy.WindowAggregate(eddy.WindowedBy(g, eddy.TumblingWindows(time.Second)), "w", zero, nil, sum, serde.Int64())
		}, "pass init and add"},
		{"sliced tumbling windows", func(g eddy.GroupedStream[string, string]) {
			eddy.WindowCount(eddy.WindowedBy(g, eddy.TumblingWindows(time.Second).Sliced()).Emit(eddy.EmitFinal), "w")
		}, "each window is its own slice already; drop Sliced"},
		{"sliced windows emitting every update", func(g eddy.GroupedStream[string, string]) {
			eddy.WindowCount(eddy.WindowedBy(g, eddy.HoppingWindows(10*time.Second, 2*time.Second).Sliced()), "w")
		}, "call Emit(EmitFinal) on the windowed stream, or drop Sliced"},
		{"sliced windows without merge", func(g eddy.GroupedStream[string, string]) {
			eddy.WindowAggregate(eddy.WindowedBy(g, eddy.HoppingWindows(10*time.Second, 2*time.Second).Sliced()).Emit(eddy.EmitFinal), "w", zero, add, nil, serde.Int64())
		}, "pass a merge function, or drop Sliced"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			topo := eddy.NewTopology()
			tc.build(eddy.GroupByKey(eddy.Source(topo, "in", serde.String(), serde.String()), serde.String()))
			d, err := eddytest.New(topo, eddytest.Options{})
			if err == nil {
				d.Close()
				t.Fatalf("built; want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "eddy:") {
				t.Errorf("error %q, want one that starts with eddy: and contains %q", err, tc.want)
			}
		})
	}
}

// TestWindowOutputTimestamps: the timestamps WindowAggregate documents.
// With every update, the record that made it; final results, the last
// millisecond of their window.
func TestWindowOutputTimestamps(t *testing.T) {
	const s = 1000
	cases := []struct {
		name    string
		windows eddy.Windows
		emit    eddy.EmitStrategy
		in      []int64
		want    []int64
	}{
		{"time, every update", eddy.TumblingWindows(10 * time.Second), eddy.EmitEveryUpdate, []int64{3 * s, 4 * s}, []int64{3 * s, 4 * s}},
		{"time, final: end - 1", eddy.TumblingWindows(10 * time.Second), eddy.EmitFinal, []int64{3 * s, 25 * s}, []int64{10*s - 1}},
		{"sliding, final: end", eddy.SlidingWindowsWithTimeDifference(10 * time.Second), eddy.EmitFinal, []int64{30 * s, 45 * s}, []int64{30 * s}},
		{"session, final: end", eddy.SessionWindowsWithGap(5 * time.Second), eddy.EmitFinal, []int64{1 * s, 3 * s, 30 * s}, []int64{3 * s}},
		{"session, every update", eddy.SessionWindowsWithGap(5 * time.Second), eddy.EmitEveryUpdate, []int64{1 * s, 3 * s}, []int64{1 * s, 3 * s, 3 * s}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			topo := eddy.NewTopology()
			src := eddy.Source(topo, "in", serde.String(), serde.String())
			ws := eddy.WindowedBy(eddy.GroupByKey(src, serde.String()), tc.windows).Emit(tc.emit)
			eddy.To(eddy.ToStream(eddy.WindowCount(ws, "counts")), "out", eddy.WindowedSerde(serde.String()), serde.Int64())
			d, err := eddytest.New(topo, eddytest.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			in := eddytest.Input(d, "in", serde.String(), serde.String())
			for _, ts := range tc.in {
				if err := in.Pipe("a", "v", ts); err != nil {
					t.Fatal(err)
				}
			}
			recs, err := eddytest.Output(d, "out", eddy.WindowedSerde(serde.String()), serde.Int64()).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, r := range recs {
				got = append(got, r.Timestamp)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("output timestamps %v, want %v", got, tc.want)
			}
		})
	}
}
