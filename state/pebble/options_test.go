package pebble

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/statetest"
)

// TestOptionsValidate checks that Pebble's limit and defaults reach the
// shared validation (state/internal/disk tests the rest of it).
func TestOptionsValidate(t *testing.T) {
	if err := (Options{MemTableSize: maxMemTableSize, Compression: CompressionZstd}).Validate(); err != nil {
		t.Fatalf("largest memtable: %v", err)
	}
	err := Options{MemTableSize: 4 << 30, CacheSize: -1, MaxOpenFiles: -5, L0CompactionThreshold: 20}.Validate()
	for _, want := range []string{
		"state/pebble: Options.MemTableSize = 4294967296: must be below 4 GiB, Pebble's limit",
		"Options.CacheSize = -1: must not be negative (0 means the default, 64 MiB)",
		"Options.MaxOpenFiles = -5: must not be negative (0 means the default, 1000)",
		"Options.L0StopWritesThreshold = 12: must be at least L0CompactionThreshold (20)",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v; want it to say %q", err, want)
		}
	}
}

// TestInvalidOptionsFailOpen: New cannot fail, so Open must.
func TestInvalidOptionsFailOpen(t *testing.T) {
	fs := vfs.NewMem()
	b := New(Options{FS: fs, Compression: "brotli", CacheSize: -1})
	_, err := b.Open("/task")
	if err == nil || !strings.Contains(err.Error(), "Options.Compression") || !strings.Contains(err.Error(), "Options.CacheSize") {
		t.Fatalf("Open with invalid options: %v; want the Validate errors", err)
	}
	if _, err := fs.Stat("/task"); err == nil {
		t.Fatal("Open with invalid options created the directory")
	}
	// Destroy still works on the Backend's file system (it needs no tuning),
	// and Close has nothing to release.
	if err := fs.MkdirAll("/old", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := b.Destroy("/old"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat("/old"); err == nil {
		t.Fatal("Destroy left the directory")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// readOptionsFile returns the OPTIONS file Pebble wrote in dir, as section →
// key → value: what Pebble itself recorded that it runs with.
func readOptionsFile(t *testing.T, fs vfs.FS, dir string) map[string]map[string]string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if !strings.HasPrefix(name, "OPTIONS-") {
			continue
		}
		f, err := fs.Open(fs.PathJoin(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(f)
		_ = f.Close()
		if err != nil {
			t.Fatal(err)
		}
		return statetest.ParseOptionsFile(data)
	}
	t.Fatalf("no OPTIONS file in %s (%v)", dir, names)
	return nil
}

func TestOptionsReachPebble(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		want  map[string]string // [Options] keys
		level string            // compression of every level
	}{
		{"defaults", Options{}, map[string]string{
			"cache_size":                 fmt.Sprint(DefaultCacheSize),
			"mem_table_size":             fmt.Sprint(2 << 20), // a 32nd of the cache
			"max_open_files":             fmt.Sprint(DefaultMaxOpenFiles),
			"concurrent_compactions":     "1",
			"max_concurrent_compactions": "1",
			"l0_compaction_threshold":    "4",
			"l0_stop_writes_threshold":   "12",
		}, "Snappy"},
		{"custom", Options{
			CacheSize:                3 << 20,
			MemTableSize:             5 << 20,
			MaxOpenFiles:             321,
			MaxConcurrentCompactions: 3,
			Compression:              CompressionZstd,
			L0CompactionThreshold:    7,
			L0StopWritesThreshold:    30,
		}, map[string]string{
			"cache_size":                 fmt.Sprint(3 << 20),
			"mem_table_size":             fmt.Sprint(5 << 20),
			"max_open_files":             "321",
			"concurrent_compactions":     "1",
			"max_concurrent_compactions": "3",
			"l0_compaction_threshold":    "7",
			"l0_stop_writes_threshold":   "30",
		}, "ZSTD"},
		{"no compression", Options{Compression: CompressionNone}, nil, "NoCompression"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := vfs.NewMem()
			tt.opts.FS = fs
			b := newBackend(t, tt.opts)
			d := mustOpen(t, b, "/task")
			defer d.Close()
			got := readOptionsFile(t, fs, "/task")
			for k, v := range tt.want {
				if got["Options"][k] != v {
					t.Errorf("OPTIONS %s = %q; want %q", k, got["Options"][k], v)
				}
			}
			for i := range 7 {
				if c := got[fmt.Sprintf("Level %q", fmt.Sprint(i))]["compression"]; c != tt.level {
					t.Errorf("level %d compression = %q; want %q", i, c, tt.level)
				}
			}
		})
	}
}

// TestCompressionReachesTables checks the tables written, not only the
// options: Pebble counts its tables by compression.
func TestCompressionReachesTables(t *testing.T) {
	for _, c := range []Compression{"", CompressionNone, CompressionSnappy, CompressionZstd} {
		t.Run(string(c), func(t *testing.T) {
			b := newBackend(t, Options{FS: vfs.NewMem(), Compression: c})
			d := mustOpen(t, b, "/task")
			defer d.Close()
			var writes []state.Write
			for i := range 1000 {
				writes = append(writes, state.Write{Store: "s", Key: fmt.Appendf(nil, "k%05d", i), Value: bytes.Repeat([]byte("compressible "), 20)})
			}
			if err := d.Apply(&state.Batch{Writes: writes}); err != nil {
				t.Fatal(err)
			}
			pdb := d.(*db).pdb
			if err := pdb.Flush(); err != nil {
				t.Fatal(err)
			}
			m := pdb.Metrics().Table
			got := map[Compression]int64{CompressionNone: m.CompressedCountNone, CompressionSnappy: m.CompressedCountSnappy, CompressionZstd: m.CompressedCountZstd}
			want := c
			if want == "" {
				want = CompressionSnappy
			}
			for name, n := range got {
				if (n > 0) != (name == want) {
					t.Errorf("%d tables with %s; want tables with %s only (counts %v, minlz %d, unknown %d)", n, name, want, got, m.CompressedCountMinLZ, m.CompressedCountUnknown)
				}
			}
		})
	}
}

// TestMaxOpenFiles reads from more tables than the file cache holds and
// checks that the shared cache stays within Pebble's size for MaxOpenFiles.
// It also checks that the level 0 thresholds change what Pebble does.
func TestMaxOpenFiles(t *testing.T) {
	const maxOpen = 74 // Pebble keeps 10 for other files: 64 tables
	// Level 0 thresholds far above the table count keep the tables apart.
	b := newBackend(t, Options{FS: vfs.NewMem(), MaxOpenFiles: maxOpen, L0CompactionThreshold: 1000, L0StopWritesThreshold: 1000})
	d := mustOpen(t, b, "/task")
	defer d.Close()
	pdb := d.(*db).pdb
	const tables = 100
	for i := range tables {
		// One key per flush, each in its own table; the keys do not
		// overlap, so level 0 stays one sublevel and is not compacted.
		w := state.Write{Store: "s", Key: fmt.Appendf(nil, "k%05d", i), Value: []byte("v")}
		if err := d.Apply(&state.Batch{Writes: []state.Write{w}}); err != nil {
			t.Fatal(err)
		}
		if err := pdb.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	var n int64
	for _, l := range pdb.Metrics().Levels {
		n += l.TablesCount
	}
	// With Pebble's default thresholds the flushes are compacted into a
	// few tables; that they are not shows the thresholds reached Pebble.
	if n != tables {
		t.Fatalf("%d tables after %d flushes; want %d (L0 thresholds not applied?)", n, tables, tables)
	}
	for i := range tables {
		if _, ok, err := d.Get("s", fmt.Appendf(nil, "k%05d", i)); err != nil || !ok {
			t.Fatalf("Get k%05d = %v, %v", i, ok, err)
		}
	}
	// The cache closes evicted tables on a goroutine of its own, so the
	// count comes down shortly after the reads, not with them.
	deadline := time.Now().Add(10 * time.Second)
	for {
		open := pdb.Metrics().FileCache.TableCount
		if open > 0 && open <= maxOpen-10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tables open after reading %d; want 1 to %d", open, n, maxOpen-10)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
