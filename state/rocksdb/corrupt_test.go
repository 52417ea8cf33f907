//go:build rocksdb

package rocksdb

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/linxGnu/grocksdb"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/internal/keys"
	"github.com/eddy-streams/eddy/state/internal/offsetcodec"
)

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

func flush(t *testing.T, d state.DB) {
	t.Helper()
	fo := grocksdb.NewDefaultFlushOptions()
	defer fo.Destroy()
	fo.SetWait(true)
	if err := d.(*db).rdb.Flush(fo); err != nil {
		t.Fatal(err)
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
	flush(t, d)
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
		{"table byte flipped", ".sst", overwrite(func(b []byte) []byte { b[len(b)/3] ^= 0xff; return b })},
		{"table overwritten, same size", ".sst", overwrite(func(b []byte) []byte { return garbage(len(b)) })},
		{"table truncated", ".sst", overwrite(func(b []byte) []byte { return b[:len(b)/2] })},
		{"table overwritten, longer", ".sst", overwrite(func(b []byte) []byte { return garbage(2 * len(b)) })},
		{"table removed", ".sst", func(path string, _ []byte) error { return os.Remove(path) }},
		{"manifest overwritten", "MANIFEST-", overwrite(func(b []byte) []byte { return garbage(len(b) + 100) })},
		{"manifest emptied", "MANIFEST-", overwrite(func([]byte) []byte { return nil })},
		{"manifest removed", "MANIFEST-", func(path string, _ []byte) error { return os.Remove(path) }},
		{"current removed", "CURRENT", func(path string, _ []byte) error { return os.Remove(path) }},
		{"current garbled", "CURRENT", overwrite(func([]byte) []byte { return []byte("MANIFEST-999999\n") })},
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
	wo := grocksdb.NewDefaultWriteOptions()
	defer wo.Destroy()
	if err := d.(*db).rdb.Put(wo, keys.Meta(), []byte{offsetcodec.Version, 5, 1}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := b.Open(dir)
	if !errors.Is(err, state.ErrCorrupt) || !errors.Is(err, offsetcodec.ErrMalformed) {
		t.Fatalf("Open with bad offsets: %v; want ErrCorrupt wrapping offsetcodec.ErrMalformed", err)
	}
	// A failed Open must not leave the directory marked open.
	if err := b.Destroy(dir); err != nil {
		t.Fatal(err)
	}
}

// TestMissingCurrentWithoutLog pins what isCorruption's comment says: with
// neither CURRENT nor a write-ahead log, RocksDB starts over with an empty
// database, whose empty offsets make the runtime restore everything.
func TestMissingCurrentWithoutLog(t *testing.T) {
	b := newBackend(t, Options{})
	dir := t.TempDir()
	fill(t, b, dir)
	damage(t, dir, "CURRENT", func(path string, _ []byte) error { return os.Remove(path) })
	damage(t, dir, ".log", func(path string, _ []byte) error { return os.Remove(path) })
	d := mustOpen(t, b, dir)
	defer d.Close()
	if o, err := d.Offsets(); err != nil || len(o.Input) != 0 || len(o.Changelog) != 0 {
		t.Fatalf("offsets = %v, %v; want empty", o, err)
	}
	if _, ok, err := d.Get("s", []byte("k00000")); err != nil || ok {
		t.Fatalf("Get = %v, %v; want no key in the new database", ok, err)
	}
}

// TestWALDamageKeepsOffsetsConsistent pins the property that makes
// RocksDB's point-in-time recovery at a damaged WAL record harmless: what
// survives is a prefix of the Applies, each with its own offsets.
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
		t.Logf("WAL damage reported: %v", err)
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
	if want == fmt.Sprint(n) {
		t.Fatalf("all %d Applies survived; the damage missed the WAL", n)
	}
	t.Logf("WAL damage: %s of %d synced Applies survived, without error", want, n)
}
