package eddy_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// wordCounts counts the records of "in" per key in store "counts" and
// writes the table's updates to "out"; a record whose value is "fail"
// makes processing fail before the count.
type wordCounts struct {
	d   *eddytest.Driver
	in  *eddytest.InputTopic[string, string]
	out *eddytest.OutputTopic[string, int64]
}

func newWordCounts(t *testing.T, cacheBytes int64) wordCounts {
	t.Helper()
	topo := eddy.NewTopology()
	in := eddy.Source(topo, "in", serde.String(), serde.String())
	checked := eddy.MapValues(in, func(_, v string) string {
		if v == "fail" {
			panic("asked to fail")
		}
		return v
	})
	counts := eddy.Count(eddy.GroupByKey(checked, serde.String()), "counts")
	eddy.To(eddy.ToStream(counts), "out", serde.String(), serde.Int64())
	d := cacheDriver(t, topo, cacheBytes)
	return wordCounts{d: d, in: eddytest.Input(d, "in", serde.String(), serde.String()), out: eddytest.Output(d, "out", serde.String(), serde.Int64())}
}

func cacheDriver(t *testing.T, topo *eddy.Topology, cacheBytes int64) *eddytest.Driver {
	t.Helper()
	d, err := eddytest.New(topo, eddytest.Options{Config: eddy.Config{TableCacheBytes: cacheBytes}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// pipeKeys pipes a record per key, at timestamps 1, 2, ...
func (w wordCounts) pipeKeys(t *testing.T, keys ...string) error {
	t.Helper()
	for i, k := range keys {
		if err := w.in.Pipe(k, "x", int64(i+1)); err != nil {
			return err
		}
	}
	return nil
}

// updates reads the records of "out" as "key=count@timestamp".
func updates[V any](t *testing.T, out *eddytest.OutputTopic[string, V]) []string {
	t.Helper()
	recs, err := out.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, r := range recs {
		v := fmt.Sprint(r.Value)
		if r.Tombstone {
			v = "<deleted>"
		}
		got = append(got, r.Key+"="+v+"@"+strconv.FormatInt(r.Timestamp, 10))
	}
	return got
}

func checkUpdates[V any](t *testing.T, out *eddytest.OutputTopic[string, V], want ...string) {
	t.Helper()
	if got := updates(t, out); !slices.Equal(got, want) {
		t.Errorf("updates %q, want %q", got, want)
	}
}

// TestTableCacheCollapsesWithinCommit: within one transaction the table
// forwards one update per key, the latest (its value and timestamp), in
// the order the keys were first updated; the store holds the same.
func TestTableCacheCollapsesWithinCommit(t *testing.T) {
	w := newWordCounts(t, eddy.DefaultTableCacheBytes)
	if err := w.d.Transaction(func() error { return w.pipeKeys(t, "a", "b", "a", "a", "c", "b") }); err != nil {
		t.Fatal(err)
	}
	checkUpdates(t, w.out, "a=3@4", "b=2@6", "c=1@5")
	store, err := eddytest.KeyValueStore(w.d, eddy.NewKeyValueStoreSpec("counts", serde.String(), serde.Int64()))
	if err != nil {
		t.Fatal(err)
	}
	if n, _, err := store.Get("a"); err != nil || n != 3 {
		t.Errorf("store: a=%d (%v), want 3", n, err)
	}
	// Outside a transaction the driver commits after each record, as
	// Kafka Streams' test driver does: every update shows.
	if err := w.pipeKeys(t, "b", "b"); err != nil {
		t.Fatal(err)
	}
	checkUpdates(t, w.out, "b=3@1", "b=4@2")
}

// TestTableCacheOff: with NoTableCache every update is forwarded at once,
// within a transaction too.
func TestTableCacheOff(t *testing.T) {
	w := newWordCounts(t, eddy.NoTableCache)
	if err := w.d.Transaction(func() error { return w.pipeKeys(t, "a", "b", "a", "a", "c", "b") }); err != nil {
		t.Fatal(err)
	}
	checkUpdates(t, w.out, "a=1@1", "b=1@2", "a=2@3", "a=3@4", "c=1@5", "b=2@6")
}

// TestTableCacheEvictsOldestWhenFull: a cache over its budget forwards its
// oldest held updates at once, the rest at the commit. Each entry costs
// its 2-byte key, 8-byte count and 96 bytes of overhead: 1024 bytes hold 9.
func TestTableCacheEvictsOldestWhenFull(t *testing.T) {
	w := newWordCounts(t, 1024)
	var keys []string
	for i := range 10 {
		keys = append(keys, "k"+strconv.Itoa(i))
	}
	err := w.d.Transaction(func() error {
		if err := w.pipeKeys(t, keys...); err != nil {
			return err
		}
		return w.pipeKeys(t, "k1", "k0")
	})
	if err != nil {
		t.Fatal(err)
	}
	// k9 made ten entries: k0, the oldest, went out. k1 was then
	// updated in the cache; k0 came back as a new entry, which pushed k1
	// out (its latest update, the 2 at time 1 of the second pipe).
	checkUpdates(t, w.out, "k0=1@1", "k1=2@1",
		"k2=1@3", "k3=1@4", "k4=1@5", "k5=1@6", "k6=1@7", "k7=1@8", "k8=1@9", "k9=1@10", "k0=2@2")
}

// TestTableCacheTombstone: a tombstone is held like a value: it replaces
// the key's held update, and an update after it replaces it (TableFrom,
// whose source's null values are tombstones).
func TestTableCacheTombstone(t *testing.T) {
	topo := eddy.NewTopology()
	latest := eddy.TableFrom(topo, "in", "latest", serde.String(), serde.String())
	eddy.To(eddy.ToStream(latest), "out", serde.String(), serde.String())
	d := cacheDriver(t, topo, eddy.DefaultTableCacheBytes)
	input := eddytest.Input(d, "in", serde.String(), serde.String())
	out := eddytest.Output(d, "out", serde.String(), serde.String())
	err := d.Transaction(func() error {
		for _, step := range []func() error{
			func() error { return input.Pipe("gone", "v1", 1) },
			func() error { return input.Pipe("back", "v1", 2) },
			func() error { return input.PipeTombstone("gone", 3) },
			func() error { return input.PipeTombstone("back", 4) },
			func() error { return input.Pipe("back", "v2", 5) },
		} {
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkUpdates(t, out, "gone=<deleted>@3", "back=v2@5")
	store, err := eddytest.KeyValueStore(d, eddy.NewKeyValueStoreSpec("latest", serde.String(), serde.String()))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, err := store.Get("gone"); err != nil || ok {
		t.Errorf("store: gone=%q, %v (%v), want deleted", v, ok, err)
	}
}

// TestTableCacheRollbackDropsHeld: a transaction that fails drops the
// updates its table cache held: the next commit forwards only its own.
func TestTableCacheRollbackDropsHeld(t *testing.T) {
	w := newWordCounts(t, eddy.DefaultTableCacheBytes)
	err := w.d.Transaction(func() error {
		if err := w.pipeKeys(t, "a", "b", "a"); err != nil {
			return err
		}
		return w.in.Pipe("c", "fail", 9)
	})
	if err == nil {
		t.Fatal("the transaction succeeded; want the failing record's error")
	}
	if err := w.pipeKeys(t, "c"); err != nil {
		t.Fatal(err)
	}
	checkUpdates(t, w.out, "c=1@1")
	if err := w.pipeKeys(t, "a"); err != nil {
		t.Fatal(err)
	}
	checkUpdates(t, w.out, "a=1@1") // the failed transaction's counts are gone too
}

// TestTableCacheChainedTables: a table derived from a cached table, kept
// in its own store, caches too; the commit flushes the upstream cache
// first, so the derived table sees the latest update and forwards it once.
// Reduce (an Aggregate with a mapping after it) forwards through the
// aggregate's cache.
func TestTableCacheChainedTables(t *testing.T) {
	topo := eddy.NewTopology()
	in := eddy.Source(topo, "in", serde.String(), serde.Int64())
	g := eddy.GroupByKey(in, serde.String())
	sums := eddy.Reduce(g, "sums", func(a, b int64) int64 { return a + b }, serde.Int64())
	doubled := eddy.MapTableValues(sums, func(_ string, v int64) int64 { return 2 * v },
		eddy.Materialize("doubled", serde.String(), serde.Int64()))
	eddy.To(eddy.ToStream(sums), "sums", serde.String(), serde.Int64())
	eddy.To(eddy.ToStream(doubled), "doubled", serde.String(), serde.Int64())
	d := cacheDriver(t, topo, eddy.DefaultTableCacheBytes)
	input := eddytest.Input(d, "in", serde.String(), serde.Int64())
	err := d.Transaction(func() error {
		for i, kv := range []struct {
			k string
			v int64
		}{{"x", 1}, {"y", 10}, {"x", 2}, {"y", 20}, {"x", 3}} {
			if err := input.Pipe(kv.k, kv.v, int64(i+1)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkUpdates(t, eddytest.Output(d, "sums", serde.String(), serde.Int64()), "x=6@5", "y=30@4")
	checkUpdates(t, eddytest.Output(d, "doubled", serde.String(), serde.Int64()), "x=12@5", "y=60@4")
}

// latestSeen keeps the latest count it receives per key in store "seen";
// its wall-clock punctuator forwards "total" = the sum of those.
type latestSeen struct {
	ctx  *eddy.ProcessorContext[string, int64]
	seen *eddy.KeyValueStore[string, int64]
}

var seenSpec = eddy.NewKeyValueStoreSpec("seen", serde.String(), serde.Int64())

func (p *latestSeen) Init(ctx *eddy.ProcessorContext[string, int64]) error {
	p.ctx = ctx
	var err error
	if p.seen, err = seenSpec.Open(ctx); err != nil {
		return err
	}
	_, err = ctx.Schedule(time.Minute, eddy.WallClockTime, func(ts int64) error {
		var total int64
		for kv, err := range p.seen.All() {
			if err != nil {
				return err
			}
			total += kv.Value
		}
		return ctx.Forward(eddy.Record[string, int64]{Key: "total", Value: total, Timestamp: ts})
	})
	return err
}

func (p *latestSeen) Process(r eddy.Record[string, int64]) error { return p.seen.Put(r.Key, r.Value) }

func (p *latestSeen) Close() error { return nil }

// TestTableCacheFlushesBeforePunctuation: a punctuator that reads state
// downstream of a table cache sees the updates the cache held: the task
// flushes before its punctuators run.
func TestTableCacheFlushesBeforePunctuation(t *testing.T) {
	topo := eddy.NewTopology()
	in := eddy.Source(topo, "in", serde.String(), serde.String())
	counts := eddy.Count(eddy.GroupByKey(in, serde.String()), "counts")
	totals := eddy.Process(eddy.ToStream(counts), "latest-seen", func() eddy.Processor[string, int64, string, int64] { return &latestSeen{} }, seenSpec)
	eddy.To(totals, "totals", serde.String(), serde.Int64())
	d := cacheDriver(t, topo, eddy.DefaultTableCacheBytes)
	input := eddytest.Input(d, "in", serde.String(), serde.String())
	if err := d.AdvanceWallClock(time.Second); err != nil { // starts the punctuator's clock
		t.Fatal(err)
	}
	err := d.Transaction(func() error {
		for i, k := range []string{"a", "b", "a"} {
			if err := input.Pipe(k, "x", int64(i+1)); err != nil {
				return err
			}
		}
		return d.AdvanceWallClock(time.Minute)
	})
	if err != nil {
		t.Fatal(err)
	}
	out := eddytest.Output(d, "totals", serde.String(), serde.Int64())
	recs, err := out.ReadKeyValues()
	if err != nil {
		t.Fatal(err)
	}
	if want := []eddy.KeyValue[string, int64]{{Key: "total", Value: 3}}; !slices.Equal(recs, want) {
		t.Errorf("totals %v, want %v (a=2 and b=1 seen before the punctuation)", recs, want)
	}
}

// TestTableCacheInDriver: the driver turns the cache on only when the test
// sets TableCacheBytes. One piped record that updates a key twice (a
// FlatMapValues of two values) shows both updates by default, the latest
// alone with the cache on, as under Run.
func TestTableCacheInDriver(t *testing.T) {
	for _, c := range []struct {
		bytes int64
		want  []string
	}{
		{0, []string{"a=1@7", "a=2@7"}},
		{eddy.DefaultTableCacheBytes, []string{"a=2@7"}},
	} {
		topo := eddy.NewTopology()
		in := eddy.Source(topo, "in", serde.String(), serde.String())
		twice := eddy.FlatMapValues(in, func(dst []string, _, v string) []string { return append(dst, v, v) })
		counts := eddy.Count(eddy.GroupByKey(twice, serde.String()), "counts")
		eddy.To(eddy.ToStream(counts), "out", serde.String(), serde.Int64())
		d := cacheDriver(t, topo, c.bytes)
		if err := eddytest.Input(d, "in", serde.String(), serde.String()).Pipe("a", "x", 7); err != nil {
			t.Fatal(err)
		}
		checkUpdates(t, eddytest.Output(d, "out", serde.String(), serde.Int64()), c.want...)
	}
}

// TestTableCacheKeepsRecordContext: an update forwarded at the commit
// carries the metadata of the input record that made it, as Kafka
// Streams' cache entries keep their record context.
func TestTableCacheKeepsRecordContext(t *testing.T) {
	topo := eddy.NewTopology()
	in := eddy.Source(topo, "in", serde.String(), serde.String())
	counts := eddy.Count(eddy.GroupByKey(in, serde.String()), "counts")
	described := eddy.MapValuesWithContext(eddy.ToStream(counts), func(rc eddy.RecordContext, _ string, n int64) string {
		return fmt.Sprintf("%d from %s@%d", n, rc.Topic, rc.Offset)
	})
	eddy.To(described, "out", serde.String(), serde.String())
	d := cacheDriver(t, topo, eddy.DefaultTableCacheBytes)
	input := eddytest.Input(d, "in", serde.String(), serde.String())
	err := d.Transaction(func() error {
		for i, k := range []string{"a", "b", "a"} {
			if err := input.Pipe(k, "x", int64(i+1)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkUpdates(t, eddytest.Output(d, "out", serde.String(), serde.String()), "a=2 from in@2@3", "b=1 from in@1@2")
}

// TestTableCacheBeforeSuppress: Suppress, which forwards a key's latest
// held value when stream time reaches its time limit (a punctuator at
// every advance), gets the cache's held updates first, so it forwards the
// same values with the cache on as off.
func TestTableCacheBeforeSuppress(t *testing.T) {
	run := func(cacheBytes int64) []string {
		topo := eddy.NewTopology()
		in := eddy.Source(topo, "in", serde.String(), serde.String())
		counts := eddy.Count(eddy.GroupByKey(in, serde.String()), "counts")
		quiet := eddy.Suppress(counts, "quiet", eddy.UntilTimeLimit(10*time.Millisecond, eddy.BufferConfig{}), serde.String(), serde.Int64())
		eddy.To(eddy.ToStream(quiet), "out", serde.String(), serde.Int64())
		d := cacheDriver(t, topo, cacheBytes)
		input := eddytest.Input(d, "in", serde.String(), serde.String())
		err := d.Transaction(func() error {
			for i, k := range []string{"a", "a", "b", "a", "b", "b", "c", "a", "c", "b", "a", "c"} {
				if err := input.Pipe(k, "x", int64(1+i*4)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return updates(t, eddytest.Output(d, "out", serde.String(), serde.Int64()))
	}
	off, on := run(eddy.NoTableCache), run(eddy.DefaultTableCacheBytes)
	if len(off) == 0 || !slices.Equal(on, off) {
		t.Errorf("with the cache Suppress forwarded %q, without %q", on, off)
	}
}

// TestTableCacheWindowedEveryUpdate: a windowed count with EmitEveryUpdate
// forwards, within one transaction, the latest count of each key and
// window. A session that a merge replaced is a windowed key like any
// other: the merge's tombstone replaces its held count.
func TestTableCacheWindowedEveryUpdate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		windows eddy.Windows
		want    []string
	}{
		// Tumbling 10 s windows: a@1, a@2 and b@3 fall in [0, 10 s), a@12 in
		// [10 s, 20 s).
		{"tumbling", eddy.TumblingWindows(10 * time.Second), []string{"a@0=2@2000", "b@0=1@3000", "a@10000=1@12000"}},
		// Sessions with a 5 s gap: a@1 and a@2 make one session, which a@12
		// does not reach; the first session [1 s, 1 s] was replaced by
		// [1 s, 2 s] within the transaction, so its held count becomes its
		// tombstone.
		{"sessions", eddy.SessionWindowsWithGap(5 * time.Second), []string{"a@1000=<deleted>@2000", "a@1000=2@2000", "b@3000=1@3000", "a@12000=1@12000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo := eddy.NewTopology()
			in := eddy.GroupByKey(eddy.Source(topo, "in", serde.String(), serde.String()), serde.String())
			counts := eddy.WindowCount(eddy.WindowedBy(in, tc.windows), "counts")
			eddy.To(eddy.Map(eddy.ToStream(counts), func(k eddy.Windowed[string], n int64) (string, int64) {
				return fmt.Sprint(k.Key, "@", k.Window.Start), n
			}), "out", serde.String(), serde.Int64())
			d, err := eddytest.New(topo, eddytest.Options{Config: eddy.Config{TableCacheBytes: eddy.DefaultTableCacheBytes}})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			input := eddytest.Input(d, "in", serde.String(), serde.String())
			out := eddytest.Output(d, "out", serde.String(), serde.Int64())
			err = d.Transaction(func() error {
				for _, r := range []struct {
					k  string
					ts int64
				}{{"a", 1000}, {"a", 2000}, {"b", 3000}, {"a", 12000}} {
					if err := input.Pipe(r.k, "v", r.ts); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			checkUpdates(t, out, tc.want...)
		})
	}
}
