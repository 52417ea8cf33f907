//go:build rocksdb

package rocksdb

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/linxGnu/grocksdb"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/internal/disk"
)

// Backend opens RocksDB databases that share one block cache, which also
// holds their memtables (see writeBuffers). It is safe for concurrent use.
type Backend struct {
	tune disk.Tuning // the Options' tuning, with defaults
	// invalid is what Options.Validate reported, returned by every Open.
	invalid error

	dirs    *disk.Dirs
	cache   *grocksdb.Cache // nil once closed
	buffers writeBuffers
	// skipVerify is Options.SkipVerifyAtOpen.
	skipVerify bool
}

var _ state.Backend = (*Backend)(nil)

// errs maps RocksDB's errors; see isCorruption.
var errs = disk.Errors{Pkg: "state/rocksdb", IsCorruption: isCorruption}

// New returns a Backend configured by opts. Call Close when done with it.
// New does not fail: options that Options.Validate rejects make every Open
// fail with Validate's errors, so call Validate first to report them early.
func New(opts Options) *Backend {
	b := &Backend{tune: opts.tuning().WithDefaults(defaults), invalid: opts.Validate(), dirs: disk.NewDirs("state/rocksdb"), skipVerify: opts.SkipVerifyAtOpen}
	if opts.MemTableSize == 0 {
		b.tune.MemTableSize = DefaultMemTableSize(b.tune.CacheSize)
	}
	if b.invalid != nil {
		b.dirs.Close(nil) // nothing to release: no database will open
		return b
	}
	// RocksDB's LRU cache gives the blocks inserted with high priority (the
	// index and filter blocks, see newOptions) a pool of half of it
	// (high_pri_pool_ratio 0.5, RocksDB's default, which the C API of 7.8
	// cannot change): up to that much, they go out only after the data
	// blocks.
	b.cache = grocksdb.NewLRUCache(uint64(b.tune.CacheSize))
	b.buffers = newWriteBuffers(b.memTableLimit(), b.cache)
	return b
}

// memTableLimit is the memory of all the databases' memtables past which
// RocksDB flushes one.
func (b *Backend) memTableLimit() uint64 { return uint64(b.tune.CacheSize) / memTableShare }

// CacheMetrics returns the shared block cache's figures (zeros once the
// Backend is closed). Capacity is CacheSize; Bytes is what the cache holds
// less what the memtables are charged in it, the figure state/pebble
// reports. Blocks, Hits and Misses are zero: RocksDB counts hits and
// misses only in its statistics, which add work to every Get (Kafka Streams
// and Flink leave them off by default too), and the C API of 7.8 counts no
// entries.
func (b *Backend) CacheMetrics() state.CacheMetrics {
	var out state.CacheMetrics
	b.dirs.IfOpen(func() {
		used := b.cache.GetUsage()
		used -= min(used, b.buffers.charged())
		out = state.CacheMetrics{Capacity: b.tune.CacheSize, Bytes: int64(used)}
	})
	return out
}

// Close releases the Backend's handles on the block cache and the write
// buffer manager. Databases still open hold their own references (their
// options keep both alive) and stay usable until they close; Open fails
// after Close.
func (b *Backend) Close() error {
	b.dirs.Close(func() {
		b.buffers.destroy()
		b.cache.Destroy()
		b.cache = nil
	})
	return nil
}

// Open opens the database in dir, creating it (and its parents) if needed,
// checks its format (migrating an older one, refusing a newer one with
// state.ErrFormat) and reads its offsets, so that damaged metadata is
// reported here, as state.ErrCorrupt, before the task starts. A directory
// can be open only once at a time; RocksDB's LOCK file also keeps other
// processes out.
func (b *Backend) Open(dir string) (state.DB, error) {
	dir = filepath.Clean(dir)
	if b.invalid != nil {
		return nil, fmt.Errorf("state/rocksdb: open %s: fix the Backend's options: %w", dir, b.invalid)
	}
	// The options take their references on the cache under the lock, so a
	// concurrent Close cannot free it before RocksDB holds it.
	var ro rocksOptions
	if err := b.dirs.Acquire(dir, func() { ro = b.newOptions() }); err != nil {
		return nil, err
	}
	d, err := b.open1(dir, ro)
	if err != nil {
		ro.destroy()
		b.dirs.Release(dir)
		return nil, err
	}
	return d, nil
}

// rocksOptions are the C objects a database is opened with. RocksDB copies
// what it needs at open, but grocksdb's DB keeps a pointer to the Options,
// so they are freed only after Close.
type rocksOptions struct {
	db    *grocksdb.Options
	table *grocksdb.BlockBasedTableOptions
}

func (r rocksOptions) destroy() {
	r.db.Destroy()
	r.table.Destroy()
}

func (b *Backend) newOptions() rocksOptions {
	o := b.tune
	table := grocksdb.NewDefaultBlockBasedTableOptions()
	table.SetBlockCache(b.cache)
	// Bloom filters (10 bits a key, about 1% false positives), as Kafka
	// Streams configures RocksDB and state/pebble does: a Get of a key the
	// store does not hold skips every table instead of reading a block of
	// each.
	table.SetFilterPolicy(grocksdb.NewBloomFilterFull(10))
	// Index and filter blocks in the block cache, so that CacheSize bounds
	// them too (by default every open table holds its own, outside any
	// budget), with high priority, so that data blocks do not evict them
	// (a Get that misses them reads them from the file again, the cost
	// BENCHMARKS.md found at 1M keys); level 0's pinned, since every Get
	// looks at each level 0 table. What Kafka Streams' bounded-memory
	// RocksDBConfigSetter example and Flink's managed memory set.
	table.SetCacheIndexAndFilterBlocks(true)
	table.SetCacheIndexAndFilterBlocksWithHighPriority(true)
	table.SetPinL0FilterAndIndexBlocksInCache(true)
	table.SetPinTopLevelIndexAndFilter(true) // partitioned indexes only, and RocksDB's default

	opts := grocksdb.NewDefaultOptions()
	opts.SetCreateIfMissing(true)
	opts.SetParanoidChecks(true)
	opts.SetBlockBasedTableFactory(table)
	opts.SetWriteBufferSize(o.MemTableSize)
	opts.SetArenaBlockSize(arenaBlockSize(o.MemTableSize, b.memTableLimit()))
	b.buffers.set(opts)
	opts.SetMaxOpenFiles(o.MaxOpenFiles)
	// The deprecated per-kind limits, because max_background_jobs splits
	// one number between flushes and compactions by a ratio; RocksDB 7.8
	// still honours them when set.
	opts.SetMaxBackgroundCompactions(o.MaxConcurrentCompactions)
	opts.SetMaxBackgroundFlushes(1)
	setCompression(opts, Compression(o.Compression))
	opts.SetLevel0FileNumCompactionTrigger(o.L0CompactionThreshold)
	opts.SetLevel0SlowdownWritesTrigger(min(l0SlowdownWrites, o.L0StopWritesThreshold))
	opts.SetLevel0StopWritesTrigger(o.L0StopWritesThreshold)
	// RocksDB writes its own LOG into the task directory (the C API of
	// 7.8 cannot route it to Go); keep it from growing without bound.
	opts.SetMaxLogFileSize(1 << 20)
	opts.SetKeepLogFileNum(2)
	return rocksOptions{db: opts, table: table}
}

// arenaBlockSize is the unit in which a memtable takes memory: RocksDB's
// default (a memtable's eighth, at most 1 MiB), but at most 1/64 of the
// memtables' limit. RocksDB flushes the memtable being written to whenever
// the memtables of all databases hold more than 7/8 of the limit, and each
// holds at least a block: with blocks too large for the limit, a few tasks
// would flush at every write (Flink checks the same).
func arenaBlockSize(memTable, limit uint64) uint64 {
	size := min(memTable/8, 1<<20, limit/64)
	return max(size&^4095, 4096)
}

// setCompression sets the compression of table files, the same on every
// level, as state/pebble does: the one place to change for a per-level
// choice (grocksdb's SetCompressionPerLevel, SetBottommostCompression).
func setCompression(opts *grocksdb.Options, c Compression) {
	t := grocksdb.SnappyCompression
	switch c {
	case CompressionNone:
		t = grocksdb.NoCompression
	case CompressionZstd:
		t = grocksdb.ZSTDCompression
	}
	opts.SetCompression(t)
}

func (b *Backend) open1(dir string, ro rocksOptions) (*db, error) {
	// RocksDB creates only the last directory of the path; Pebble, and so
	// the runtime, expect the parents made too.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state/rocksdb: open %s: %w", dir, err)
	}
	rdb, err := grocksdb.OpenDb(ro.db, dir)
	if err != nil {
		return nil, errs.Wrap("open", dir, err)
	}
	d := newDB(b, dir, rdb, ro)
	// Before the offsets, as state/pebble: a table that fails its
	// checksums makes the database corrupt, whatever its metadata says.
	if !b.skipVerify {
		if err := verifyChecksum(rdb); err != nil {
			d.release()
			return nil, errs.Wrap("verify checksums", dir, err)
		}
	}
	if err := d.Core.Open(engine{d}); err != nil {
		// The format's error is the one worth returning; Close cannot
		// make the database more usable.
		d.release()
		return nil, errs.Wrap("open", dir, err)
	}
	return d, nil
}

// Destroy removes the database in dir (the whole directory), so the next
// Open starts empty. It fails if the database is open. It removes the files
// itself rather than through RocksDB's DestroyDB, which needs a readable
// database and the rebuild is for one that is not.
func (b *Backend) Destroy(dir string) error {
	return b.dirs.Destroy(filepath.Clean(dir), os.RemoveAll)
}

// isCorruption reports whether a RocksDB error means the database cannot be
// trusted. The C API gives only the text of RocksDB's Status, which starts
// with its code; what RocksDB 7.8 reports, found by damaging files in tests
// (see corrupt_test.go):
//
//   - checksum mismatches, a garbled table or MANIFEST, a truncated or
//     missing table: "Corruption: ..." (a missing table is an IO error
//     inside a Corruption);
//   - a missing MANIFEST, or a CURRENT naming one that does not exist:
//     "IO error: No such file or directory: ...";
//   - a missing CURRENT beside a write-ahead log: "Corruption: While
//     creating a new Db, wal_dir contains existing log file" (without a
//     log, RocksDB starts a new, empty database: consistent, since the
//     offsets start over with it).
//
// Damage in the tail of the last WAL is not reported: RocksDB's default
// recovery (point in time) stops at the first bad record and opens, and as
// with Pebble that is safe because every Apply carries its offsets.
func isCorruption(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "Corruption:") ||
		(strings.HasPrefix(msg, "IO error:") && strings.Contains(msg, "No such file or directory"))
}
