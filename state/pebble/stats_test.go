package pebble

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/statetest"
)

func TestStallsFromEvents(t *testing.T) {
	var s stalls
	var l pebbledb.EventListener
	s.listen(&l)
	l.WriteStallEnd() // an end without a begin (opened mid-stall) counts nothing
	if s.count.Load() != 0 || s.duration() != 0 {
		t.Fatalf("after a stray end: %d stalls, %v", s.count.Load(), s.duration())
	}
	l.WriteStallBegin(pebbledb.WriteStallBeginInfo{Reason: "memtable count limit reached"})
	if s.count.Load() != 1 {
		t.Fatalf("stalls = %d, want 1", s.count.Load())
	}
	during := s.duration() // a stall in progress counts
	l.WriteStallEnd()
	after := s.duration()
	if during < 0 || after < during {
		t.Fatalf("duration went from %v (during) to %v (after)", during, after)
	}
	l.WriteStallBegin(pebbledb.WriteStallBeginInfo{})
	l.WriteStallEnd()
	if s.count.Load() != 2 || s.duration() < after {
		t.Fatalf("after two stalls: %d, %v", s.count.Load(), s.duration())
	}
}

func TestMetrics(t *testing.T) {
	b := newBackend(t, Options{MemTableSize: 256 << 10, CacheSize: 1 << 20})
	d := statetest.Open(t, b, filepath.Join(t.TempDir(), "db"))
	m := d.(*db).Metrics()
	if m.DiskBytes == 0 {
		t.Error("a new database takes no disk space")
	}
	for i := range 20 {
		var batch state.Batch
		for j := range 100 {
			batch.Writes = append(batch.Writes, state.Write{Store: "s", Key: fmt.Appendf(nil, "k%d-%d", i, j), Value: make([]byte, 1024)})
		}
		batch.Offsets = statetest.OffsetsAt(int64(i))
		if err := d.Apply(&batch); err != nil {
			t.Fatal(err)
		}
	}
	m = d.(*db).Metrics()
	if m.Flushes == 0 || m.WriteAmp == 0 || m.MemTables == 0 {
		t.Errorf("after 2 MiB through a 256 KiB memtable: %+v", m)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if got := d.(*db).Metrics(); got != (state.DBMetrics{}) {
		t.Errorf("closed database reports %+v", got)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := b.CacheMetrics(); got != (state.CacheMetrics{}) {
		t.Errorf("closed backend reports %+v", got)
	}
}

// TestWriteStallsCounted: a database whose writes stop at one level-0
// file stalls at each flush until level 0 is compacted; Metrics counts
// those stalls from Pebble's events.
func TestWriteStallsCounted(t *testing.T) {
	b := newBackend(t, Options{MemTableSize: 64 << 10, L0CompactionThreshold: 1, L0StopWritesThreshold: 1, MaxConcurrentCompactions: 1})
	d := statetest.Open(t, b, filepath.Join(t.TempDir(), "db"))
	defer d.Close()
	for i := range 20 {
		var batch state.Batch
		for j := range 50 {
			v := make([]byte, 1024)
			for k := range v {
				v[k] = byte(rand.IntN(256)) // incompressible: each batch fills most of a memtable
			}
			batch.Writes = append(batch.Writes, state.Write{Store: "s", Key: fmt.Appendf(nil, "k%d-%d", i, j), Value: v})
		}
		batch.Offsets = statetest.OffsetsAt(int64(i))
		if err := d.Apply(&batch); err != nil {
			t.Fatal(err)
		}
	}
	m := d.(*db).Metrics()
	if m.WriteStalls == 0 || m.WriteStallDuration <= 0 {
		t.Fatalf("no write stall counted after 20 memtables' worth of writes with L0StopWritesThreshold 1: %+v", m)
	}
	t.Logf("%d stalls, %v stalled, %d flushes, %d compactions", m.WriteStalls, m.WriteStallDuration, m.Flushes, m.Compactions)
}
