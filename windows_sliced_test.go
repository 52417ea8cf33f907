package eddy_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// slicedTopology is Source("in") → GroupByKey → WindowedBy(w) with
// EmitFinal → a count ("counts" → "out-counts") and a sum of the values
// with its maximum ("sums" → "out-sums", as "sum/max"), with late records
// to "late", beside a processor that fails on the value "fail" (to abort
// a transaction).
func slicedTopology(w eddy.TimeWindows) *eddy.Topology {
	str, i64 := serde.String(), serde.Int64()
	topo := eddy.NewTopology()
	s := eddy.Source(topo, "in", str, str)
	ws := eddy.WindowedBy(eddy.GroupByKey(s, str), w).Emit(eddy.EmitFinal)
	render := func(k eddy.Windowed[string], v string) (string, string) {
		return fmt.Sprintf("%s@[%d,%d)", k.Key, k.Start, k.End), v
	}
	counts := eddy.MapValues(eddy.ToStream(eddy.WindowCount(ws, "counts")), func(_ eddy.Windowed[string], n int64) string { return fmt.Sprint(n) })
	eddy.To(eddy.Map(counts, render), "out-counts", str, str)
	// A sum and a maximum packed in one int64 (sum × 1000 + max), merged
	// by adding the sums and keeping the larger maximum.
	sums := eddy.WindowAggregate(ws, "sums", func() int64 { return 0 },
		func(_, v string, a int64) int64 { n := atoi(v); return (a/1000+n)*1000 + max(a%1000, n) },
		func(_ string, a, b int64) int64 { return (a/1000+b/1000)*1000 + max(a%1000, b%1000) }, i64)
	sumMax := eddy.MapValues(eddy.ToStream(sums), func(_ eddy.Windowed[string], a int64) string { return fmt.Sprint(a/1000, "/", a%1000) })
	eddy.To(eddy.Map(sumMax, render), "out-sums", str, str)
	eddy.To(eddy.LateRecords(ws), "late", str, str)
	eddy.Process(s, "fail-on", func() eddy.Processor[string, string, string, string] { return failOn{} })
	return topo
}

// slicedInput is a random input: keys k0…k4, values 1…9, times that
// mostly advance but often step back (out of order, some late for some or
// all of their windows) and sometimes jump (leaving windows empty), and now and then a record that fails first (its
// transaction aborts) and is sent again.
type slicedRecord struct {
	key, value string
	ts         int64
	failFirst  bool
}

func slicedInput(seed uint64, n int) []slicedRecord {
	rng := rand.New(rand.NewPCG(seed, 5))
	var recs []slicedRecord
	now := int64(rng.IntN(3000))
	for range n {
		ts := now
		switch rng.IntN(20) {
		case 0, 1, 2, 3, 4: // back in time, up to 15s: late for some windows or all
			ts = max(0, now-int64(rng.IntN(15000)))
		case 5: // a gap, longer than a window: windows without slices
			now += 15000 + int64(rng.IntN(20000))
			ts = now
		default:
			now += int64(rng.IntN(1500))
			ts = now
		}
		recs = append(recs, slicedRecord{key: fmt.Sprint("k", rng.IntN(5)), value: fmt.Sprint(1 + rng.IntN(9)), ts: ts, failFirst: rng.IntN(15) == 0})
	}
	return recs
}

// runSliced pipes recs into a driver of slicedTopology(w), restarting it
// after every restartEvery-th record (0: never), ends the input, and
// returns what each output topic got, as "key=value@ts".
func runSliced(t *testing.T, w eddy.TimeWindows, recs []slicedRecord, restartEvery int) map[string][]string {
	t.Helper()
	d, err := eddytest.New(slicedTopology(w), eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got := map[string][]string{}
	read := func() {
		for _, topic := range []string{"out-counts", "out-sums", "late"} {
			out, err := eddytest.Output(d, topic, serde.String(), serde.String()).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range out {
				got[topic] = append(got[topic], fmt.Sprintf("%s=%s@%d", r.Key, r.Value, r.Timestamp))
			}
		}
	}
	for i, r := range recs {
		if r.failFirst {
			if err := d.PipeRaw("in", []byte(r.key), []byte("fail"), r.ts); err == nil {
				t.Fatal("no error from a failing record")
			}
		}
		if err := d.PipeRaw("in", []byte(r.key), []byte(r.value), r.ts); err != nil {
			t.Fatal(err)
		}
		read()
		if restartEvery > 0 && (i+1)%restartEvery == 0 {
			if err := d.Restart(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := d.EndOfInput(); err != nil {
		t.Fatal(err)
	}
	read()
	return got
}

// TestSlicedHoppingWindowsMatchWindows: over random input with records out
// of order and late (for some of their windows or all), aborted
// transactions and restarts, a Sliced hopping count and aggregate emit
// exactly what the same aggregations over whole windows emit, record for
// record, and drop the same late records; with slices of the advance
// (size a multiple of it) and of gcd(size, advance) (not a multiple).
func TestSlicedHoppingWindowsMatchWindows(t *testing.T) {
	const s = time.Second
	shapes := []struct{ size, advance, grace time.Duration }{
		{10 * s, 2 * s, 4 * s}, // q5's
		{10 * s, 4 * s, 2 * s}, // slices of 2s
		{9 * s, 6 * s, 0},      // slices of 3s
		{7 * s, 3 * s, 5 * s},  // slices of 1s
		{5 * s, 5 * s / 2, s},
	}
	for seed := range uint64(12) {
		shape := shapes[seed%uint64(len(shapes))]
		restartEvery := []int{0, 3, 7}[seed%3]
		t.Run(fmt.Sprintf("seed %d size %v advance %v grace %v restart every %d", seed, shape.size, shape.advance, shape.grace, restartEvery), func(t *testing.T) {
			recs := slicedInput(seed, 150)
			w := eddy.HoppingWindows(shape.size, shape.advance).WithGrace(shape.grace)
			want := runSliced(t, w, recs, 0)
			got := runSliced(t, w.Sliced(), recs, restartEvery)
			if len(want["out-counts"]) == 0 || len(want["late"]) == 0 {
				t.Fatalf("%d windows, %d late records: the input tests too little", len(want["out-counts"]), len(want["late"]))
			}
			t.Logf("%d windows, %d late records", len(want["out-counts"]), len(want["late"]))
			for _, topic := range []string{"out-counts", "out-sums", "late"} {
				if !slices.Equal(got[topic], want[topic]) {
					t.Errorf("%s: sliced and whole windows differ\nsliced %q\nwhole  %q", topic, got[topic], want[topic])
				}
			}
		})
	}
}

// TestSlicedRecordLateForSomeWindows: a record whose slice is in a closed
// window and in open ones counts in the open ones only; the closed
// window, emitted already, is not emitted again.
func TestSlicedRecordLateForSomeWindows(t *testing.T) {
	const s = 1000
	// Size 10s, advance 5s, no grace: 7s is in [0,10) and [5,15).
	d, err := eddytest.New(slicedTopology(eddy.HoppingWindows(10*time.Second, 5*time.Second).Sliced()), eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := eddytest.Input(d, "in", serde.String(), serde.String())
	for _, ts := range []int64{2 * s, 10 * s, 7 * s, 16 * s} { // 10s closes [0,10); 16s closes [5,15)
		if err := in.Pipe("a", "1", ts); err != nil {
			t.Fatal(err)
		}
	}
	out, err := eddytest.Output(d, "out-counts", serde.String(), serde.String()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range out {
		got = append(got, r.Key+"="+r.Value)
	}
	// [0,10) closed at 10s with the record at 2s alone; 7s then counts in
	// [5,15) only, with 10s.
	if want := []string{"a@[0,10000)=1", "a@[5000,15000)=2"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if n := d.LateRecordsDropped(); n != 0 {
		t.Errorf("%d records dropped as late, want 0: 7s was in time for [5,15)", n)
	}
}

// TestSlicedStoreKeepsSlices: the store holds one entry per key and slice
// (not per window), and drops them once no window that holds them can be
// open.
func TestSlicedStoreKeepsSlices(t *testing.T) {
	const s = 1000
	d, err := eddytest.New(slicedTopology(eddy.HoppingWindows(10*time.Second, 4*time.Second).Sliced()), eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := eddytest.Input(d, "in", serde.String(), serde.String())
	for _, ts := range []int64{1 * s, 1500, 3 * s, 40 * s} {
		if err := in.Pipe("a", "1", ts); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := eddytest.WindowStore(d, eddy.NewWindowStoreSpec("counts", 10*time.Second, serde.String(), serde.Int64()))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for e, err := range ws.FetchAll(0, 1<<62) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprint(e.Key, "@", e.Start, "=", e.Value))
	}
	// Slices of gcd(10s, 4s) = 2s; at stream time 40s, retention 10s,
	// segments of 5s: the slices of 0s and 2s are gone.
	if want := []string{"a@40000=1"}; !slices.Equal(got, want) {
		t.Errorf("store %q, want %q", got, want)
	}
}

// ExampleTimeWindows_Sliced counts clicks per user in windows of 10s that
// start every 2s, keeping one count per user and 2s slice.
func ExampleTimeWindows_Sliced() {
	topo := eddy.NewTopology()
	clicks := eddy.Source(topo, "clicks", serde.String(), serde.String())
	windows := eddy.HoppingWindows(10*time.Second, 2*time.Second).WithGrace(time.Second).Sliced()
	counts := eddy.WindowCount(eddy.WindowedBy(eddy.GroupByKey(clicks, serde.String()), windows).Emit(eddy.EmitFinal), "clicks-per-10s")
	eddy.To(eddy.ToStream(counts), "counts", eddy.WindowedSerde(serde.String()), serde.Int64())

	d, err := eddytest.New(topo, eddytest.Options{})
	if err != nil {
		panic(err)
	}
	defer d.Close()
	in := eddytest.Input(d, "clicks", serde.String(), serde.String())
	for _, ts := range []int64{1000, 3000, 9000, 25000} {
		if err := in.Pipe("ann", "click", ts); err != nil {
			panic(err)
		}
	}
	out, err := eddytest.Output(d, "counts", eddy.WindowedSerde(serde.String()), serde.Int64()).ReadAll()
	if err != nil {
		panic(err)
	}
	for _, r := range out {
		fmt.Printf("%s [%d,%d): %d\n", r.Key.Key, r.Key.Start, r.Key.End, r.Value)
	}
	// Output:
	// ann [0,10000): 3
	// ann [2000,12000): 2
	// ann [4000,14000): 1
	// ann [6000,16000): 1
	// ann [8000,18000): 1
}
