//go:build rocksdb

package rocksdb

import (
	"errors"
	"testing"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/pebble"
	"github.com/eddy-streams/eddy/state/statetest"
)

// TestPebbleDirIsCorrupt: a state dir written by Pebble, opened by a program
// switched to RocksDB, is reported corrupt, which makes the runtime discard
// it and restore from the changelog, instead of being misread.
func TestPebbleDirIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	pb := pebble.New(pebble.Options{})
	defer pb.Close()
	d, err := pb.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Apply(&state.Batch{Writes: []state.Write{{Store: "s", Key: []byte("k"), Value: []byte("v")}}, Offsets: statetest.OffsetsAt(1)}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = newBackend(t, Options{}).Open(dir)
	if !errors.Is(err, state.ErrCorrupt) {
		t.Fatalf("RocksDB opening a Pebble dir: %v; want ErrCorrupt", err)
	}
	t.Log(err)
}

// TestRocksDBDirIsCorrupt is the other way round: a program switched back
// to Pebble finds a state dir that RocksDB wrote.
func TestRocksDBDirIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	d := statetest.Open(t, newBackend(t, Options{}), dir)
	if err := d.Apply(&state.Batch{Writes: []state.Write{{Store: "s", Key: []byte("k"), Value: []byte("v")}}, Offsets: statetest.OffsetsAt(1)}); err != nil {
		t.Fatal(err)
	}
	flush(t, d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	pb := pebble.New(pebble.Options{})
	defer pb.Close()
	if _, err := pb.Open(dir); !errors.Is(err, state.ErrCorrupt) {
		t.Fatalf("Pebble opening a RocksDB dir: %v; want ErrCorrupt", err)
	}
}
