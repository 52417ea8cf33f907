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

// sessions renders outputs as "key@[start,end]=count", or "=nil" for a
// tombstone (a session replaced by a merge).
func sessions(t *testing.T, out *eddytest.OutputTopic[eddy.Windowed[string], int64]) []string {
	t.Helper()
	recs, err := out.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		v := fmt.Sprint(r.Value)
		if r.Tombstone {
			v = "nil"
		}
		got = append(got, fmt.Sprintf("%s@[%d,%d]=%s", r.Key.Key, r.Key.Start, r.Key.End, v))
	}
	return got
}

func TestSessionWindows(t *testing.T) {
	const s = 1000
	t.Run("every update with merges", func(t *testing.T) {
		_, in, out := windowCountDriver(t, eddy.SessionWindowsWithGap(5*time.Second).WithGrace(10*time.Second), eddy.EmitEveryUpdate)
		// 0s and 3s: one session. 20s: a new one. 12s: 12-3 > 5 and
		// 20-12 > 5, its own session. 16s bridges [12] and [20]: merged
		// into [12,20] and the two old ones are replaced (tombstones).
		pipeAll(t, in, timed{"a", 0}, timed{"a", 3 * s}, timed{"b", 4 * s}, timed{"a", 20 * s}, timed{"a", 12 * s}, timed{"a", 16 * s})
		want := []string{
			"a@[0,0]=1",
			"a@[0,0]=nil", "a@[0,3000]=2",
			"b@[4000,4000]=1",
			"a@[20000,20000]=1",
			"a@[12000,12000]=1",
			"a@[12000,12000]=nil", "a@[20000,20000]=nil", "a@[12000,20000]=3",
		}
		if got := sessions(t, out); !slices.Equal(got, want) {
			t.Errorf("got  %q\nwant %q", got, want)
		}
	})
	t.Run("final, late and closed sessions", func(t *testing.T) {
		d, in, out := windowCountDriver(t, eddy.SessionWindowsWithGap(5*time.Second).WithGrace(1*time.Second), eddy.EmitFinal)
		// A session closes once stream time passes end + gap + grace:
		// [0,3] closes at stream time > 9s.
		pipeAll(t, in, timed{"a", 0}, timed{"a", 3 * s}, timed{"b", 5 * s}, timed{"b", 9 * s})
		if got := sessions(t, out); len(got) != 0 {
			t.Fatalf("emitted before any session closed: %q", got)
		}
		pipeAll(t, in, timed{"b", 9*s + 1})
		if got, want := sessions(t, out), []string{"a@[0,3000]=2"}; !slices.Equal(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
		// 2s is late: its session could only be [0..] which closed.
		// 30s closes b's [5,9.001].
		pipeAll(t, in, timed{"a", 2 * s}, timed{"c", 30 * s})
		if got, want := sessions(t, out), []string{"b@[5000,9001]=3"}; !slices.Equal(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
		if n := d.LateRecordsDropped(); n != 1 {
			t.Errorf("LateRecordsDropped = %d, want 1", n)
		}
	})
	t.Run("retention expires old sessions", func(t *testing.T) {
		d, in, _ := windowCountDriver(t, eddy.SessionWindowsWithGap(1*time.Second), eddy.EmitFinal)
		for i := int64(0); i < 50; i++ {
			pipeAll(t, in, timed{fmt.Sprint("k", i%4), i * 2 * s})
		}
		st, err := eddytest.SessionStore(d, eddy.NewSessionStoreSpec("counts", time.Second, serde.String(), serde.Int64()))
		if err != nil {
			t.Fatal(err)
		}
		var ends []int64
		for s, err := range st.FetchEnded(0, 1<<62) {
			if err != nil {
				t.Fatal(err)
			}
			ends = append(ends, s.Key.End)
		}
		// Stream time 98s, retention 2s (2 × gap + grace: a record in
		// time reaches sessions a gap older than the closing ones), 1s
		// segments: sessions that ended before 96s are dropped.
		if want := []int64{96 * s, 98 * s}; !slices.Equal(ends, want) {
			t.Errorf("session ends in the store: %v, want %v", ends, want)
		}
	})
}
