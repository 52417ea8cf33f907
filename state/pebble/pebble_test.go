package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/internal/disk"
	"github.com/eddy-streams/eddy/state/internal/disk/disktest"
	"github.com/eddy-streams/eddy/state/internal/keys"
	"github.com/eddy-streams/eddy/state/statetest"
)

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

// fill writes 1000 keys and offsets, flushes them into a table file (so there
// is one to damage), and closes the database.
func fill(t *testing.T, b *Backend, dir string) {
	t.Helper()
	d := statetest.Open(t, b, dir)
	writes := make([]state.Write, 0, 1000)
	for i := range 1000 {
		writes = append(writes, state.Write{Store: "s", Key: fmt.Appendf(nil, "k%05d", i), Value: bytes.Repeat([]byte{'v'}, 100)})
	}
	if err := d.Apply(&state.Batch{Writes: writes, Offsets: statetest.OffsetsAt(1000)}); err != nil {
		t.Fatal(err)
	}
	flush(t, d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

func flush(t *testing.T, d state.DB) {
	t.Helper()
	if err := d.(*db).pdb.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestDisk runs the suites of every backend and of every disk backend:
// conformance, damaged files and metadata, a damaged log, a newer format
// refused, format 1 migrated (the database in testdata/format1 was written
// by eddy before formats had versions). Its memtable is small, so that
// LargeBatch exercises Pebble's path for batches bigger than the memtable.
func TestDisk(t *testing.T) {
	getRaw, setRaw := disktest.Raw(func(d state.DB) disk.Engine { return engine{d.(*db).pdb} })
	statetest.RunDisk(t, statetest.Disk{
		New:   func(t *testing.T) state.Backend { return newBackend(t, Options{MemTableSize: 1 << 20}) },
		Flush: flush,
		Compact: func(t *testing.T, d state.DB) {
			if err := d.(*db).pdb.Compact(context.Background(), keys.StoresStart(), keys.StoresEnd(), true); err != nil {
				t.Fatal(err)
			}
		},
		GetRaw: getRaw,
		SetRaw: setRaw,
		// The OPTIONS file is read at Open.
		Damages:        []statetest.Damage{{Name: "options overwritten", Affix: "OPTIONS-", Fn: statetest.Overwrite(func([]byte) []byte { return []byte("[Version]\n\x00\xff garbage\n") })}},
		Format1:        "testdata/format1",
		VerifiesAtOpen: true,
	})
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
	d := statetest.Open(t, b, dir)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCrashKeepsSyncedApplies uses Pebble's crashable file system: a crash
// right after Apply returns must keep everything Apply wrote.
func TestCrashKeepsSyncedApplies(t *testing.T) {
	fs := vfs.NewCrashableMem()
	b := newBackend(t, Options{FS: fs})
	d := statetest.Open(t, b, "/task")
	for i := range int64(50) {
		w := state.Write{Store: "s", Key: fmt.Appendf(nil, "k%03d", i), Value: []byte("v")}
		if err := d.Apply(&state.Batch{Writes: []state.Write{w}, Offsets: statetest.OffsetsAt(i + 1)}); err != nil {
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
	d2 := statetest.Open(t, b2, "/task")
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
	d := statetest.Open(t, b, "/a")
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

// TestDeleteRangeCrash: the suite's DeleteRangeTables after a crash
// right after the Apply, which keeps only what was synced.
func TestDeleteRangeCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	d := statetest.Open(t, newBackend(t, Options{FS: fs, MemTableSize: 1 << 20}), "/task")
	check := statetest.DeleteRangeTables(t, d, flush)
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	check("after crash", statetest.Open(t, newBackend(t, Options{FS: crashed}), "/task"))
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
