package eddy_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
)

// Sliding windows are rendered "key@[start,end)" by windowed(), though
// both ends are inclusive: the end is start + 10s.
func TestSlidingWindows(t *testing.T) {
	const s = 1000
	t.Run("every update, out of order", func(t *testing.T) {
		_, in, out := windowCountDriver(t, eddy.SlidingWindowsWithTimeDifference(10*time.Second).WithGrace(20*time.Second), eddy.EmitEveryUpdate)
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
		d, in, out := windowCountDriver(t, eddy.SlidingWindowsWithTimeDifference(10*time.Second), eddy.EmitFinal)
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

// slidingReference is the record-keeping sliding count this package had
// before it kept window aggregates only: it stores every record and
// recounts each window the new record changes. TestSlidingMatchesReference
// checks the window-aggregate algorithm against it.
type slidingReference struct {
	diff, grace int64
	final       bool
	now         int64
	emitted     int64                      // windows starting before it were emitted (final)
	recs        map[string][]int64         // each key's record timestamps
	windows     map[string]map[int64]int64 // each key's window counts by start
}

// process returns the outputs of one record, rendered as windowed() does
// (final outputs sorted), and whether it was late.
func (r *slidingReference) process(key string, ts int64) (out []string, late bool) {
	r.now = max(r.now, ts)
	open := r.now - r.diff - r.grace
	render := func(k string, start, n int64) string {
		return fmt.Sprintf("%s@[%d,%d)=%d", k, start, start+r.diff, n)
	}
	if r.final && open > r.emitted {
		for k, ws := range r.windows {
			for start, n := range ws {
				if start >= r.emitted && start < open {
					out = append(out, render(k, start, n))
				}
			}
		}
		slices.Sort(out)
		r.emitted = open
	}
	if ts < open {
		return out, true
	}
	r.recs[key] = append(r.recs[key], ts)
	starts := []int64{ts - r.diff}
	hasLater := false
	for _, o := range r.recs[key] {
		switch {
		case o > ts && o <= ts+r.diff:
			starts, hasLater = append(starts, o-r.diff), true
		case o == ts+r.diff+1:
			hasLater = true
		case o < ts && o >= ts-r.diff-1:
			starts = append(starts, o+1)
		}
	}
	if hasLater {
		starts = append(starts, ts+1)
	}
	for i := range starts {
		starts[i] = max(starts[i], 0)
	}
	slices.Sort(starts)
	for _, start := range slices.Compact(starts) {
		if start < open {
			continue
		}
		var n int64
		for _, o := range r.recs[key] {
			if o >= start && o <= start+r.diff {
				n++
			}
		}
		if r.windows[key] == nil {
			r.windows[key] = map[int64]int64{}
		}
		r.windows[key][start] = n
		if !r.final {
			out = append(out, render(key, start, n))
		}
	}
	return out, false
}

// TestSlidingMatchesReference feeds random, partly out-of-order and late
// records to a sliding count and to the record-keeping reference: every
// record's outputs must be the same (final outputs compared as a set per
// record, since keys of one window may come in another order).
func TestSlidingMatchesReference(t *testing.T) {
	const s = 1000
	for _, tc := range []struct {
		name        string
		diff, grace int64
		final       bool
		seed        uint64
	}{
		{"every update, no grace", 10 * s, 0, false, 1},
		{"every update, grace", 10 * s, 7 * s, false, 2},
		{"final, no grace", 10 * s, 0, true, 3},
		{"final, grace", 10 * s, 7 * s, true, 4},
		{"every update, short windows", 3, 2, false, 5},
		{"final, short windows", 3, 2, true, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			emit := eddy.EmitEveryUpdate
			if tc.final {
				emit = eddy.EmitFinal
			}
			w := eddy.SlidingWindowsWithTimeDifference(time.Duration(tc.diff) * time.Millisecond).
				WithGrace(time.Duration(tc.grace) * time.Millisecond)
			d, in, out := windowCountDriver(t, w, emit)
			ref := &slidingReference{diff: tc.diff, grace: tc.grace, final: tc.final,
				recs: map[string][]int64{}, windows: map[string]map[int64]int64{}}
			rng := rand.New(rand.NewPCG(tc.seed, 0))
			var clock, late int64
			for i := range 400 {
				// Time moves on by up to half a window; a third of the
				// records come up to 2 × (diff + grace) early: in
				// grace, late for some windows, or late.
				clock += rng.Int64N(tc.diff/2 + 1)
				ts := clock
				if rng.IntN(3) == 0 {
					ts = max(0, clock-rng.Int64N(2*(tc.diff+tc.grace)+1))
				}
				key := fmt.Sprint("k", rng.IntN(3))
				pipeAll(t, in, timed{key, ts})
				want, isLate := ref.process(key, ts)
				if isLate {
					late++
				}
				got := readWindowed(t, out)
				if tc.final {
					slices.Sort(got)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("record %d (%s at %d):\n got %q\nwant %q", i, key, ts, got, want)
				}
			}
			if late == 0 {
				t.Error("no record was late: the test does not cover late records")
			}
			if n := d.LateRecordsDropped(); n != late {
				t.Errorf("LateRecordsDropped = %d, want %d", n, late)
			}
		})
	}
}
