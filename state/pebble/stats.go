package pebble

import (
	"sync/atomic"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
)

// Metrics are a database's figures for monitoring, read from Pebble's own
// (pebble.DB.Metrics) and from its write-stall events. Package metrics
// exports them as eddy_pebble_* and eddy_state_bytes.
type Metrics struct {
	// DiskBytes is the space the database takes on disk: tables, logs,
	// manifests, and files awaiting deletion.
	DiskBytes uint64
	// WriteAmp is the write amplification since the database opened:
	// bytes written by flushes and compactions per byte written to the
	// log.
	WriteAmp float64
	// Flushes and Compactions count those completed since the database
	// opened; CompactionsInProgress are running now.
	Flushes, Compactions, CompactionsInProgress int64
	// CompactionPendingBytes is Pebble's estimate of the bytes compactions
	// must rewrite to bring the LSM back into shape (compaction debt).
	CompactionPendingBytes uint64
	// WriteStalls counts the times Pebble held writes back (too many
	// memtables or level-0 files) and WriteStallDuration their total
	// time, a stall in progress included.
	WriteStalls        int64
	WriteStallDuration time.Duration
	// L0Files and L0Sublevels are level 0's tables and sublevels (its read
	// amplification); ReadAmp is the whole LSM's.
	L0Files     int64
	L0Sublevels int32
	ReadAmp     int
	// MemTableBytes is the memory held by memtables (queued for flush
	// included), MemTables their number.
	MemTableBytes uint64
	MemTables     int64
}

// CacheMetrics are the figures of a Backend's block cache, which all its
// databases share.
type CacheMetrics struct {
	// Bytes and Blocks are what the cache holds; Hits and Misses count
	// lookups since the Backend was created.
	Bytes, Blocks, Hits, Misses int64
}

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

// Metrics returns the database's figures. Unlike the state.DB methods it
// may be called from any goroutine while the database is used, but not
// concurrently with Close (the runtime stops reporting a database before
// it closes it). A closed database reports zeros.
func (d *db) Metrics() Metrics {
	if d.pdb == nil {
		return Metrics{}
	}
	pm := d.pdb.Metrics()
	total := pm.Total()
	return Metrics{
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
		MemTableBytes:          pm.MemTable.Size,
		MemTables:              pm.MemTable.Count,
	}
}

// CacheMetrics returns the shared block cache's figures (zeros once the
// Backend is closed).
func (b *Backend) CacheMetrics() CacheMetrics {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.cache == nil {
		return CacheMetrics{}
	}
	cm := b.cache.Metrics()
	return CacheMetrics{Bytes: cm.Size, Blocks: cm.Count, Hits: cm.Hits, Misses: cm.Misses}
}
