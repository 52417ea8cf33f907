package pebble

import (
	"sync/atomic"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/eddy-streams/eddy/state"
)

// stalls counts a database's write stalls from Pebble's events, which
// arrive on Pebble's goroutines.
type stalls struct {
	count   atomic.Int64
	total   atomic.Int64 // ns, stalls that ended
	started atomic.Int64 // UnixNano of the stall in progress, 0 if none
}

func (s *stalls) listen(l *pebbledb.EventListener) {
	l.WriteStallBegin = func(pebbledb.WriteStallBeginInfo) {
		s.count.Add(1)
		s.started.Store(time.Now().UnixNano())
	}
	l.WriteStallEnd = func() {
		if at := s.started.Swap(0); at != 0 {
			s.total.Add(time.Now().UnixNano() - at)
		}
	}
}

func (s *stalls) duration() time.Duration {
	d := s.total.Load()
	if at := s.started.Load(); at != 0 {
		d += max(time.Now().UnixNano()-at, 0)
	}
	return time.Duration(d)
}

// Metrics returns the database's figures, read from Pebble's own
// (pebble.DB.Metrics) and from its write-stall events. Unlike the state.DB methods it
// may be called from any goroutine while the database is used, but not
// concurrently with Close (the runtime stops reporting a database before
// it closes it). A closed database reports zeros.
func (d *db) Metrics() state.DBMetrics {
	if d.pdb == nil {
		return state.DBMetrics{}
	}
	pm := d.pdb.Metrics()
	total := pm.Total()
	return state.DBMetrics{
		DiskBytes:              pm.DiskSpaceUsage(),
		WriteAmp:               total.WriteAmp(),
		Flushes:                pm.Flush.Count,
		Compactions:            pm.Compact.Count,
		CompactionsInProgress:  pm.Compact.NumInProgress,
		CompactionPendingBytes: pm.Compact.EstimatedDebt,
		WriteStalls:            d.stalls.count.Load(),
		WriteStallDuration:     d.stalls.duration(),
		L0Files:                pm.Levels[0].TablesCount,
		L0Sublevels:            pm.Levels[0].Sublevels,
		ReadAmp:                pm.ReadAmp(),
		// A memtable kept for reuse (a zombie) keeps its reservation of
		// block cache: it counts as much as a live one.
		MemTableBytes: pm.MemTable.Size + pm.MemTable.ZombieSize,
		MemTables:     pm.MemTable.Count,
	}
}

// CacheMetrics returns the shared block cache's figures (zeros once the
// Backend is closed).
func (b *Backend) CacheMetrics() state.CacheMetrics {
	var out state.CacheMetrics
	b.dirs.IfOpen(func() {
		cm := b.cache.Metrics()
		out = state.CacheMetrics{Capacity: b.tune.CacheSize, Bytes: cm.Size, Blocks: cm.Count, Hits: cm.Hits, Misses: cm.Misses}
	})
	return out
}
