package pebble

import (
	"log/slog"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/eddy-streams/eddy/state/internal/disk"
)

// Options configure a Backend, the way Kafka Streams' RocksDBConfigSetter
// tunes its stores. The zero value is valid: every field has the default
// named in its comment. Sizes and counts apply per database (one per task)
// unless the comment says the Backend shares them, so memory grows with the
// number of tasks an instance owns.
type Options struct {
	// CacheSize is the size in bytes of the block cache shared by every
	// database of the Backend. Zero means 64 MiB (DefaultCacheSize).
	CacheSize int64
	// MemTableSize is the size in bytes of each database's memtable. Zero
	// means CacheSize/32, at least 1 MiB and at most 16 MiB
	// (DefaultMemTableSize): Pebble charges every memtable to the block
	// cache, and a database holds two of them's worth most of the time
	// (the live one, and a flushed one kept for reuse with its charge),
	// so eight tasks' memtables take half the cache. With a 64 MiB cache
	// and 16 MiB memtables, four tasks' memtables took the whole cache and
	// every Get of a large state read its filter and index blocks from
	// the files again (BENCHMARKS.md, State at scale).
	// Pebble allows less than 4 GiB.
	MemTableSize uint64
	// MaxOpenFiles bounds the table files kept open over all databases of
	// the Backend (a shared file cache). Zero means 1000
	// (DefaultMaxOpenFiles). Pebble keeps at least 64 open whatever the
	// value.
	MaxOpenFiles int
	// MaxConcurrentCompactions is the most compactions each database runs
	// at once. Pebble runs one and adds more, up to this, when level 0 or
	// the compaction debt builds up. Zero means 1
	// (DefaultMaxConcurrentCompactions): with one database per task, tasks
	// already compact in parallel.
	MaxConcurrentCompactions int
	// Compression is the block compression of table files, at every
	// level. The empty value means CompressionSnappy, Pebble's default.
	// (No compression above the bottom level, which hot reads hit most,
	// was tried: with the block cache sized by the state memory budget,
	// hot reads found their blocks decompressed in the cache, and the
	// remote checkpoints grew; BENCHMARKS.md, State at scale.)
	Compression Compression
	// L0CompactionThreshold is the read amplification of level 0 (roughly
	// its count of overlapping files) at which a database compacts level 0
	// into the level below. Zero means 4 (DefaultL0CompactionThreshold).
	L0CompactionThreshold int
	// L0StopWritesThreshold is the read amplification of level 0 at which
	// a database stops writes (Apply waits) until compactions catch up.
	// Zero means 12 (DefaultL0StopWritesThreshold). It must not be below
	// L0CompactionThreshold, or writes would stop before compaction starts.
	L0StopWritesThreshold int
	// Logger receives Pebble's informational lines at debug level and its
	// errors (background errors, detected corruption) at error level. Nil
	// means discard.
	Logger *slog.Logger
	// FS is the file system every database lives on. Nil means vfs.Default
	// (the OS); tests pass vfs.NewMem, vfs.NewCrashableMem or vfs.NewStrictMem.
	FS vfs.FS
	// SkipVerifyAtOpen skips the check of every table's block checksums
	// that Open does, so that a damaged block is found before the task
	// runs (state.ErrCorrupt: the runtime rebuilds the database) rather
	// than by the first read that touches it. The check reads every
	// table once: 11 ms for the 19.4 MB of a 1M-key database on the
	// project's machine (BenchmarkVerifyTables), about 0.6 s per GB.
	// Skip it only for databases so large that this would slow every
	// restart and every task move noticeably.
	SkipVerifyAtOpen bool
}

// Defaults of Options.
const (
	DefaultCacheSize                = 64 << 20
	DefaultMaxOpenFiles             = 1000
	DefaultMaxConcurrentCompactions = 1
	DefaultL0CompactionThreshold    = 4
	DefaultL0StopWritesThreshold    = 12
)

// DefaultMemTableSize returns MemTableSize's default for a cache of
// cacheSize bytes.
func DefaultMemTableSize(cacheSize int64) uint64 {
	return uint64(min(max(cacheSize/32, 1<<20), 16<<20))
}

// maxMemTableSize is Pebble's bound (pebble.Open rejects MemTableSize at or
// above it); checking it here names our field instead of Pebble's.
const maxMemTableSize = 4<<30 - 1

// Compression names a block compression for table files.
type Compression string

// Compressions. Snappy is fast and compresses little; zstd (level 3) takes
// more CPU for smaller files, which matters for state that is large, cold or
// shipped to remote checkpoints; none suits values that are already
// compressed.
const (
	CompressionNone   Compression = "none"
	CompressionSnappy Compression = "snappy"
	CompressionZstd   Compression = "zstd"
)

// profile returns Pebble's compression profile for c, nil if c is unknown.
func (c Compression) profile() *sstable.CompressionProfile {
	switch c {
	case CompressionNone:
		return sstable.NoCompression
	case "", CompressionSnappy:
		return sstable.SnappyCompression
	case CompressionZstd:
		return sstable.ZstdCompression
	}
	return nil
}

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
	limits = disk.Limits{Pkg: "state/pebble", Defaults: defaults, MemTableMax: maxMemTableSize, MemTableRule: "must be below 4 GiB, Pebble's limit"}
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

// withDefaults returns o with a logger and a file system; the tuning's
// defaults are the Backend's tune.
func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	return o
}

// apply sets o's file system and its tuning t (with defaults) in po. The
// caches are the Backend's and set by the caller.
func (o Options) apply(po *pebbledb.Options, t disk.Tuning) {
	po.FS = o.FS
	po.MemTableSize = t.MemTableSize
	// Pebble sizes its file cache from MaxOpenFiles only when it makes
	// one; ours is shared and sized by New. Passing it anyway records it in
	// the database's OPTIONS file, where an operator looks for it.
	po.MaxOpenFiles = t.MaxOpenFiles
	n := t.MaxConcurrentCompactions
	po.CompactionConcurrencyRange = func() (int, int) { return 1, n }
	po.L0CompactionThreshold = t.L0CompactionThreshold
	po.L0StopWritesThreshold = t.L0StopWritesThreshold
	// Every level alike: one knob is what a user of RocksDBConfigSetter
	// expects.
	profile := Compression(t.Compression).profile()
	for i := range po.Levels {
		po.Levels[i].Compression = func() *sstable.CompressionProfile { return profile }
		// Bloom filters (10 bits a key, about 1% false positives), as
		// Kafka Streams configures RocksDB: a Get of a key the store does
		// not hold (a join's first record at a timestamp, a new window)
		// then skips every table instead of reading a block of each.
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
}
