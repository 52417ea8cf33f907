package pebble

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/statetest"
)

// TestCheckpoint: a checkpoint holds the state and offsets of the moment it
// was taken, both what was flushed into tables and what was only in the
// write-ahead log, opens on its own, and does not see later applies.
func TestCheckpoint(t *testing.T) {
	b := newBackend(t, Options{})
	dir := t.TempDir()
	fill(t, b, dir) // 1000 keys in a table
	d := statetest.Open(t, b, dir)
	defer d.Close()
	// And some only in the memtable and log.
	if err := d.Apply(&state.Batch{Writes: []state.Write{{Store: "s", Key: []byte("wal-only"), Value: []byte("x")}}, Offsets: statetest.OffsetsAt(1001)}); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "cp")
	if err := d.(state.Checkpointer).Checkpoint(cp); err != nil {
		t.Fatal(err)
	}
	if err := d.Apply(&state.Batch{Writes: []state.Write{{Store: "s", Key: []byte("after"), Value: []byte("y")}}, Offsets: statetest.OffsetsAt(1002)}); err != nil {
		t.Fatal(err)
	}
	// A second checkpoint into an existing directory is refused rather
	// than mixed into it.
	if err := d.(state.Checkpointer).Checkpoint(cp); err == nil {
		t.Fatal("a checkpoint into an existing directory succeeded")
	}

	c := statetest.Open(t, b, cp)
	defer c.Close()
	offsets, err := c.Offsets()
	if err != nil || offsets.Changelog["s"] != 1001 {
		t.Fatalf("checkpoint offsets = %v, %v; want changelog offset 1001", offsets, err)
	}
	n := 0
	if err := c.Scan("s", nil, nil, func(k, v []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 1001 {
		t.Fatalf("checkpoint holds %d keys; want the 1000 flushed + 1 logged", n)
	}
	if _, ok, _ := c.Get("s", []byte("after")); ok {
		t.Fatal("the checkpoint holds a write applied after it")
	}
	if _, ok, _ := c.Get("s", []byte("wal-only")); !ok {
		t.Fatal("the checkpoint lost a write that was only in the write-ahead log")
	}
}

// TestCheckpointNeedsTheOSFileSystem: package checkpoint reads the files
// through the OS, so a backend on another file system says so.
func TestCheckpointNeedsTheOSFileSystem(t *testing.T) {
	b := newBackend(t, Options{FS: vfs.NewMem()})
	d := statetest.Open(t, b, "/db")
	defer d.Close()
	err := d.(state.Checkpointer).Checkpoint("/cp")
	if err == nil || !strings.Contains(err.Error(), "Options.FS") {
		t.Fatalf("checkpoint on an in-memory file system: %v; want an error naming Options.FS", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.(state.Checkpointer).Checkpoint("/cp2"); err == nil {
		t.Fatal("checkpoint of a closed database succeeded")
	}
}
