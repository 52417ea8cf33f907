package pebble

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/eddy-streams/eddy/state"
)

func TestInspect(t *testing.T) {
	b := newBackend(t, Options{})
	dir := filepath.Join(t.TempDir(), "0_1")
	d := mustOpen(t, b, dir)
	offsets := state.Offsets{
		Input:      map[state.TopicPartition]int64{{Topic: "payments", Partition: 1}: 42},
		Changelog:  map[string]int64{"a": 7, "ab": 3},
		StreamTime: 1234,
	}
	err := d.Apply(&state.Batch{Writes: []state.Write{
		{Store: "a", Key: []byte("k1"), Value: []byte("vv")},
		{Store: "a", Key: []byte("k2"), Value: []byte("vvv")},
		{Store: "ab", Key: []byte("key"), Value: []byte("v")},
		{Store: "a", Key: []byte("gone"), Value: []byte("x")},
	}, Offsets: offsets})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Apply(&state.Batch{Writes: []state.Write{{Store: "a", Key: []byte("gone"), Delete: true}}, Offsets: offsets}); err != nil {
		t.Fatal(err)
	}

	// Held by the backend: Inspect must not wait or read a moving target.
	if _, err := Inspect(dir); !errors.Is(err, ErrInUse) {
		t.Fatalf("Inspect of an open database: %v, want ErrInUse", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	sum, err := Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []StoreSummary{
		{Name: "a", Keys: 2, KeyBytes: 4, ValueBytes: 5},
		{Name: "ab", Keys: 1, KeyBytes: 3, ValueBytes: 1},
	}
	if len(sum.Stores) != len(want) {
		t.Fatalf("stores %+v, want %+v", sum.Stores, want)
	}
	for i := range want {
		if sum.Stores[i] != want[i] {
			t.Errorf("store %d: %+v, want %+v", i, sum.Stores[i], want[i])
		}
	}
	if got := sum.Offsets.Input[state.TopicPartition{Topic: "payments", Partition: 1}]; got != 42 {
		t.Errorf("input offset %d, want 42", got)
	}
	if sum.Offsets.Changelog["a"] != 7 || sum.Offsets.Changelog["ab"] != 3 || sum.Offsets.StreamTime != 1234 {
		t.Errorf("offsets %+v, want changelog a=7 ab=3, stream time 1234", sum.Offsets)
	}
	if sum.DiskBytes == 0 {
		t.Error("DiskBytes 0 for a database with data")
	}

	// Read-only: the database opens afterwards with everything in it.
	d = mustOpen(t, b, dir)
	defer d.Close()
	if v, ok, err := d.Get("a", []byte("k2")); err != nil || !ok || string(v) != "vvv" {
		t.Fatalf("after Inspect: Get a/k2 = %q %v %v", v, ok, err)
	}

	if _, err := Inspect(filepath.Join(t.TempDir(), "none")); err == nil || errors.Is(err, ErrInUse) {
		t.Fatalf("Inspect of a missing directory: %v, want a not-exist error", err)
	}
}

// TestInspectCorruptTable: a table with a flipped byte is reported as
// state.ErrCorrupt, not a panic from Pebble's corruption handler.
func TestInspectCorruptTable(t *testing.T) {
	b := newBackend(t, Options{})
	dir := filepath.Join(t.TempDir(), "0_1")
	fill(t, b, dir)
	flipTableByte(t, dir)
	_, err := Inspect(dir)
	if !errors.Is(err, state.ErrCorrupt) {
		t.Fatalf("Inspect of a damaged table: %v; want state.ErrCorrupt", err)
	}
}
