package eddy_test

import (
	"slices"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

func slidingCountDriver(t *testing.T, w eddy.SlidingWindows, emit eddy.EmitStrategy) (*eddytest.Driver, *eddytest.InputTopic[string, string], *eddytest.OutputTopic[eddy.Windowed[string], int64]) {
	t.Helper()
	topo := eddy.NewTopology()
	s := eddy.Source(topo, "in", serde.String(), serde.String())
	ws := eddy.WindowedBy(eddy.GroupByKey(s, serde.String()), w).Emit(emit)
	eddy.To(eddy.ToStream(eddy.WindowCount(ws, "sliding")), "out", eddy.WindowedSerde(serde.String()), serde.Int64())
	eddy.To(eddy.LateRecords(ws), "late", serde.String(), serde.String())
	d, err := eddytest.New(topo, eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, eddytest.Input(d, "in", serde.String(), serde.String()),
		eddytest.Output(d, "out", eddy.WindowedSerde(serde.String()), serde.Int64())
}

// Sliding windows are rendered "key@[start,end)" by windowed(), though
// both ends are inclusive: the end is start + 10s.
func TestSlidingWindows(t *testing.T) {
	const s = 1000
	t.Run("every update, out of order", func(t *testing.T) {
		_, in, out := slidingCountDriver(t, eddy.SlidingWindowsWithTimeDifference(10*time.Second).WithGrace(20*time.Second), eddy.EmitEveryUpdate)
		steps := []struct {
			ts   int64
			want []string
		}{
			// 10s: its left window [0,10].
			{10 * s, []string{"a@[0,10000)=1"}},
			// 15s: its left window [5,15] holds 10s and 15s; the right
			// window of 10s, [10.001,20.001], now holds 15s.
			{15 * s, []string{"a@[5000,15000)=2", "a@[10001,20001)=1"}},
			// 30s: nothing within 10s of it.
			{30 * s, []string{"a@[20000,30000)=1"}},
			// 12s, out of order: its left window [2,12] {10,12}; the left
			// window of 15s [5,15] {10,12,15}; the right window of 10s
			// [10.001,20.001] {12,15}; its own right window
			// [12.001,22.001] {15}.
			{12 * s, []string{"a@[2000,12000)=2", "a@[5000,15000)=3", "a@[10001,20001)=2", "a@[12001,22001)=1"}},
		}
		for _, st := range steps {
			pipeAll(t, in, timed{"a", st.ts})
			if got := readWindowed(t, out); !slices.Equal(got, st.want) {
				t.Errorf("after %d: got %q\nwant %q", st.ts, got, st.want)
			}
		}
	})
	t.Run("final and late", func(t *testing.T) {
		d, in, out := slidingCountDriver(t, eddy.SlidingWindowsWithTimeDifference(10*time.Second), eddy.EmitFinal)
		pipeAll(t, in, timed{"a", 10 * s})
		if got := readWindowed(t, out); len(got) != 0 {
			t.Fatalf("emitted before a window closed: %q", got)
		}
		// No grace: a window closes once stream time passes its end.
		pipeAll(t, in, timed{"a", 15 * s})
		if got, want := readWindowed(t, out), []string{"a@[0,10000)=1"}; !slices.Equal(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
		// Stream time 26s closes [5,15] and [10.001,20.001]; [16,26]
		// holds 26s only (the right window of 15s ends at 25.001).
		pipeAll(t, in, timed{"a", 26 * s})
		want := []string{"a@[5000,15000)=2", "a@[10001,20001)=1"}
		if got := readWindowed(t, out); !slices.Equal(got, want) {
			t.Errorf("got %q\nwant %q", got, want)
		}
		// 5s: every window holding it ended by 15s: late.
		pipeAll(t, in, timed{"a", 5 * s}, timed{"a", 37 * s})
		want = []string{"a@[16000,26000)=1"}
		if got := readWindowed(t, out); !slices.Equal(got, want) {
			t.Errorf("got %q\nwant %q", got, want)
		}
		if n := d.LateRecordsDropped(); n != 1 {
			t.Errorf("LateRecordsDropped = %d, want 1", n)
		}
	})
}
