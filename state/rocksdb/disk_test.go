//go:build rocksdb

package rocksdb

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/linxGnu/grocksdb"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/internal/disk"
	"github.com/eddy-streams/eddy/state/internal/disk/disktest"
	"github.com/eddy-streams/eddy/state/internal/keys"
	"github.com/eddy-streams/eddy/state/statetest"
)

func mustOpen(t *testing.T, b *Backend, dir string) state.DB {
	t.Helper()
	d, err := b.Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return d
}

func flush(t *testing.T, d state.DB) {
	t.Helper()
	fo := grocksdb.NewDefaultFlushOptions()
	defer fo.Destroy()
	fo.SetWait(true)
	if err := d.(*db).rdb.Flush(fo); err != nil {
		t.Fatal(err)
	}
}

// TestDisk runs the suites of every backend and of every disk backend
// (conformance, damage, formats) on RocksDB, with a small memtable so that
// LargeBatch writes a batch bigger than it. testdata/format1 was written
// by eddy's RocksDB backend before formats had versions.
func TestDisk(t *testing.T) {
	getRaw, setRaw := disktest.Raw(func(d state.DB) disk.Engine { return engine{d.(*db)} })
	statetest.RunDisk(t, statetest.Disk{
		New:   func(t *testing.T) state.Backend { return newBackend(t, Options{MemTableSize: 1 << 20}) },
		Flush: flush,
		Compact: func(t *testing.T, d state.DB) {
			d.(*db).rdb.CompactRange(grocksdb.Range{Start: keys.StoresStart(), Limit: keys.StoresEnd()})
		},
		GetRaw: getRaw,
		SetRaw: setRaw,
		// CURRENT names the MANIFEST.
		Damages: []statetest.Damage{
			{Name: "current removed", Affix: "CURRENT", Fn: statetest.Remove},
			{Name: "current garbled", Affix: "CURRENT", Fn: statetest.Overwrite(func([]byte) []byte { return []byte("MANIFEST-999999\n") })},
		},
		Format1:        "testdata/format1",
		VerifiesAtOpen: true,
	})
}

// TestMissingCurrentWithoutLog pins what isCorruption's comment says: with
// neither CURRENT nor a write-ahead log, RocksDB starts over with an empty
// database, whose empty offsets make the runtime restore everything.
func TestMissingCurrentWithoutLog(t *testing.T) {
	b := newBackend(t, Options{})
	dir := t.TempDir()
	d := statetest.Open(t, b, dir)
	if err := d.Apply(&state.Batch{Writes: []state.Write{{Store: "s", Key: []byte("k00000"), Value: []byte("v")}}, Offsets: statetest.OffsetsAt(1)}); err != nil {
		t.Fatal(err)
	}
	flush(t, d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, p := range append(logs, filepath.Join(dir, "CURRENT")) {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	d = statetest.Open(t, b, dir)
	defer d.Close()
	if o, err := d.Offsets(); err != nil || len(o.Input) != 0 || len(o.Changelog) != 0 {
		t.Fatalf("offsets = %v, %v; want empty", o, err)
	}
	if _, ok, err := d.Get("s", []byte("k00000")); err != nil || ok {
		t.Fatalf("Get = %v, %v; want no key in the new database", ok, err)
	}
}
