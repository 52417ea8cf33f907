//go:build rocksdb

package rocksdb

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/statetest"
)

func newBackend(t *testing.T, opts Options) *Backend {
	b := New(opts)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func TestBackendClose(t *testing.T) {
	b := New(Options{})
	d := statetest.Open(t, b, t.TempDir())
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// Open databases keep the shared cache alive; reads go through it.
	if err := d.Apply(&state.Batch{Writes: []state.Write{{Store: "s", Key: []byte("k"), Value: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
	flush(t, d)
	if v, ok, err := d.Get("s", []byte("k")); err != nil || !ok || string(v) != "v" {
		t.Fatalf("Get after Backend.Close = %q, %v, %v", v, ok, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(t.TempDir()); err == nil {
		t.Fatal("Open after Backend.Close succeeded")
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestLockAcrossBackends: two Backends (or two processes) on one directory
// are kept apart by RocksDB's LOCK file, not only by a Backend's own map.
func TestLockAcrossBackends(t *testing.T) {
	dir := t.TempDir()
	d := statetest.Open(t, newBackend(t, Options{}), dir)
	defer d.Close()
	other := newBackend(t, Options{})
	if d2, err := other.Open(dir); err == nil {
		_ = d2.Close()
		t.Fatal("a second Backend opened a directory that is open")
	} else if !strings.Contains(err.Error(), "lock") {
		t.Fatalf("second Open: %v; want RocksDB's lock error", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// The failed Open did not leave the directory marked open.
	d2 := statetest.Open(t, other, dir)
	if err := d2.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenCreatesParents(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "app", "tasks", "0_1")
	d := statetest.Open(t, newBackend(t, Options{}), dir)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "CURRENT")); err != nil {
		t.Fatal(err)
	}
}

// TestInvalidOptionsFailOpen: New cannot fail, so Open must.
func TestInvalidOptionsFailOpen(t *testing.T) {
	b := New(Options{Compression: "brotli", MaxOpenFiles: -1})
	dir := filepath.Join(t.TempDir(), "task")
	_, err := b.Open(dir)
	if err == nil || !strings.Contains(err.Error(), "Options.Compression") || !strings.Contains(err.Error(), "Options.MaxOpenFiles") {
		t.Fatalf("Open with invalid options: %v; want the Validate errors", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("Open with invalid options created the directory")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// readOptionsFile returns the OPTIONS file RocksDB wrote in dir, as section
// → key → value: what RocksDB itself recorded that it runs with.
func readOptionsFile(t *testing.T, dir string) map[string]map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var latest string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "OPTIONS-") && !strings.HasSuffix(e.Name(), ".dbtmp") && e.Name() > latest {
			latest = e.Name()
		}
	}
	if latest == "" {
		t.Fatalf("no OPTIONS file in %s", dir)
	}
	data, err := os.ReadFile(filepath.Join(dir, latest))
	if err != nil {
		t.Fatal(err)
	}
	return statetest.ParseOptionsFile(data)
}

func TestOptionsReachRocksDB(t *testing.T) {
	const dbo, cf, table = "DBOptions", `CFOptions "default"`, `TableOptions/BlockBasedTable "default"`
	tests := []struct {
		name  string
		opts  Options
		cache string
		want  map[string]map[string]string
	}{
		{"defaults", Options{}, fmt.Sprint(DefaultCacheSize), map[string]map[string]string{
			dbo: {"max_open_files": "256", "max_background_compactions": "1", "max_background_flushes": "1"},
			cf: {
				"write_buffer_size":                  fmt.Sprint(4 << 20), // a sixteenth of the cache, at least 4 MiB
				"arena_block_size":                   "348160",            // 64 MiB/3/64, down to 4 KiB
				"compression":                        "kSnappyCompression",
				"level0_file_num_compaction_trigger": "4",
				"level0_slowdown_writes_trigger":     "20",
				"level0_stop_writes_trigger":         "36",
			},
			table: {
				"filter_policy":                 "bloomfilter",
				"no_block_cache":                "false",
				"cache_index_and_filter_blocks": "true",
				"cache_index_and_filter_blocks_with_high_priority": "true",
				"pin_l0_filter_and_index_blocks_in_cache":          "true",
			},
		}},
		{"custom", Options{
			CacheSize:                3 << 20,
			MemTableSize:             5 << 20,
			MaxOpenFiles:             321,
			MaxConcurrentCompactions: 3,
			Compression:              CompressionZstd,
			L0CompactionThreshold:    7,
			L0StopWritesThreshold:    12,
		}, fmt.Sprint(3 << 20), map[string]map[string]string{
			dbo: {"max_open_files": "321", "max_background_compactions": "3"},
			cf: {
				"write_buffer_size":                  fmt.Sprint(5 << 20),
				"arena_block_size":                   "16384", // 3 MiB/3/64: a small cache's limit
				"compression":                        "kZSTD",
				"level0_file_num_compaction_trigger": "7",
				"level0_slowdown_writes_trigger":     "12", // not above the stop
				"level0_stop_writes_trigger":         "12",
			},
		}},
		{"no compression", Options{Compression: CompressionNone}, fmt.Sprint(DefaultCacheSize), map[string]map[string]string{
			cf: {"compression": "kNoCompression"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			d := statetest.Open(t, newBackend(t, tt.opts), dir)
			defer d.Close()
			got := readOptionsFile(t, dir)
			for section, kvs := range tt.want {
				for k, v := range kvs {
					if got[section][k] != v {
						t.Errorf("OPTIONS [%s] %s = %q; want %q", section, k, got[section][k], v)
					}
				}
			}
			if c := d.(*db).rdb.GetProperty("rocksdb.block-cache-capacity"); c != tt.cache {
				t.Errorf("block cache capacity = %s; want %s", c, tt.cache)
			}
			// The cache's options are only in the LOG: half of it is the
			// pool of the index and filter blocks.
			log, err := os.ReadFile(filepath.Join(dir, "LOG"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(log, []byte("high_pri_pool_ratio: 0.500")) {
				t.Error("the LOG does not show the block cache's high_pri_pool_ratio at 0.5")
			}
		})
	}
}

// TestCompressionReachesTables checks the table written, not only the
// options: its properties name the compression, and its data blocks are
// smaller than the data unless compression is off.
func TestCompressionReachesTables(t *testing.T) {
	for _, tt := range []struct {
		c    Compression
		name string // in the table's properties
	}{{"", "Snappy"}, {CompressionNone, "NoCompression"}, {CompressionSnappy, "Snappy"}, {CompressionZstd, "ZSTD"}} {
		t.Run(string(tt.c), func(t *testing.T) {
			dir := t.TempDir()
			d := statetest.Open(t, newBackend(t, Options{Compression: tt.c}), dir)
			defer d.Close()
			var writes []state.Write
			value := bytes.Repeat([]byte("compressible "), 20)
			for i := range 1000 {
				writes = append(writes, state.Write{Store: "s", Key: fmt.Appendf(nil, "k%05d", i), Value: value})
			}
			if err := d.Apply(&state.Batch{Writes: writes}); err != nil {
				t.Fatal(err)
			}
			flush(t, d)
			tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
			if len(tables) != 1 {
				t.Fatalf("%d tables after one flush: %v", len(tables), tables)
			}
			data, err := os.ReadFile(tables[0])
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"NoCompression", "Snappy", "ZSTD"} {
				if has := bytes.Contains(data, []byte(name)); has != (name == tt.name) {
					t.Errorf("table mentions %s: %v; want only %s", name, has, tt.name)
				}
			}
			compressed := len(data) < 1000*len(value)/2
			if compressed != (tt.c != CompressionNone) {
				t.Errorf("table of %d bytes for %d bytes of values; compression %q", len(data), 1000*len(value), tt.c)
			}
		})
	}
}

// tableProperty reads a number from the properties of d's tables
// (rocksdb.aggregated-table-properties: "...; filter block size=1285; ...").
func tableProperty(t *testing.T, d state.DB, name string) int64 {
	t.Helper()
	props := d.(*db).rdb.GetProperty("rocksdb.aggregated-table-properties")
	for _, field := range strings.Split(props, "; ") {
		if k, v, ok := strings.Cut(field, "="); ok && k == name {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("table property %q = %q: %v", name, v, err)
			}
			return n
		}
	}
	t.Fatalf("no table property %q in %q", name, props)
	return 0
}

// writeKeys applies n small keys to store s of d and flushes them into a
// table.
func writeKeys(t *testing.T, d state.DB, n int) {
	t.Helper()
	var writes []state.Write
	for i := range n {
		writes = append(writes, state.Write{Store: "s", Key: fmt.Appendf(nil, "k%06d", i), Value: []byte("value")})
	}
	if err := d.Apply(&state.Batch{Writes: writes}); err != nil {
		t.Fatal(err)
	}
	flush(t, d)
}

// TestBloomFiltersReachTables: every table has a filter of about 10 bits a
// key.
func TestBloomFiltersReachTables(t *testing.T) {
	d := statetest.Open(t, newBackend(t, Options{}), t.TempDir())
	defer d.Close()
	writeKeys(t, d, 5000)
	keys, filter := tableProperty(t, d, "# entries for filter"), tableProperty(t, d, "filter block size")
	if bits := float64(filter*8) / float64(keys); keys < 5000 || bits < 9 || bits > 11 {
		t.Fatalf("filter of %d bytes for %d keys: %.1f bits a key; want 10", filter, keys, bits)
	}
}

// TestCacheMetrics: the shared cache reports its capacity, and holds the
// index and filter blocks of a new table before any Get reads them (pinned
// for level 0), then the data blocks that Gets read.
func TestCacheMetrics(t *testing.T) {
	const cacheSize = 8 << 20
	b := New(Options{CacheSize: cacheSize})
	if cm := b.CacheMetrics(); cm.Capacity != cacheSize || cm.Bytes != 0 {
		t.Fatalf("CacheMetrics of a new Backend = %+v; want capacity %d, nothing held", cm, cacheSize)
	}
	d := statetest.Open(t, b, t.TempDir())
	writeKeys(t, d, 5000)
	meta := tableProperty(t, d, "filter block size") + tableProperty(t, d, "index block size (user-key? 1, delta-value? 1)")
	held := b.CacheMetrics().Bytes
	if held < meta {
		t.Errorf("cache holds %d bytes after a flush; want at least the table's %d bytes of index and filter", held, meta)
	}
	for i := 0; i < 5000; i += 10 {
		if _, ok, err := d.Get("s", fmt.Appendf(nil, "k%06d", i)); err != nil || !ok {
			t.Fatalf("Get k%06d = %v, %v", i, ok, err)
		}
	}
	data := tableProperty(t, d, "data block size")
	cm := b.CacheMetrics()
	if cm.Capacity != cacheSize || cm.Bytes < meta+data || cm.Bytes > cacheSize {
		t.Errorf("CacheMetrics after reading every data block = %+v; want capacity %d and at least %d+%d bytes held", cm, cacheSize, meta, data)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if cm := b.CacheMetrics(); cm != (state.CacheMetrics{}) {
		t.Errorf("CacheMetrics after Close = %+v; want zeros", cm)
	}
}

// BenchmarkBackend runs the workloads every backend is measured with, with
// the default options (BENCHMARKS.md).
func BenchmarkBackend(b *testing.B) {
	statetest.Bench(b, func(b *testing.B) state.Backend {
		be := New(Options{})
		b.Cleanup(func() { _ = be.Close() })
		return be
	})
}
