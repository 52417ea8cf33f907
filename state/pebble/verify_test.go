package pebble

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/internal/keys"
	"github.com/eddy-streams/eddy/state/statetest"
)

// flipTableByte flips one byte in the middle of every table of the
// database in dir (in a data block: the footer and index sit at the end).
func flipTableByte(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".sst") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/3] ^= 0xff
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("no table in %s", dir)
	}
}

// TestCorruptTableFoundAtOpen: a flipped byte in a data block is found
// when the database opens, before the task reads anything, so the runtime
// rebuilds it before processing rather than at the first read that
// happens to touch the block.
func TestCorruptTableFoundAtOpen(t *testing.T) {
	b := newBackend(t, Options{})
	dir := t.TempDir()
	fill(t, b, dir)
	flipTableByte(t, dir)
	d, err := b.Open(dir)
	if err == nil {
		d.Close()
		t.Fatal("Open of a database with a damaged data block succeeded; want state.ErrCorrupt")
	}
	if !errors.Is(err, state.ErrCorrupt) {
		t.Fatalf("Open: %v; want state.ErrCorrupt", err)
	}
}

// BenchmarkVerifyTables measures what verifying the tables' checksums
// adds to the open of a task database of 1M keys shaped like the
// ledger's (12-byte keys, 16-byte values), flushed and compacted as a
// checkpoint leaves it: "open" is Pebble's open alone, "verify" the
// check that Backend.Open adds.
func BenchmarkVerifyTables(b *testing.B) {
	backend := New(Options{})
	defer backend.Close()
	dir := b.TempDir()
	d, err := backend.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	const n, batch = 1_000_000, 10_000
	for i := 0; i < n; i += batch {
		writes := make([]state.Write, 0, batch)
		for j := i; j < i+batch; j++ {
			writes = append(writes, state.Write{Store: "balances", Key: fmt.Appendf(nil, "acct-%07d", j), Value: fmt.Appendf(nil, "%08d%08d", j*7919%100000, j)})
		}
		if err := d.Apply(&state.Batch{Writes: writes, Offsets: statetest.OffsetsAt(int64(i + batch))}); err != nil {
			b.Fatal(err)
		}
	}
	pdb := d.(*db).pdb
	if err := pdb.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := pdb.Compact(context.Background(), keys.StoresStart(), keys.StoresEnd(), true); err != nil {
		b.Fatal(err)
	}
	if err := d.Close(); err != nil {
		b.Fatal(err)
	}
	var tableBytes int64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".sst") {
			tableBytes += info.Size()
		}
	}
	b.Logf("%d keys, %.1f MB of tables", n, float64(tableBytes)/1e6)

	po := backend.pebbleOptions(dir)
	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			pdb, err := pebbledb.Open(dir, po)
			if err != nil {
				b.Fatal(err)
			}
			if err := pdb.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verify", func(b *testing.B) {
		pdb, err := pebbledb.Open(dir, po)
		if err != nil {
			b.Fatal(err)
		}
		defer pdb.Close()
		b.SetBytes(tableBytes)
		for b.Loop() {
			if err := verifyTables(pdb, po, dir); err != nil {
				b.Fatal(err)
			}
		}
	})
	// What verifyTable replaced: Pebble's own validation, which also
	// decompresses every block.
	b.Run("pebble-validate", func(b *testing.B) {
		opts := po.Clone()
		opts.EnsureDefaults()
		b.SetBytes(tableBytes)
		for b.Loop() {
			for _, e := range entries {
				if strings.HasSuffix(e.Name(), ".sst") {
					if err := pebbleValidate(filepath.Join(dir, e.Name()), opts.MakeReaderOptions()); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	})
}

func pebbleValidate(path string, ro sstable.ReaderOptions) error {
	f, err := vfs.Default.Open(path)
	if err != nil {
		return err
	}
	readable, err := objstorageprovider.NewFileReadable(f, vfs.Default, objstorageprovider.NewReadaheadConfig(), path)
	if err != nil {
		return errors.Join(err, f.Close())
	}
	r, err := sstable.NewReader(context.Background(), readable, ro)
	if err != nil {
		return errors.Join(err, readable.Close())
	}
	return errors.Join(r.ValidateBlockChecksums(), r.Close())
}

// TestSkipVerifyAtOpen: with the check off, the damaged block is found by
// the read that reaches it, as before the check existed.
func TestSkipVerifyAtOpen(t *testing.T) {
	b := newBackend(t, Options{SkipVerifyAtOpen: true})
	dir := t.TempDir()
	fill(t, b, dir)
	flipTableByte(t, dir)
	d := mustOpen(t, b, dir)
	defer d.Close()
	err := d.Scan("s", nil, nil, func(_, _ []byte) error { return nil })
	if !errors.Is(err, state.ErrCorrupt) {
		t.Fatalf("Scan of a damaged table: %v; want state.ErrCorrupt", err)
	}
}

// TestCheckBlocksBounds: a layout that points past the end of the file or
// a footer naming no checksum Pebble writes is damage, reported as such
// rather than a panic or a plain error that would stop the task for good.
func TestCheckBlocksBounds(t *testing.T) {
	file := &objstorage.MemObj{}
	if err := file.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	buf := []byte(nil)
	for _, tc := range []struct {
		name    string
		ct      block.ChecksumType
		handles []block.Handle
	}{
		{"past the end", block.ChecksumTypeCRC32c, []block.Handle{{Offset: 90, Length: 20}}},
		{"offset past the end", block.ChecksumTypeCRC32c, []block.Handle{{Offset: 1 << 40, Length: 1}}},
		{"wrapping", block.ChecksumTypeCRC32c, []block.Handle{{Offset: 10, Length: ^uint64(0) - 8}}},
		{"checksum type", block.ChecksumType(9), []block.Handle{{Offset: 0, Length: 10}}},
		{"bad checksum", block.ChecksumTypeCRC32c, []block.Handle{{Offset: 0, Length: 10}}},
	} {
		err := checkBlocks(file, tc.ct, tc.handles, &buf)
		if !pebbledb.IsCorruptionError(err) {
			t.Errorf("%s: %v; want a corruption error", tc.name, err)
		}
	}
}
