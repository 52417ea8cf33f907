package eddy

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/runtime"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/memory"
)

// newTestCache returns a cache of budget bytes that forwards to got.
func newTestCache(budget int64, got *[]Record[string, int64]) *tableCache[string, int64] {
	out := &emitter[string, int64]{}
	out.children = append(out.children, receiverFunc[string, int64](func(r Record[string, int64]) error {
		*got = append(*got, r)
		return nil
	}))
	return &tableCache[string, int64]{b: &taskBuild{}, out: out, budget: runtime.NewTableCacheBudget(budget), index: make(map[string]int)}
}

// TestTableCacheUpdateAllocs: an update of a key the cache holds allocates
// nothing (the map lookup by the encoded key's bytes does not copy them,
// and the entry is replaced in place).
func TestTableCacheUpdateAllocs(t *testing.T) {
	var got []Record[string, int64]
	c := newTestCache(1<<20, &got)
	key := []byte("hot")
	headers := []Header{{Key: "h", Value: []byte("v")}}
	n := int64(0)
	update := func() {
		n++
		if err := c.update(key, 8, Record[string, int64]{Key: "hot", Value: n, Timestamp: n, Headers: headers}); err != nil {
			t.Fatal(err)
		}
	}
	update() // the first update of the key makes its entry
	if a := testing.AllocsPerRun(1000, update); a != 0 {
		t.Errorf("%v allocations per update of a held key, want 0", a)
	}
	if err := c.flush(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Value != n || c.b.cacheCollapsed != n-1 || c.b.cacheForwarded != 1 {
		t.Errorf("forwarded %v (collapsed %d, forwarded %d), want one update, the last (%d)", got, c.b.cacheCollapsed, c.b.cacheForwarded, n)
	}
	if c.budget.Used() != 0 || c.bytes != 0 {
		t.Errorf("after the flush the cache holds %d bytes (budget: %d used), want 0", c.bytes, c.budget.Used())
	}
}

// TestTableCacheCompacts: a cache that keeps evicting reuses its slice:
// the live entries move to the front and stay findable.
func TestTableCacheCompacts(t *testing.T) {
	var got []Record[string, int64]
	size := int64(len("k0000") + 8 + tableCacheEntryOverhead)
	c := newTestCache(10*size, &got) // holds 10
	for i := range 5000 {
		k := "k" + strconv.Itoa(10000 + i)[1:]
		if err := c.update([]byte(k), 8, Record[string, int64]{Key: k, Value: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 4990 || got[0].Key != "k0000" || got[4989].Key != "k4989" {
		t.Fatalf("evicted %d updates (first %v), want the 4990 oldest in order", len(got), got[:1])
	}
	if held := len(c.entries) - c.head; held != 10 || cap(c.entries) > 4096 {
		t.Errorf("holds %d entries in a slice of capacity %d, want 10 in a compacted one", held, cap(c.entries))
	}
	// A held key is still found: its update collapses.
	if err := c.update([]byte("k4995"), 8, Record[string, int64]{Key: "k4995", Value: -1}); err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	if err := c.flush(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 || got[5].Key != "k4995" || got[5].Value != -1 {
		t.Errorf("flushed %v, want k4990..k4999 with k4995 = -1", got)
	}
}

// BenchmarkTableCacheUpdate is the cache's cost per update of a hot key
// (go test -bench TableCache -benchmem).
func BenchmarkTableCacheUpdate(b *testing.B) {
	var got []Record[string, int64]
	c := newTestCache(1<<20, &got)
	keys := make([][]byte, 100)
	for i := range keys {
		keys[i] = []byte("account-" + strconv.Itoa(i))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		k := keys[i%len(keys)]
		if err := c.update(k, 8, Record[string, int64]{Value: int64(i)}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTableCacheConfig: 0 is the default (10 MiB), a negative value turns
// the cache off and reaches the runtime as 0, and a share of less than
// 1 KiB per worker is refused, naming the field and the fix.
func TestTableCacheConfig(t *testing.T) {
	var c Config
	c.applyDefaults()
	if c.TableCacheBytes != DefaultTableCacheBytes || DefaultTableCacheBytes != 10<<20 {
		t.Fatalf("default TableCacheBytes %d, want %d", c.TableCacheBytes, 10<<20)
	}
	c = Config{TableCacheBytes: NoTableCache}
	c.applyDefaults()
	if c.TableCacheBytes >= 0 {
		t.Fatalf("NoTableCache became %d after the defaults, want it kept negative (off)", c.TableCacheBytes)
	}
	topo := NewTopology()
	Count(GroupByKey(Source(topo, "in", serde.String(), serde.String()), serde.String()), "counts")
	_, err := New(topo, Config{AppID: "app", Brokers: []string{"127.0.0.1:1"}, StateDir: t.TempDir(), Workers: 4, TableCacheBytes: 2048})
	if err == nil || !strings.Contains(err.Error(), "TableCacheBytes 2048: each of the 4 workers would hold less than 1 KiB") {
		t.Fatalf("New: %v; want an error naming TableCacheBytes", err)
	}
	for _, ok := range []int64{NoTableCache, -5, 0, 4096} {
		if _, err := New(topo, Config{AppID: "app", Brokers: []string{"127.0.0.1:1"}, StateDir: t.TempDir(), Workers: 4, TableCacheBytes: ok}); err != nil {
			t.Errorf("TableCacheBytes %d: %v", ok, err)
		}
	}
}

// BenchmarkCountHotKeys is a Count over 100 keys whose updates are
// written to a topic, committed every 1,000 records, in memory, with the
// table cache on and off: the cache's effect on the whole per-record path
// (go test -bench CountHotKeys -benchmem; outputs/op is what reaches the
// sink per record).
func BenchmarkCountHotKeys(b *testing.B) {
	for _, bench := range []struct {
		name  string
		cache *runtime.TableCacheBudget
	}{{"cache-on", runtime.NewTableCacheBudget(DefaultTableCacheBytes)}, {"cache-off", nil}} {
		b.Run(bench.name, func(b *testing.B) {
			topo := NewTopology()
			in := Source(topo, "in", serde.String(), serde.String())
			To(ToStream(Count(GroupByKey(in, serde.String()), "counts")), "out", serde.String(), serde.Int64())
			cfg := Config{AppID: "bench"}
			cfg.applyDefaults()
			rt, err := topo.runtimeTopology(&cfg)
			if err != nil {
				b.Fatal(err)
			}
			backend := memory.New()
			outputs := 0
			run, err := runtime.NewInProcess(rt, runtime.InProcessOptions{
				Open: func(id runtime.TaskID) (state.DB, error) { return backend.Open(id.String()) },
				Out: func(r *kgo.Record, _ bool) {
					if r.Topic == "out" {
						outputs++
					}
				},
				TableCache: bench.cache,
			})
			if err != nil {
				b.Fatal(err)
			}
			defer run.Close()
			keys := make([][]byte, 100)
			for i := range keys {
				keys[i] = []byte("account-" + strconv.Itoa(i))
			}
			rec := &kgo.Record{Topic: "in", Value: []byte("x"), Timestamp: time.UnixMilli(1000)}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				rec.Key, rec.Offset = keys[i%len(keys)], int64(i)
				if err := run.Process(rec); err != nil {
					b.Fatal(err)
				}
				if i++; i%1000 == 0 {
					if err := run.Commit(0); err != nil {
						b.Fatal(err)
					}
				}
			}
			if outputs == 0 {
				b.Fatal("nothing reached the sink")
			}
			b.ReportMetric(float64(outputs)/float64(i), "outputs/op")
		})
	}
}
