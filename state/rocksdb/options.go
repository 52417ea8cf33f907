package rocksdb

import (
	"errors"

	"github.com/eddy-streams/eddy/state/internal/disk"
)

// ErrNotBuilt is returned by Open and Destroy in a program built without the
// rocksdb build tag.
var ErrNotBuilt = errors.New("state/rocksdb: built without RocksDB: rebuild with -tags rocksdb (needs cgo and librocksdb-dev)")

// Options configure a Backend, the way Kafka Streams' RocksDBConfigSetter
// tunes its stores. They have state/pebble's fields, so that a program
// switches backends without renaming its settings; each sets the RocksDB
// option named beside it. The zero value is valid: a zero field takes the
// default in parentheses (the constant Default + its name). RocksDB shares
// no file cache between databases, so every value but CacheSize applies
// per database, that is per task.
//
// CacheSize is one budget for the blocks and the memtables of every
// database, as with state/pebble: a WriteBufferManager charges memtables to
// the block cache and flushes them when those of all the databases pass a
// third of it (memTableShare).
type Options struct {
	CacheSize                int64       // the LRU block cache that every database shares, in bytes (64 MiB)
	MemTableSize             uint64      // write_buffer_size, from 64 KiB to 64 GiB (DefaultMemTableSize(CacheSize))
	MaxOpenFiles             int         // max_open_files (256: a task's database holds few tables, and a generous bound multiplies by the tasks)
	MaxConcurrentCompactions int         // max_background_compactions; flushes have a thread of their own (1: tasks already compact in parallel)
	Compression              Compression // the compression of table blocks (CompressionSnappy, RocksDB's default)
	L0CompactionThreshold    int         // level0_file_num_compaction_trigger, in level 0 files (4)

	// L0StopWritesThreshold is level0_stop_writes_trigger (36): at that
	// many level 0 files, Apply waits until compactions catch up (writes
	// slow down from 20 files, or from this value if lower). It must not
	// be below L0CompactionThreshold.
	L0StopWritesThreshold int

	// SkipVerifyAtOpen skips RocksDB's VerifyChecksum, which Open runs so
	// that a damaged block is found before the task runs (state.ErrCorrupt:
	// the runtime rebuilds the database) rather than by the first read
	// that meets it. It reads every table once; skip it only for
	// databases so large that this would slow every restart and task move.
	SkipVerifyAtOpen bool
}

// Defaults of Options.
const (
	DefaultCacheSize                = 64 << 20
	DefaultMaxOpenFiles             = 256
	DefaultMaxConcurrentCompactions = 1
	DefaultL0CompactionThreshold    = 4
	DefaultL0StopWritesThreshold    = 36
)

// DefaultMemTableSize returns MemTableSize's default for a cache of
// cacheSize bytes: a sixteenth of it, at least 4 MiB and at most 64 MiB,
// the rule of state/pebble, whose memtables are charged to its cache too.
// A memtable sized from the cache leaves it room for blocks; RocksDB's own
// default (64 MiB, whatever the cache) would fill a small cache with one
// database's memtables.
func DefaultMemTableSize(cacheSize int64) uint64 {
	return uint64(min(max(cacheSize/16, 4<<20), 64<<20))
}

// memTableShare is the part of CacheSize that the memtables of all the
// databases may take before RocksDB flushes one (CacheSize/memTableShare):
// Flink's default for its managed memory, which gives write buffers half of
// it and sets the limit at two thirds of that, since memtables can pass the
// limit by up to half of it before a flush brings them down.
const memTableShare = 3

// RocksDB's range of write_buffer_size.
const (
	minMemTableSize = 64 << 10
	maxMemTableSize = 64 << 30
)

// l0SlowdownWrites is RocksDB's default level0_slowdown_writes_trigger.
const l0SlowdownWrites = 20

// Compression names a block compression for table files.
type Compression string

// Compressions, the same as state/pebble's. Snappy is fast and compresses
// little; zstd takes more CPU for smaller files; none suits values that are
// already compressed.
const (
	CompressionNone   Compression = "none"
	CompressionSnappy Compression = "snappy"
	CompressionZstd   Compression = "zstd"
)

// defaults and limits are what state/internal/disk validates Options
// against and fills them in with.
var (
	defaults = disk.Tuning{
		CacheSize:                DefaultCacheSize,
		MaxOpenFiles:             DefaultMaxOpenFiles,
		MaxConcurrentCompactions: DefaultMaxConcurrentCompactions,
		L0CompactionThreshold:    DefaultL0CompactionThreshold,
		L0StopWritesThreshold:    DefaultL0StopWritesThreshold,
	}
	// RocksDB would silently clip a memtable size out of its range.
	limits = disk.Limits{Pkg: "state/rocksdb", Defaults: defaults, MemTableMin: minMemTableSize, MemTableMax: maxMemTableSize,
		MemTableRule: "must be from 64 KiB to 64 GiB, RocksDB's range (0 means the default, DefaultMemTableSize(CacheSize))"}
)

// tuning returns the fields of o that state/internal/disk validates.
func (o Options) tuning() disk.Tuning {
	return disk.Tuning{CacheSize: o.CacheSize, MemTableSize: o.MemTableSize, MaxOpenFiles: o.MaxOpenFiles, MaxConcurrentCompactions: o.MaxConcurrentCompactions,
		Compression: string(o.Compression), L0CompactionThreshold: o.L0CompactionThreshold, L0StopWritesThreshold: o.L0StopWritesThreshold}
}

// Validate reports every invalid field of o at once, each error naming its
// field. New accepts any Options, so that a caller can validate its whole
// configuration first; with options that Validate rejects, the Backend's
// Open returns the same errors.
func (o Options) Validate() error { return o.tuning().Validate(limits) }
