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

// windowed renders a windowed count as "key@[start,end)=count".
func windowed(recs []eddy.Record[eddy.Windowed[string], int64]) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprintf("%s@[%d,%d)=%d", r.Key.Key, r.Key.Start, r.Key.End, r.Value)
	}
	return out
}

// windowCountDriver runs Source("in") → GroupByKey → WindowedBy(w) →
// WindowCount("counts") → "out", with late records to "late", beside a
// processor that fails on the value "fail" (to abort a transaction).
func windowCountDriver(t *testing.T, w eddy.Windows, emit eddy.EmitStrategy) (*eddytest.Driver, *eddytest.InputTopic[string, string], *eddytest.OutputTopic[eddy.Windowed[string], int64]) {
	t.Helper()
	topo := eddy.NewTopology()
	s := eddy.Source(topo, "in", serde.String(), serde.String())
	ws := eddy.WindowedBy(eddy.GroupByKey(s, serde.String()), w).Emit(emit)
	eddy.To(eddy.ToStream(eddy.WindowCount(ws, "counts")), "out", eddy.WindowedSerde(serde.String()), serde.Int64())
	eddy.To(eddy.LateRecords(ws), "late", serde.String(), serde.String())
	eddy.Process(s, "fail-on", func() eddy.Processor[string, string, string, string] { return failOn{} })
	d, err := eddytest.New(topo, eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, eddytest.Input(d, "in", serde.String(), serde.String()),
		eddytest.Output(d, "out", eddy.WindowedSerde(serde.String()), serde.Int64())
}

// storedCounts returns the committed content of the window store
// "counts" (of 10s windows), through the store's iterator.
func storedCounts(t *testing.T, d *eddytest.Driver) []eddy.WindowEntry[string, int64] {
	t.Helper()
	ws, err := eddytest.WindowStore(d, eddy.NewWindowStoreSpec("counts", 10*time.Second, serde.String(), serde.Int64()))
	if err != nil {
		t.Fatal(err)
	}
	var entries []eddy.WindowEntry[string, int64]
	for e, err := range ws.FetchAll(0, 1<<62) {
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	return entries
}

type timed struct {
	key string
	ts  int64
}

func pipeAll(t *testing.T, in *eddytest.InputTopic[string, string], recs ...timed) {
	t.Helper()
	for _, r := range recs {
		if err := in.Pipe(r.key, fmt.Sprint(r.ts), r.ts); err != nil {
			t.Fatal(err)
		}
	}
}

func readWindowed(t *testing.T, out *eddytest.OutputTopic[eddy.Windowed[string], int64]) []string {
	t.Helper()
	recs, err := out.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return windowed(recs)
}

func TestTumblingWindows(t *testing.T) {
	const s = 1000
	cases := []struct {
		name  string
		emit  eddy.EmitStrategy
		grace time.Duration
		in    []timed
		want  []string
		late  []string
	}{
		{
			name: "every update, in order",
			emit: eddy.EmitEveryUpdate,
			in:   []timed{{"a", 1 * s}, {"a", 9 * s}, {"b", 10 * s}, {"a", 10 * s}, {"a", 25 * s}},
			want: []string{"a@[0,10000)=1", "a@[0,10000)=2", "b@[10000,20000)=1", "a@[10000,20000)=1", "a@[20000,30000)=1"},
		},
		{
			// No grace: a record is late once stream time reached its
			// window's end. 9s at stream time 12s: window [0,10) closed.
			name: "every update, late without grace",
			emit: eddy.EmitEveryUpdate,
			in:   []timed{{"a", 1 * s}, {"a", 12 * s}, {"a", 9 * s}},
			want: []string{"a@[0,10000)=1", "a@[10000,20000)=1"},
			late: []string{"a=9000"},
		},
		{
			// Grace 3s: at stream time 12s, window [0,10) closes at 13s,
			// so 9s is accepted; at stream time 13s it is late.
			name:  "every update, out of order within grace",
			emit:  eddy.EmitEveryUpdate,
			grace: 3 * time.Second,
			in:    []timed{{"a", 1 * s}, {"a", 12 * s}, {"a", 9 * s}, {"a", 13 * s}, {"a", 8 * s}},
			want:  []string{"a@[0,10000)=1", "a@[10000,20000)=1", "a@[0,10000)=2", "a@[10000,20000)=2"},
			late:  []string{"a=8000"},
		},
		{
			// Final: [0,10) closes when stream time reaches 10s + 2s.
			// 11.999s does not close it, 12s does; the late 5s record
			// (stream time 12s) is not counted.
			name:  "final, closes at end + grace",
			emit:  eddy.EmitFinal,
			grace: 2 * time.Second,
			in: []timed{{"a", 1 * s}, {"b", 2 * s}, {"a", 9 * s}, {"a", 11*s + 999}, {"b", 12 * s},
				{"a", 5 * s}, {"a", 31 * s}, {"c", 100 * s}},
			want: []string{"a@[0,10000)=2", "b@[0,10000)=1", "a@[10000,20000)=1", "b@[10000,20000)=1", "a@[30000,40000)=1"},
			late: []string{"a=5000"},
		},
		{
			name: "final, no grace, out of order before close",
			emit: eddy.EmitFinal,
			in:   []timed{{"a", 5 * s}, {"a", 3 * s}, {"a", 10 * s}, {"a", 4 * s}},
			want: []string{"a@[0,10000)=2"},
			late: []string{"a=4000"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, in, out := windowCountDriver(t, eddy.TumblingWindows(10*time.Second).WithGrace(tc.grace), tc.emit)
			pipeAll(t, in, tc.in...)
			if got := readWindowed(t, out); !slices.Equal(got, tc.want) {
				t.Errorf("outputs\n got %q\nwant %q", got, tc.want)
			}
			lateRecs, err := eddytest.Output(d, "late", serde.String(), serde.String()).ReadKeyValues()
			if err != nil {
				t.Fatal(err)
			}
			var late []string
			for _, kv := range lateRecs {
				late = append(late, kv.Key+"="+kv.Value)
			}
			if !slices.Equal(late, tc.late) {
				t.Errorf("late records %q, want %q", late, tc.late)
			}
			if got := d.LateRecordsDropped(); got != int64(len(tc.late)) {
				t.Errorf("LateRecordsDropped = %d, want %d", got, len(tc.late))
			}
		})
	}
}

func TestHoppingWindows(t *testing.T) {
	const s = 1000
	// Size 10s, advance 5s: 7s is in [0,10) and [5,15); 12s in [5,15)
	// and [10,20).
	t.Run("every update", func(t *testing.T) {
		_, in, out := windowCountDriver(t, eddy.HoppingWindows(10*time.Second, 5*time.Second), eddy.EmitEveryUpdate)
		pipeAll(t, in, timed{"a", 2 * s}, timed{"a", 7 * s}, timed{"a", 12 * s})
		want := []string{"a@[0,10000)=1", "a@[0,10000)=2", "a@[5000,15000)=1", "a@[5000,15000)=2", "a@[10000,20000)=1"}
		if got := readWindowed(t, out); !slices.Equal(got, want) {
			t.Errorf("got %q\nwant %q", got, want)
		}
	})
	t.Run("final with grace", func(t *testing.T) {
		_, in, out := windowCountDriver(t, eddy.HoppingWindows(10*time.Second, 5*time.Second).WithGrace(1*time.Second), eddy.EmitFinal)
		// At 16s: [0,10) closed (10+1 <= 16), [5,15) closes at 16: yes.
		pipeAll(t, in, timed{"a", 2 * s}, timed{"a", 7 * s}, timed{"b", 9 * s}, timed{"a", 12 * s}, timed{"a", 16 * s})
		want := []string{"a@[0,10000)=2", "b@[0,10000)=1", "a@[5000,15000)=2", "b@[5000,15000)=1"}
		if got := readWindowed(t, out); !slices.Equal(got, want) {
			t.Errorf("got %q\nwant %q", got, want)
		}
		// 25s closes [10,20) (20+1 <= 25) but not [15,25).
		pipeAll(t, in, timed{"a", 25 * s})
		want = []string{"a@[10000,20000)=2"}
		if got := readWindowed(t, out); !slices.Equal(got, want) {
			t.Errorf("got %q\nwant %q", got, want)
		}
	})
}

// TestWindowRetention: a window store keeps windows for size + grace of
// stream time and drops whole segments after; the store stays bounded.
func TestWindowRetention(t *testing.T) {
	const s = 1000
	d, in, out := windowCountDriver(t, eddy.TumblingWindows(10*time.Second), eddy.EmitFinal)
	for i := int64(0); i < 100; i++ {
		pipeAll(t, in, timed{fmt.Sprint("k", i%3), i * s})
	}
	var starts []int64
	for _, e := range storedCounts(t, d) {
		if !slices.Contains(starts, e.Start) {
			starts = append(starts, e.Start)
		}
	}
	// Stream time 99s, retention 10s: windows starting before 89s are
	// expired, dropped by 5s segments (segment = max(retention/2, 1s)):
	// everything below 85s is gone, the open window 90s stays.
	if want := []int64{90 * s}; !slices.Equal(starts, want) {
		t.Errorf("window starts in the store: %v, want %v", starts, want)
	}
	if got := len(readWindowed(t, out)); got != 9*3 {
		t.Errorf("%d final windows, want 27 (windows 0..80s, 3 keys)", got)
	}
}

// failOn fails on records whose value is "fail".
type failOn struct{}

func (failOn) Init(*eddy.ProcessorContext[string, string]) error { return nil }
func (failOn) Close() error                                      { return nil }
func (failOn) Process(r eddy.Record[string, string]) error {
	if r.Value == "fail" {
		return fmt.Errorf("asked to fail")
	}
	return nil
}

// TestWindowExpiryAfterAbort: a transaction that dropped expired segments
// and then aborted must not stop a later one from dropping them.
func TestWindowExpiryAfterAbort(t *testing.T) {
	const s = 1000
	d, in, _ := windowCountDriver(t, eddy.TumblingWindows(10*time.Second), eddy.EmitEveryUpdate)
	if err := in.Pipe("a", "ok", 1*s); err != nil {
		t.Fatal(err)
	}
	// Stream time 50s expires [0,10); the record then fails: rolled back.
	if err := in.Pipe("b", "fail", 50*s); err == nil {
		t.Fatal("no error from a failing record")
	}
	if err := in.Pipe("b", "ok", 51*s); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range storedCounts(t, d) {
		keys = append(keys, fmt.Sprint(e.Key, "@", e.Start))
	}
	if want := []string{"b@50000"}; !slices.Equal(keys, want) {
		t.Errorf("windows in the store: %q, want %q", keys, want)
	}
}

// TestFinalWindowAfterAbort: a transaction that emitted a closed window
// and then aborted must not keep the replay from emitting it.
func TestFinalWindowAfterAbort(t *testing.T) {
	const s = 1000
	_, in, out := windowCountDriver(t, eddy.TumblingWindows(10*time.Second), eddy.EmitFinal)
	if err := in.Pipe("a", "ok", 1*s); err != nil {
		t.Fatal(err)
	}
	if err := in.Pipe("a", "fail", 12*s); err == nil { // closes [0,10), then aborts
		t.Fatal("no error from a failing record")
	}
	if got := readWindowed(t, out); len(got) != 0 {
		t.Fatalf("an aborted transaction's output is visible: %q", got)
	}
	if err := in.Pipe("a", "ok", 12*s); err != nil { // the replay
		t.Fatal(err)
	}
	if got, want := readWindowed(t, out), []string{"a@[0,10000)=1"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
