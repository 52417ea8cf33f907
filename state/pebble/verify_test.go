package pebble

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/state"
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
