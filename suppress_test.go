package eddy_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

const sec = 1000 // ms

// suppressDriver builds topo and returns its driver, the input "in" and
// a reader of the output "out" that renders each record as
// "key=value@timestamp" (a tombstone as "key=<nil>@timestamp").
func suppressDriver[K, V any](t *testing.T, topo *eddy.Topology, keys serde.Serde[K], values serde.Serde[V]) (*eddytest.Driver, *eddytest.InputTopic[string, string], func() []string) {
	t.Helper()
	return suppressDriverConfig(t, topo, eddy.Config{}, keys, values)
}

func suppressDriverConfig[K, V any](t *testing.T, topo *eddy.Topology, cfg eddy.Config, keys serde.Serde[K], values serde.Serde[V]) (*eddytest.Driver, *eddytest.InputTopic[string, string], func() []string) {
	t.Helper()
	d, err := eddytest.New(topo, eddytest.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	out := eddytest.Output(d, "out", keys, values)
	read := func() []string {
		t.Helper()
		recs, err := out.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range recs {
			v := fmt.Sprint(r.Value)
			if r.Tombstone {
				v = "<nil>"
			}
			got = append(got, fmt.Sprintf("%v=%s@%d", r.Key, v, r.Timestamp))
		}
		return got
	}
	return d, eddytest.Input(d, "in", serde.String(), serde.String()), read
}

// pipeAt pipes key@ts records ("a@1000") with value "v".
func pipeAt(t *testing.T, in *eddytest.InputTopic[string, string], recs ...string) {
	t.Helper()
	for _, r := range recs {
		k, ts, _ := strings.Cut(r, "@")
		var n int64
		if _, err := fmt.Sscan(ts, &n); err != nil {
			t.Fatalf("bad test record %q", r)
		}
		if err := in.Pipe(k, "v", n); err != nil {
			t.Fatalf("pipe %s: %v", r, err)
		}
	}
}

func expect(t *testing.T, step string, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: output\n got %q\nwant %q", step, got, want)
	}
}

// windowKey renders a windowed key as the output reader does.
func windowKey(k string, start, end int64) string {
	return fmt.Sprint(eddy.Windowed[string]{Key: k, Window: eddy.Window{Start: start, End: end}})
}

// TestSuppressUntilWindowClosesTumbling: 10 s tumbling windows with 5 s of
// grace, counted and suppressed until they close. Each window is forwarded
// once, with its final count, when stream time reaches end + grace, with
// the timestamp of its last update; a late record re-emits nothing.
func TestSuppressUntilWindowClosesTumbling(t *testing.T) {
	topo := eddy.NewTopology()
	ws := eddy.WindowedBy(eddy.GroupByKey(eddy.Source(topo, "in", serde.String(), serde.String()), serde.String()),
		eddy.TumblingWindows(10*time.Second).WithGrace(5*time.Second))
	wkeys := eddy.WindowedSerde(serde.String())
	finals := eddy.Suppress(eddy.WindowCount(ws, "counts"), "finals", eddy.UntilWindowCloses(eddy.BufferConfig{}), wkeys, serde.Int64())
	eddy.To(eddy.ToStream(finals), "out", wkeys, serde.Int64())
	_, in, read := suppressDriver(t, topo, wkeys, serde.Int64())

	pipeAt(t, in, "a@1000", "a@3000", "b@4000", "a@12000")
	expect(t, "window [0,10s) open", read())
	pipeAt(t, in, "a@8000") // within the grace: counted
	pipeAt(t, in, "b@14999")
	expect(t, "stream time 14.999 s, before [0,10s) closes at 15 s", read())
	pipeAt(t, in, "c@15000")
	expect(t, "stream time 15 s: [0,10s) closes", read(),
		windowKey("a", 0, 10*sec)+"=3@8000", windowKey("b", 0, 10*sec)+"=1@4000")
	pipeAt(t, in, "a@2000", "b@9000") // late for [0,10s): dropped, nothing re-emitted
	expect(t, "late records", read())
	pipeAt(t, in, "d@24999")
	expect(t, "stream time 24.999 s", read())
	pipeAt(t, in, "d@40000")
	expect(t, "stream time 40 s: [10s,20s) and [20s,30s) close", read(),
		windowKey("a", 10*sec, 20*sec)+"=1@12000", windowKey("b", 10*sec, 20*sec)+"=1@14999",
		windowKey("c", 10*sec, 20*sec)+"=1@15000", windowKey("d", 20*sec, 30*sec)+"=1@24999")
}

// TestSuppressUntilWindowClosesSessions: with session windows (5 s gap,
// no grace) a merge replaces a held session by a tombstone, which
// UntilWindowCloses drops: only the merged session is forwarded, once it
// closes (stream time past its end + gap).
func TestSuppressUntilWindowClosesSessions(t *testing.T) {
	topo := eddy.NewTopology()
	ws := eddy.WindowedBy(eddy.GroupByKey(eddy.Source(topo, "in", serde.String(), serde.String()), serde.String()),
		eddy.SessionWindowsWithGap(5*time.Second))
	wkeys := eddy.WindowedSerde(serde.String())
	finals := eddy.Suppress(eddy.WindowCount(ws, "sessions"), "finals", eddy.UntilWindowCloses(eddy.BufferConfig{}), wkeys, serde.Int64())
	eddy.To(eddy.ToStream(finals), "out", wkeys, serde.Int64())
	_, in, read := suppressDriver(t, topo, wkeys, serde.Int64())

	pipeAt(t, in, "a@1000", "a@3000", "b@4000")
	pipeAt(t, in, "c@8000") // a's session [1s,3s] closes after 3 s + 5 s
	expect(t, "stream time 8 s", read())
	pipeAt(t, in, "c@8001")
	expect(t, "stream time 8.001 s", read(), windowKey("a", 1000, 3000)+"=2@3000")
	pipeAt(t, in, "c@30000")
	expect(t, "stream time 30 s", read(), windowKey("b", 4000, 4000)+"=1@4000", windowKey("c", 8000, 8001)+"=2@8001")
}

// TestSuppressUntilTimeLimit: a count held 10 s per key. Updates of a held
// key collapse into its latest, forwarded when stream time reaches the
// key's first held update + 10 s, with the latest update's timestamp,
// even when the record that moves stream time never reaches Suppress (a
// "tick", filtered out before the count).
func TestSuppressUntilTimeLimit(t *testing.T) {
	topo := eddy.NewTopology()
	src := eddy.Filter(eddy.Source(topo, "in", serde.String(), serde.String()), func(_, v string) bool { return v != "tick" })
	counts := eddy.Count(eddy.GroupByKey(src, serde.String()), "counts")
	held := eddy.Suppress(counts, "held", eddy.UntilTimeLimit(10*time.Second, eddy.BufferConfig{}), serde.String(), serde.Int64())
	eddy.To(eddy.ToStream(held), "out", serde.String(), serde.Int64())
	_, in, read := suppressDriver(t, topo, serde.String(), serde.Int64())

	pipeAt(t, in, "a@0", "a@2000", "b@5000", "a@9999")
	expect(t, "before 10 s", read())
	pipeAt(t, in, "c@10000")
	expect(t, "stream time 10 s", read(), "a=3@9999")
	pipeAt(t, in, "a@11000", "b@14000")
	expect(t, "stream time 14 s", read())
	pipeAt(t, in, "b@15000") // b held since 5 s: due now, with this update
	expect(t, "stream time 15 s", read(), "b=3@15000")
	pipeAt(t, in, "x@20999")
	expect(t, "stream time 20.999 s", read(), "c=1@10000")
	if err := in.Pipe("tick", "tick", 21000); err != nil {
		t.Fatal(err)
	}
	expect(t, "a tick at 21 s", read(), "a=4@11000")
	pipeAt(t, in, "x@100000")
	expect(t, "stream time 100 s", read(), "x=2@100000")
}

// TestSuppressTombstones: UntilTimeLimit holds a deletion like a value: a
// key deleted while held is forwarded as its tombstone, as Kafka Streams
// does; a key deleted and set again forwards its last value.
func TestSuppressTombstones(t *testing.T) {
	topo := eddy.NewTopology()
	tb := eddy.TableFrom(topo, "in", "rows", serde.String(), serde.String())
	held := eddy.Suppress(tb, "held", eddy.UntilTimeLimit(10*time.Second, eddy.BufferConfig{}), serde.String(), serde.String())
	eddy.To(eddy.ToStream(held), "out", serde.String(), serde.String())
	_, in, read := suppressDriver(t, topo, serde.String(), serde.String())

	for _, step := range []struct {
		key, value string
		ts         int64
	}{{"a", "1", 0}, {"b", "1", 1000}, {"a", "", 2000}, {"b", "", 3000}, {"b", "2", 4000}, {"x", "1", 10000}} {
		var err error
		if step.value == "" {
			err = in.PipeTombstone(step.key, step.ts)
		} else {
			err = in.Pipe(step.key, step.value, step.ts)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	expect(t, "stream time 10 s", read(), "a=<nil>@2000")
	pipeAt(t, in, "x@11000")
	expect(t, "stream time 11 s", read(), "b=2@4000")
}

// TestSuppressEmitEarlyWhenFull: a buffer of at most 2 records forwards
// its oldest held key when a third arrives; one of at most 40 bytes holds
// one 10-byte value (with its key and entry header), not two.
func TestSuppressEmitEarlyWhenFull(t *testing.T) {
	build := func(b eddy.BufferConfig) *eddy.Topology {
		topo := eddy.NewTopology()
		tb := eddy.ToTable(eddy.Source(topo, "in", serde.String(), serde.String()), "rows", serde.String(), serde.String())
		held := eddy.Suppress(tb, "held", eddy.UntilTimeLimit(time.Hour, b), serde.String(), serde.String())
		eddy.To(eddy.ToStream(held), "out", serde.String(), serde.String())
		return topo
	}
	_, in, read := suppressDriver(t, build(eddy.BufferConfig{MaxRecords: 2, WhenFull: eddy.EmitEarlyWhenFull}), serde.String(), serde.String())
	pipeAt(t, in, "a@1", "b@2", "b@3")
	expect(t, "two keys held", read())
	pipeAt(t, in, "c@4")
	expect(t, "a third key", read(), "a=v@1")
	pipeAt(t, in, "a@5", "d@6")
	expect(t, "two more keys", read(), "b=v@3", "c=v@4")

	_, in, read = suppressDriver(t, build(eddy.BufferConfig{MaxBytes: 40, WhenFull: eddy.EmitEarlyWhenFull}), serde.String(), serde.String())
	for i, k := range []string{"a", "b", "c"} {
		if err := in.Pipe(k, "0123456789", int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	expect(t, "10-byte values in 40 bytes", read(), "a=0123456789@0", "b=0123456789@1")
}

// TestSuppressShutDownWhenFull: with ShutDownWhenFull an update beyond
// the bound fails the record with an eddy: error naming the store and the
// bound, whatever the error policy, and rolls back: the buffer still
// holds what it held, and forwards it once when due.
func TestSuppressShutDownWhenFull(t *testing.T) {
	topo := eddy.NewTopology()
	counts := eddy.Count(eddy.GroupByKey(eddy.Source(topo, "in", serde.String(), serde.String()), serde.String()), "counts")
	held := eddy.Suppress(counts, "held", eddy.UntilTimeLimit(10*time.Second, eddy.BufferConfig{MaxRecords: 2}), serde.String(), serde.Int64())
	eddy.To(eddy.ToStream(held), "out", serde.String(), serde.Int64())
	_, in, read := suppressDriverConfig(t, topo, eddy.Config{OnProcessError: eddy.LogAndContinue}, serde.String(), serde.Int64())

	pipeAt(t, in, "a@0", "b@1000", "a@2000")
	err := in.Pipe("c", "v", 3000)
	if !errors.Is(err, eddy.ErrSuppressBufferFull) {
		t.Fatalf("a third key in a buffer of 2: %v, want ErrSuppressBufferFull", err)
	}
	for _, want := range []string{"eddy:", "suppress store held", "MaxRecords 2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	// The failed record left nothing: the counts still say 2 records
	// (an update of a held key fits), and c was never counted.
	pipeAt(t, in, "b@4000")
	expect(t, "after the failure", read())
	pipeAt(t, in, "b@10000")
	expect(t, "stream time 10 s", read(), "a=2@2000")
	pipeAt(t, in, "c@10001", "x@30000")
	expect(t, "stream time 30 s", read(), "b=3@10000", "c=1@10001")
}

// TestSuppressAbortForwardsOnce: when the transaction that forwards a held
// update aborts (here a failing operator downstream), the buffer rolls
// back with it: the update is forwarded once, by the record processed
// again.
func TestSuppressAbortForwardsOnce(t *testing.T) {
	topo := eddy.NewTopology()
	counts := eddy.Count(eddy.GroupByKey(eddy.Source(topo, "in", serde.String(), serde.String()), serde.String()), "counts")
	held := eddy.Suppress(counts, "held", eddy.UntilTimeLimit(10*time.Second, eddy.BufferConfig{}), serde.String(), serde.Int64())
	fail := true
	out := eddy.MapValues(eddy.ToStream(held), func(_ string, n int64) int64 {
		if fail {
			fail = false
			panic("downstream failure")
		}
		return n
	})
	eddy.To(out, "out", serde.String(), serde.Int64())
	_, in, read := suppressDriver(t, topo, serde.String(), serde.Int64())

	pipeAt(t, in, "a@0", "a@1000", "b@2000")
	if err := in.Pipe("x", "v", 10000); err == nil {
		t.Fatal("the failing forward returned no error")
	}
	expect(t, "aborted", read())
	pipeAt(t, in, "x@10000")
	expect(t, "processed again", read(), "a=2@1000")
	pipeAt(t, in, "x@12000")
	expect(t, "stream time 12 s", read(), "b=1@2000")
	pipeAt(t, in, "x@50000")
	expect(t, "stream time 50 s", read(), "x=3@50000")
}

// TestSuppressTopologyErrors: what Suppress cannot do is refused when the
// topology is built.
func TestSuppressTopologyErrors(t *testing.T) {
	wkeys := eddy.WindowedSerde(serde.String())
	cases := []struct {
		name  string
		build func(topo *eddy.Topology, g eddy.GroupedStream[string, string])
		want  string
	}{
		{"UntilWindowCloses on a plain table", func(_ *eddy.Topology, g eddy.GroupedStream[string, string]) {
			eddy.Suppress(eddy.Count(g, "c"), "s", eddy.UntilWindowCloses(eddy.BufferConfig{}), serde.String(), serde.Int64())
		}, "UntilWindowCloses needs the table of a windowed aggregation"},
		{"UntilWindowCloses emitting early", func(_ *eddy.Topology, g eddy.GroupedStream[string, string]) {
			w := eddy.WindowCount(eddy.WindowedBy(g, eddy.TumblingWindows(time.Second)), "c")
			eddy.Suppress(w, "s", eddy.UntilWindowCloses(eddy.BufferConfig{MaxRecords: 5, WhenFull: eddy.EmitEarlyWhenFull}), wkeys, serde.Int64())
		}, "final results only"},
		{"no Suppressed", func(_ *eddy.Topology, g eddy.GroupedStream[string, string]) {
			eddy.Suppress(eddy.Count(g, "c"), "s", eddy.Suppressed{}, serde.String(), serde.Int64())
		}, "no Suppressed given"},
		{"negative time limit", func(_ *eddy.Topology, g eddy.GroupedStream[string, string]) {
			eddy.Suppress(eddy.Count(g, "c"), "s", eddy.UntilTimeLimit(-time.Second, eddy.BufferConfig{}), serde.String(), serde.Int64())
		}, "time limit -1s"},
		{"negative bound", func(_ *eddy.Topology, g eddy.GroupedStream[string, string]) {
			eddy.Suppress(eddy.Count(g, "c"), "s", eddy.UntilTimeLimit(time.Second, eddy.BufferConfig{MaxBytes: -1}), serde.String(), serde.Int64())
		}, "buffer bounds"},
		{"no serdes", func(_ *eddy.Topology, g eddy.GroupedStream[string, string]) {
			eddy.Suppress(eddy.Count(g, "c"), "s", eddy.UntilTimeLimit(time.Second, eddy.BufferConfig{}), nil, serde.Int64())
		}, "pass the key and value serdes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			topo := eddy.NewTopology()
			tc.build(topo, eddy.GroupByKey(eddy.Source(topo, "in", serde.String(), serde.String()), serde.String()))
			d, err := eddytest.New(topo, eddytest.Options{})
			if err == nil {
				d.Close()
				t.Fatalf("built; want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "eddy:") || !strings.Contains(err.Error(), "Suppress") {
				t.Errorf("error %q, want one that starts with eddy:, names Suppress and contains %q", err, tc.want)
			}
		})
	}
	// A filtered windowed table is still a windowed aggregation's.
	topo := eddy.NewTopology()
	g := eddy.GroupByKey(eddy.Source(topo, "in", serde.String(), serde.String()), serde.String())
	w := eddy.FilterTable(eddy.WindowCount(eddy.WindowedBy(g, eddy.TumblingWindows(time.Second)), "c"),
		func(eddy.Windowed[string], int64) bool { return true })
	eddy.To(eddy.ToStream(eddy.Suppress(w, "s", eddy.UntilWindowCloses(eddy.BufferConfig{}), wkeys, serde.Int64())), "out", wkeys, serde.Int64())
	if err := topo.Err(); err != nil {
		t.Errorf("UntilWindowCloses on a FilterTable of a windowed count: %v", err)
	}
}

// TestSuppressDescribe: Suppress is a node of its own, after the table it
// suppresses, that owns the buffer's store.
func TestSuppressDescribe(t *testing.T) {
	topo := eddy.NewTopology()
	counts := eddy.Count(eddy.GroupByKey(eddy.Source(topo, "in", serde.String(), serde.String()), serde.String()), "counts")
	held := eddy.Suppress(counts, "held", eddy.UntilTimeLimit(time.Second, eddy.BufferConfig{}), serde.String(), serde.Int64())
	eddy.To(eddy.ToStream(held), "out", serde.String(), serde.Int64())
	d := topo.Describe("app")
	if len(d.Subtopologies) != 1 {
		t.Fatalf("%d sub-topologies, want 1", len(d.Subtopologies))
	}
	var count, suppress eddy.NodeDescription
	for _, n := range d.Subtopologies[0].Nodes {
		switch {
		case strings.HasPrefix(n.Name, "aggregate-counts-"):
			count = n
		case strings.HasPrefix(n.Name, "suppress-held-"):
			suppress = n
		}
	}
	if suppress.Name == "" || len(suppress.Parents) != 1 || suppress.Parents[0] != count.Name || fmt.Sprint(suppress.Stores) != "[held]" {
		t.Errorf("suppress node %+v: want the count %q as parent and the store held", suppress, count.Name)
	}
	var stores []string
	for _, s := range d.Subtopologies[0].Stores {
		stores = append(stores, s.Name+" "+s.Changelog)
	}
	if want := "[counts app-counts-changelog held app-held-changelog]"; fmt.Sprint(stores) != want {
		t.Errorf("stores %v, want %s", stores, want)
	}
}

// TestSuppressFailedForwardLogAndContinue: with LogAndContinue, a record
// whose forward failed downstream is skipped without an abort: the update
// whose forward failed is gone, and the others still held (b, and x,
// held before the failure) are forwarded when due.
func TestSuppressFailedForwardLogAndContinue(t *testing.T) {
	topo := eddy.NewTopology()
	src := eddy.Filter(eddy.Source(topo, "in", serde.String(), serde.String()), func(_, v string) bool { return v != "tick" })
	counts := eddy.Count(eddy.GroupByKey(src, serde.String()), "counts")
	held := eddy.Suppress(counts, "held", eddy.UntilTimeLimit(10*time.Second, eddy.BufferConfig{}), serde.String(), serde.Int64())
	out := eddy.MapValues(eddy.ToStream(held), func(k string, n int64) int64 {
		if k == "a" {
			panic("downstream failure")
		}
		return n
	})
	eddy.To(out, "out", serde.String(), serde.Int64())
	_, in, read := suppressDriverConfig(t, topo, eddy.Config{OnProcessError: eddy.LogAndContinue}, serde.String(), serde.Int64())

	// x's record is skipped when a's forward fails; then the stream-time
	// punctuation after it finds b, held too, due.
	pipeAt(t, in, "a@0", "b@0", "x@10000")
	expect(t, "a failed", read(), "b=1@0")
	if err := in.Pipe("tick", "tick", 20000); err != nil {
		t.Fatal(err)
	}
	expect(t, "a tick at 20 s", read(), "x=1@10000")
}
