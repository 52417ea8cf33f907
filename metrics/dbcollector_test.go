package metrics

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/memory"
	"github.com/eddy-streams/eddy/state/pebble"
)

var dbFamilies = []string{
	"eddy_state_bytes", "eddy_pebble_write_amplification", "eddy_pebble_flushes_total",
	"eddy_pebble_compactions_total", "eddy_pebble_compactions_in_progress", "eddy_pebble_compaction_pending_bytes",
	"eddy_pebble_write_stalls_total", "eddy_pebble_write_stall_seconds_total", "eddy_pebble_l0_files",
	"eddy_pebble_l0_sublevels", "eddy_pebble_read_amplification", "eddy_pebble_memtable_bytes", "eddy_pebble_memtables",
}

// fillDB writes n keys of 1 KiB of random bytes (so compression does not
// shrink them) in batches of 100.
func fillDB(t *testing.T, db state.DB, n int) {
	t.Helper()
	for i := 0; i < n; i += 100 {
		var b state.Batch
		for j := i; j < i+100 && j < n; j++ {
			b.Writes = append(b.Writes, state.Write{Store: "s", Key: fmt.Appendf(nil, "k%06d", j), Value: randomBytes(1024)})
		}
		b.Offsets = state.NewOffsets()
		if err := db.Apply(&b); err != nil {
			t.Fatal(err)
		}
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.IntN(256))
	}
	return b
}

func TestPebbleCollector(t *testing.T) {
	// A 256 KiB memtable: 4 MiB of writes flush it many times, so the
	// figures that count work done are not zero.
	b := pebble.New(pebble.Options{MemTableSize: 256 << 10, CacheSize: 1 << 20})
	defer b.Close()
	db, err := b.Open(filepath.Join(t.TempDir(), "0_0"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fillDB(t, db, 4000)
	for i := 0; i < 4000; i += 7 {
		if _, _, err := db.Get("s", fmt.Appendf(nil, "k%06d", i)); err != nil {
			t.Fatal(err)
		}
	}

	m := New()
	m.SetBackend(b)
	remove := m.AddDB("0_0", db)
	fams := gather(t, m)
	for _, name := range dbFamilies {
		if series(fams, name, "task", "0_0") == nil {
			t.Errorf("%s{task=0_0} missing", name)
		}
	}
	if v := value(series(fams, "eddy_state_bytes", "task", "0_0")); v < 4000*1024/2 {
		t.Errorf("eddy_state_bytes = %v, want about 4 MB", v)
	}
	if v := value(series(fams, "eddy_pebble_flushes_total", "task", "0_0")); v < 1 {
		t.Errorf("flushes = %v, want ≥ 1 after 4 MiB through a 256 KiB memtable", v)
	}
	if v := value(series(fams, "eddy_pebble_write_amplification", "task", "0_0")); v < 1 {
		t.Errorf("write amplification = %v, want ≥ 1 once tables were flushed", v)
	}
	if v := value(series(fams, "eddy_pebble_memtable_bytes", "task", "0_0")); v <= 0 {
		t.Errorf("memtable bytes = %v, want > 0", v)
	}
	hits := value(series(fams, "eddy_pebble_block_cache_hits_total"))
	misses := value(series(fams, "eddy_pebble_block_cache_misses_total"))
	ratio := value(series(fams, "eddy_pebble_block_cache_hit_ratio"))
	if hits+misses <= 0 {
		t.Errorf("block cache saw no lookups (hits %v, misses %v) after reads from flushed tables", hits, misses)
	} else if want := hits / (hits + misses); math.Abs(ratio-want) > 1e-9 {
		t.Errorf("hit ratio = %v, want %v", ratio, want)
	}
	if value(series(fams, "eddy_pebble_block_cache_bytes")) <= 0 {
		t.Error("block cache holds nothing after reads")
	}

	remove()
	remove() // idempotent
	fams = gather(t, m)
	if series(fams, "eddy_state_bytes", "task", "0_0") != nil {
		t.Error("removed database still reported")
	}
	m.SetBackend(nil)
	if series(gather(t, m), "eddy_pebble_block_cache_hit_ratio") != nil {
		t.Error("block cache reported after SetBackend(nil)")
	}
}

// A database of another backend is not reported, and does not have to
// implement anything for that.
func TestCollectorSkipsOtherBackends(t *testing.T) {
	db, err := memory.New().Open("x")
	if err != nil {
		t.Fatal(err)
	}
	m := New()
	m.SetBackend(memory.New())
	remove := m.AddDB("0_0", db)
	defer remove()
	fams := gather(t, m)
	for _, name := range append(dbFamilies, "eddy_pebble_block_cache_hit_ratio") {
		if mf := fams[name]; mf != nil {
			t.Errorf("%s reported for a memory database", name)
		}
	}
}

// Scrapes run while the runtime removes and closes databases: a removed
// database is never read again, so it can close (run with -race).
func TestCollectorWhileDatabasesClose(t *testing.T) {
	b := pebble.New(pebble.Options{})
	defer b.Close()
	m := New()
	m.SetBackend(b)
	dir := t.TempDir()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := m.Registry().Gather(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := range 20 {
		db, err := b.Open(filepath.Join(dir, fmt.Sprint(i%2)))
		if err != nil {
			t.Fatal(err)
		}
		remove := m.AddDB(fmt.Sprintf("0_%d", i%2), db)
		fillDB(t, db, 100)
		remove()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}
