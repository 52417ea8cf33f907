package state

import "time"

// DBMetrics are the figures of an LSM-tree database (a log, memtables,
// levels of sorted tables) for monitoring. state/pebble's databases report
// them; package metrics exports them, as eddy_pebble_* and
// eddy_state_bytes, from any database that has a Metrics() DBMetrics
// method, so that it depends on no backend.
type DBMetrics struct {
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
	// CompactionPendingBytes is the engine's estimate of the bytes
	// compactions must rewrite to bring the LSM back into shape
	// (compaction debt).
	CompactionPendingBytes uint64
	// WriteStalls counts the times the engine held writes back (too many
	// memtables or level-0 files) and WriteStallDuration their total
	// time, a stall in progress included.
	WriteStalls        int64
	WriteStallDuration time.Duration
	// L0Files and L0Sublevels are level 0's tables and sublevels (its read
	// amplification); ReadAmp is the whole LSM's.
	L0Files     int64
	L0Sublevels int32
	ReadAmp     int
	// MemTableBytes is the memory held by memtables (those queued for
	// flush, and those flushed but kept for reuse or by an iterator,
	// included), MemTables the number of live ones.
	MemTableBytes uint64
	MemTables     int64
}

// CacheMetrics are the figures of a block cache that a Backend's databases
// share; state/pebble's Backend reports them with a CacheMetrics()
// CacheMetrics method.
type CacheMetrics struct {
	// Capacity is the cache's size; Bytes and Blocks are what it holds
	// (memtables, which Pebble charges to the cache, not included); Hits
	// and Misses count lookups since the Backend was created.
	Capacity, Bytes, Blocks, Hits, Misses int64
}
