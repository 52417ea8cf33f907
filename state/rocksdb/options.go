package rocksdb

import (
	"errors"

	"github.com/eddy-streams/eddy/state/internal/disk"
)

// ErrNotBuilt is returned by Open and Destroy in a program built without the
// rocksdb build tag.
var ErrNotBuilt = errors.New("state/rocksdb: built without RocksDB: rebuild with -tags rocksdb (needs cgo and librocksdb-dev)")

// Options configure a Backend, the way Kafka Streams' RocksDBConfigSetter
// tunes its stores. The zero value is valid: every field has the default
// named in its comment. Unlike Pebble, RocksDB shares no file cache between
// databases, so sizes and counts apply per database (one per task) unless the
// comment says the Backend shares them.
type Options struct {
	// CacheSize is the size in bytes of the LRU block cache shared by every
	// database of the Backend. Zero means 64 MiB (DefaultCacheSize).
	CacheSize int64
	// MemTableSize is the size in bytes of each database's memtable
	// (RocksDB's write_buffer_size). Zero means 16 MiB
	// (DefaultMemTableSize). RocksDB takes 64 KiB to 64 GiB.
	MemTableSize uint64
	// MaxOpenFiles bounds the files each database keeps open. Zero means
	// 256 (DefaultMaxOpenFiles): a task's database holds few tables, and
	// the bound is per task, so a generous one multiplies quickly.
	MaxOpenFiles int
	// MaxConcurrentCompactions is the most compactions each database runs
	// at once (RocksDB's max_background_compactions; flushes have a thread
	// of their own). Zero means 1 (DefaultMaxConcurrentCompactions): with
	// one database per task, tasks already compact in parallel.
	MaxConcurrentCompactions int
	// Compression is the block compression of table files. The empty value
	// means CompressionSnappy, RocksDB's default.
	Compression Compression
	// L0CompactionThreshold is the number of level 0 files at which a
	// database compacts level 0 (level0_file_num_compaction_trigger). Zero
	// means 4 (DefaultL0CompactionThreshold).
	L0CompactionThreshold int
	// L0StopWritesThreshold is the number of level 0 files at which a
	// database stops writes (Apply waits) until compactions catch up
	// (level0_stop_writes_trigger; writes slow down from 20 files, or
	// from this value if lower). Zero means 36
	// (DefaultL0StopWritesThreshold). It must not be below
	// L0CompactionThreshold.
	L0StopWritesThreshold int
}

// Defaults of Options.
const (
	DefaultCacheSize                = 64 << 20
	DefaultMemTableSize             = 16 << 20
	DefaultMaxOpenFiles             = 256
	DefaultMaxConcurrentCompactions = 1
	DefaultL0CompactionThreshold    = 4
	DefaultL0StopWritesThreshold    = 36
)

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
		MemTableSize:             DefaultMemTableSize,
		MaxOpenFiles:             DefaultMaxOpenFiles,
		MaxConcurrentCompactions: DefaultMaxConcurrentCompactions,
		L0CompactionThreshold:    DefaultL0CompactionThreshold,
		L0StopWritesThreshold:    DefaultL0StopWritesThreshold,
	}
	// RocksDB would silently clip a memtable size out of its range.
	limits = disk.Limits{Pkg: "state/rocksdb", Defaults: defaults, MemTableMin: minMemTableSize, MemTableMax: maxMemTableSize,
		MemTableRule: "must be from 64 KiB to 64 GiB, RocksDB's range (0 means the default, 16 MiB)"}
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
