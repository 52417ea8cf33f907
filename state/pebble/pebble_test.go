package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/internal/keys"
	"github.com/eddy-streams/eddy/state/internal/offsetcodec"
	"github.com/eddy-streams/eddy/state/statetest"
)

func TestConformance(t *testing.T) {
	statetest.Run(t, func(t *testing.T) state.Backend {
		// A small memtable, so LargeBatch exercises Pebble's path for
		// batches bigger than the memtable.
		return newBackend(t, Options{MemTableSize: 1 << 20, CacheSize: 1 << 20})
	})
}

func newBackend(t *testing.T, opts Options) *Backend {
	b := New(opts)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func mustOpen(t *testing.T, b *Backend, dir string) state.DB {
	t.Helper()
	d, err := b.Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return d
}

func testOffsets(n int64) state.Offsets {
	return state.Offsets{
		Input:     map[state.TopicPartition]int64{{Topic: "in", Partition: 0}: n},
		Changelog: map[string]int64{"s": n},
	}
}

// fill writes 1000 keys and offsets, flushes them into a table file (so there
// is one to damage), and closes the database.
func fill(t *testing.T, b *Backend, dir string) {
	t.Helper()
	d := mustOpen(t, b, dir)
	writes := make([]state.Write, 0, 1000)
	for i := range 1000 {
		writes = append(writes, state.Write{Store: "s", Key: fmt.Appendf(nil, "k%05d", i), Value: bytes.Repeat([]byte{'v'}, 100)})
	}
	if err := d.Apply(&state.Batch{Writes: writes, Offsets: testOffsets(1000)}); err != nil {
		t.Fatal(err)
	}
	if err := d.(*db).pdb.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

// damage applies fn to every file of dir whose name has the given prefix or
// suffix and fails if there is none.
func damage(t *testing.T, dir, affix string, fn func(path string, data []byte) error) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), affix) && !strings.HasSuffix(e.Name(), affix) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := fn(path, data); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("no file matching %q in %s", affix, dir)
	}
}

func overwrite(data func([]byte) []byte) func(string, []byte) error {
	return func(path string, b []byte) error { return os.WriteFile(path, data(b), 0o644) }
}

func garbage(n int) []byte { return bytes.Repeat([]byte("garbage!"), n/8+1)[:n] }

// openAndRead opens dir and reads everything, returning the first error: a
// damaged file may be noticed at Open or only when a read reaches it.
func openAndRead(b *Backend, dir string) (where string, err error) {
	d, err := b.Open(dir)
	if err != nil {
		return "open", err
	}
	defer d.Close()
	if err := d.Scan("s", nil, nil, func(k, v []byte) error { return nil }); err != nil {
		return "scan", err
	}
	for i := range 1000 {
		if _, _, err := d.Get("s", fmt.Appendf(nil, "k%05d", i)); err != nil {
			return "get", err
		}
	}
	return "", nil
}

func TestCorruptFiles(t *testing.T) {
	tests := []struct {
		name  string
		affix string
		fn    func(path string, data []byte) error
	}{
		// Checksums catch these on read; Open succeeds.
		{"table byte flipped", ".sst", overwrite(func(b []byte) []byte { b[len(b)/3] ^= 0xff; return b })},
		{"table overwritten, same size", ".sst", overwrite(func(b []byte) []byte { return garbage(len(b)) })},
		// Open's consistency check catches a size change and a missing file.
		{"table truncated", ".sst", overwrite(func(b []byte) []byte { return b[:len(b)/2] })},
		{"table overwritten, longer", ".sst", overwrite(func(b []byte) []byte { return garbage(2 * len(b)) })},
		{"table removed", ".sst", func(path string, _ []byte) error { return os.Remove(path) }},
		// The MANIFEST is read at Open.
		{"manifest overwritten", "MANIFEST-", overwrite(func(b []byte) []byte { return garbage(len(b) + 100) })},
		{"manifest emptied", "MANIFEST-", overwrite(func([]byte) []byte { return nil })},
		{"manifest removed", "MANIFEST-", func(path string, _ []byte) error { return os.Remove(path) }},
		{"options overwritten", "OPTIONS-", overwrite(func(b []byte) []byte { return []byte("[Version]\n\x00\xff garbage\n") })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBackend(t, Options{})
			dir := t.TempDir()
			fill(t, b, dir)
			damage(t, dir, tt.affix, tt.fn)
			where, err := openAndRead(b, dir)
			if !errors.Is(err, state.ErrCorrupt) {
				t.Fatalf("%s: %v; want an error wrapping state.ErrCorrupt", where, err)
			}
			t.Logf("reported at %s: %v", where, err)
			// The runtime's answer to ErrCorrupt: destroy and start over.
			if err := b.Destroy(dir); err != nil {
				t.Fatal(err)
			}
			d := mustOpen(t, b, dir)
			defer d.Close()
			if o, err := d.Offsets(); err != nil || len(o.Input) != 0 {
				t.Fatalf("offsets after Destroy = %v, %v; want empty", o, err)
			}
		})
	}
}

func TestCorruptOffsets(t *testing.T) {
	b := newBackend(t, Options{})
	dir := t.TempDir()
	d := mustOpen(t, b, dir)
	if err := d.(*db).pdb.Set(keys.Meta(), []byte{offsetcodec.Version, 5, 1}, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(dir); !errors.Is(err, state.ErrCorrupt) {
		t.Fatalf("Open with bad offsets: %v; want ErrCorrupt", err)
	}
	// A failed Open must not leave the directory marked open.
	if err := b.Destroy(dir); err != nil {
		t.Fatal(err)
	}
}

// TestUnreadableDirIsCorrupt: a directory Pebble cannot read, such as one
// RocksDB wrote (it has a CURRENT file and no Pebble format marker), is
// rebuilt like a damaged one rather than failing the task for good.
// state/rocksdb's TestRocksDBDirIsCorrupt does this with a real RocksDB.
func TestUnreadableDirIsCorrupt(t *testing.T) {
	b := newBackend(t, Options{})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "CURRENT"), []byte("MANIFEST-000005\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(dir); !errors.Is(err, state.ErrCorrupt) {
		t.Fatalf("Open of a dir with a CURRENT file: %v; want ErrCorrupt", err)
	}
	if err := b.Destroy(dir); err != nil {
		t.Fatal(err)
	}
	d := mustOpen(t, b, dir)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWALDamageKeepsOffsetsConsistent pins the property that makes Pebble's
// silent stop at a damaged WAL record harmless: what survives is a prefix of
// the Applies, each with its own offsets.
func TestWALDamageKeepsOffsetsConsistent(t *testing.T) {
	b := newBackend(t, Options{})
	dir := t.TempDir()
	d := mustOpen(t, b, dir)
	const n = 200
	for i := range int64(n) {
		w := state.Write{Store: "s", Key: []byte("counter"), Value: fmt.Appendf(nil, "%d", i+1)}
		if err := d.Apply(&state.Batch{Writes: []state.Write{w}, Offsets: testOffsets(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	damage(t, dir, ".log", overwrite(func(b []byte) []byte {
		if len(b) > 1000 {
			b[len(b)/3] ^= 0x55
		}
		return b
	}))
	d, err := b.Open(dir)
	if errors.Is(err, state.ErrCorrupt) {
		return // also acceptable: the runtime rebuilds
	}
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	v, ok, err := d.Get("s", []byte("counter"))
	if err != nil {
		t.Fatal(err)
	}
	o, err := d.Offsets()
	if err != nil {
		t.Fatal(err)
	}
	want := "0"
	if ok {
		want = string(v)
	}
	if got := fmt.Sprint(o.Changelog["s"]); got != want {
		t.Fatalf("after WAL damage: counter %q with changelog offset %s; want them equal", want, got)
	}
	t.Logf("WAL damage: %s of %d synced Applies survived, without error", want, n)
}

// TestCrashKeepsSyncedApplies uses Pebble's crashable file system: a crash
// right after Apply returns must keep everything Apply wrote.
func TestCrashKeepsSyncedApplies(t *testing.T) {
	fs := vfs.NewCrashableMem()
	b := newBackend(t, Options{FS: fs})
	d := mustOpen(t, b, "/task")
	for i := range int64(50) {
		w := state.Write{Store: "s", Key: fmt.Appendf(nil, "k%03d", i), Value: []byte("v")}
		if err := d.Apply(&state.Batch{Writes: []state.Write{w}, Offsets: testOffsets(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{}) // only what was synced
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/task"); err == nil {
		t.Fatal("the database went to the OS file system, not Options.FS")
	}

	b2 := newBackend(t, Options{FS: crashed})
	d2 := mustOpen(t, b2, "/task")
	defer d2.Close()
	if got := len(statetest.Scan(t, d2, "s", nil, nil)); got != 50 {
		t.Fatalf("%d keys after crash; want 50", got)
	}
	if o, _ := d2.Offsets(); o.Changelog["s"] != 50 {
		t.Fatalf("offsets after crash = %v; want 50", o)
	}
}

func TestBackendClose(t *testing.T) {
	b := New(Options{FS: vfs.NewMem()})
	d := mustOpen(t, b, "/a")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// Open databases keep the shared caches alive.
	if err := d.Apply(&state.Batch{Writes: []state.Write{{Store: "s", Key: []byte("k"), Value: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Get("s", []byte("k")); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open("/b"); err == nil {
		t.Fatal("Open after Backend.Close succeeded")
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// recorder is a slog.Handler that keeps the levels and messages it gets.
type recorder struct{ records []string }

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.records = append(r.records, rec.Level.String()+" "+rec.Message)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func TestLogger(t *testing.T) {
	rec := &recorder{}
	l := &pebbleLogger{l: slog.New(rec)}
	l.Infof("flushed %d", 1)
	l.Errorf("background error: %s", "disk full")
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Fatalf returned; Pebble relies on it not returning")
			}
		}()
		l.Fatalf("invariant %s", "broken")
	}()
	want := []string{"DEBUG flushed 1", "ERROR background error: disk full", "ERROR invariant broken"}
	if fmt.Sprint(rec.records) != fmt.Sprint(want) {
		t.Fatalf("records = %q; want %q", rec.records, want)
	}
}

// TestDeleteRangeTables checks the order of ranges and writes where Pebble
// keeps them apart: over keys already in table files, in a batch larger than
// the memtable (which Pebble turns into a memtable of its own), after flushes
// and a compaction that must drop the covered keys but not the batch's
// writes, and after a crash that keeps only what was synced.
func TestDeleteRangeTables(t *testing.T) {
	fs := vfs.NewCrashableMem()
	b := newBackend(t, Options{FS: fs, MemTableSize: 1 << 20})
	d := mustOpen(t, b, "/task")
	pdb := d.(*db).pdb
	var writes []state.Write
	for i := range 2000 {
		for _, s := range []string{"w", "w2"} {
			writes = append(writes, state.Write{Store: s, Key: fmt.Appendf(nil, "k%05d", i), Value: []byte("old")})
		}
	}
	if err := d.Apply(&state.Batch{Writes: writes}); err != nil {
		t.Fatal(err)
	}
	if err := pdb.Flush(); err != nil {
		t.Fatal(err)
	}
	// One batch: drop all of w, rewrite every tenth key of it, and carry
	// 2 MiB of other writes so it is bigger than the memtable.
	writes = writes[:0]
	for i := 0; i < 2000; i += 10 {
		writes = append(writes, state.Write{Store: "w", Key: fmt.Appendf(nil, "k%05d", i), Value: []byte("new")})
	}
	writes = append(writes, state.Write{Store: "big", Key: []byte("k"), Value: bytes.Repeat([]byte{'x'}, 2<<20)})
	o := testOffsets(7)
	if err := d.Apply(&state.Batch{Ranges: []state.DeleteRange{{Store: "w"}}, Writes: writes, Offsets: o}); err != nil {
		t.Fatal(err)
	}
	check := func(when string, d state.DB) {
		t.Helper()
		got := statetest.Scan(t, d, "w", nil, nil)
		if len(got) != 200 {
			t.Fatalf("%s: %d keys in w; want the 200 the batch rewrote", when, len(got))
		}
		for i, kv := range got {
			if want := fmt.Sprintf("k%05d", i*10); kv.Key != want || kv.Value != "new" {
				t.Fatalf("%s: key %d = %v; want %s=new", when, i, kv, want)
			}
		}
		if n := len(statetest.Scan(t, d, "w2", nil, nil)); n != 2000 {
			t.Fatalf("%s: %d keys in w2; want 2000 (the range is w's alone)", when, n)
		}
		if o, _ := d.Offsets(); o.Changelog["s"] != 7 {
			t.Fatalf("%s: offsets %v; want the batch's", when, o)
		}
	}
	check("after apply", d)
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	if err := pdb.Flush(); err != nil {
		t.Fatal(err)
	}
	check("after flush", d)
	if err := pdb.Compact(context.Background(), []byte{keys.PrefixStore}, []byte{keys.PrefixStore + 1}, true); err != nil {
		t.Fatal(err)
	}
	check("after compaction", d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d2 := mustOpen(t, newBackend(t, Options{FS: crashed}), "/task")
	defer d2.Close()
	check("after crash", d2)
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
