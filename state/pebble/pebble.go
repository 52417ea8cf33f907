// Package pebble is the default state.Backend: one Pebble database per task
// directory, with a block cache and a file cache shared by every database of
// the Backend so that memory and file descriptors do not grow with the
// number of tasks.
//
// The layout inside a database is state/internal/keys, its format version
// and migrations, the batch encoding and the directory bookkeeping are
// state/internal/disk: all shared with state/rocksdb.
package pebble

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/internal/disk"
)

// Backend opens Pebble databases that share one block cache and one file
// cache. It is safe for concurrent use.
type Backend struct {
	opts Options     // with defaults
	tune disk.Tuning // opts' tuning, with defaults
	// invalid is what Options.Validate reported, returned by every Open.
	invalid error

	dirs      *disk.Dirs
	cache     *pebbledb.Cache
	fileCache *pebbledb.FileCache
}

var _ state.Backend = (*Backend)(nil)

// errs maps Pebble's errors; see isCorruption.
var errs = disk.Errors{Pkg: "state/pebble", IsCorruption: isCorruption}

// New returns a Backend configured by opts. Call Close when done with it.
// New does not fail: options that Options.Validate rejects make every Open
// fail with Validate's errors, so call Validate first to report them early.
func New(opts Options) *Backend {
	b := &Backend{opts: opts.withDefaults(), tune: opts.tuning().WithDefaults(defaults), invalid: opts.Validate(), dirs: disk.NewDirs("state/pebble")}
	if opts.MemTableSize == 0 {
		b.tune.MemTableSize = DefaultMemTableSize(b.tune.CacheSize)
	}
	if b.invalid != nil {
		// Caches sized from invalid values could be huge or panic; the
		// Backend needs none, since no database will open.
		b.dirs.Close(nil)
		return b
	}
	b.cache = pebbledb.NewCache(b.tune.CacheSize)
	b.fileCache = pebbledb.NewFileCache(runtime.GOMAXPROCS(0), pebbledb.FileCacheSize(b.tune.MaxOpenFiles))
	return b
}

// Close releases the Backend's references to the shared caches. Databases
// still open keep their own references and stay usable until they close;
// Open fails after Close.
func (b *Backend) Close() error {
	b.dirs.Close(func() {
		b.fileCache.Unref()
		b.cache.Unref()
	})
	return nil
}

// ref takes references on the shared caches, so that a concurrent Close
// cannot free them while a database opens with them.
func (b *Backend) ref() {
	b.cache.Ref()
	b.fileCache.Ref()
}

func (b *Backend) unref() {
	b.fileCache.Unref()
	b.cache.Unref()
}

// Open opens the database in dir, creating it if needed, checks its format
// (migrating an older one, refusing a newer one with state.ErrFormat) and
// reads its offsets, so that damaged metadata is reported here, as
// state.ErrCorrupt, before the task starts. A directory can be open only
// once at a time.
func (b *Backend) Open(dir string) (state.DB, error) {
	dir = filepath.Clean(dir)
	if b.invalid != nil {
		return nil, fmt.Errorf("state/pebble: open %s: fix the Backend's options: %w", dir, b.invalid)
	}
	if err := b.dirs.Acquire(dir, b.ref); err != nil {
		return nil, err
	}
	d, err := b.open1(dir)
	b.unref()
	if err != nil {
		b.dirs.Release(dir)
		return nil, err
	}
	return d, nil
}

var _ state.CheckpointPreparer = (*Backend)(nil)

// PrepareCheckpoint opens the checkpoint in dir like Open. Pebble's open
// flushes the replayed log into a table and, when level 0 then scores for a
// compaction, waits for that compaction before it returns (it must not
// scan for obsolete files while one runs). A restore of an unprepared
// checkpoint paid that wait: 0.2–0.4 s per task of 250,000 keys on the
// project's machine, more than the download (BENCHMARKS.md, Restore). The
// tables Pebble does not rewrite stay those of the database, shared with
// earlier and later checkpoints.
func (b *Backend) PrepareCheckpoint(dir string) (state.Offsets, error) {
	dir = filepath.Clean(dir)
	if !b.dirs.IfOpen(b.ref) {
		return state.Offsets{}, fmt.Errorf("state/pebble: prepare checkpoint %s: backend closed", dir)
	}
	defer b.unref()
	d, err := b.open1(dir)
	if err != nil {
		return state.Offsets{}, err
	}
	if err := d.pdb.Close(); err != nil {
		return state.Offsets{}, errs.Wrap("close checkpoint", dir, err)
	}
	return d.Core.Offsets(), nil
}

func (b *Backend) open1(dir string) (*db, error) {
	st := new(stalls)
	po := b.pebbleOptions(dir)
	st.listen(po.EventListener)
	pdb, err := pebbledb.Open(dir, po)
	if err != nil {
		return nil, errs.Wrap("open", dir, err)
	}
	// Before the offsets: a table that fails its checksums makes the
	// database corrupt, whatever its metadata says.
	if !b.opts.SkipVerifyAtOpen {
		if err := verifyTables(pdb, po, dir); err != nil {
			_ = pdb.Close()
			return nil, errs.Wrap("verify checksums", dir, err)
		}
	}
	d := &db{Core: disk.Core{Dir: dir}, backend: b, pdb: pdb, stalls: st}
	if err := d.Core.Open(engine{pdb}); err != nil {
		// The format's error is the one worth returning; Close cannot
		// make the database more usable.
		_ = pdb.Close()
		return nil, errs.Wrap("open", dir, err)
	}
	return d, nil
}

// pebbleOptions are the options of the database in dir: the Backend's
// caches, tuning and logger.
func (b *Backend) pebbleOptions(dir string) *pebbledb.Options {
	logger := &pebbleLogger{l: b.opts.Logger.With("dir", dir)}
	po := &pebbledb.Options{
		Cache:              b.cache,
		FileCache:          b.fileCache,
		FormatMajorVersion: pebbledb.FormatNewest,
		Logger:             logger,
		EventListener: &pebbledb.EventListener{
			BackgroundError: func(err error) { logger.Errorf("background error: %v", err) },
			// Pebble's default reports corruption through Logger.Fatalf,
			// which exits. The read that hit it returns an error wrapping
			// pebble.ErrCorruption, which we map to state.ErrCorrupt: the
			// runtime rebuilds the task instead of the process dying.
			DataCorruption: func(info pebbledb.DataCorruptionInfo) { logger.Errorf("data corruption: %s", info) },
		},
	}
	b.opts.apply(po, b.tune)
	return po
}

// Destroy removes the database in dir (the whole directory), so the next
// Open starts empty. It fails if the database is open.
func (b *Backend) Destroy(dir string) error {
	return b.dirs.Destroy(filepath.Clean(dir), b.opts.FS.RemoveAll)
}

// isCorruption reports whether a Pebble error means the database cannot be
// trusted. What Pebble v2.1.7 does, found by damaging files in tests (see
// corrupt_test.go):
//
//   - Checksum mismatches in tables, a garbled MANIFEST or OPTIONS file are
//     marked with pebble.ErrCorruption through cockroachdb/errors.Mark,
//     which the standard errors.Is does not see (the mark is not in the
//     Unwrap chain); pebble.IsCorruptionError does.
//   - A missing MANIFEST or table file fails Open with an error that wraps
//     os.ErrNotExist and is not marked. Pebble creates the directory itself,
//     so a missing file can only be a file the database refers to.
//   - A table whose size differs from what the MANIFEST records (truncated,
//     or overwritten with other content) fails Open's consistency check
//     with a plain error; only its text identifies it.
//   - A directory Pebble cannot read at all (one with a CURRENT file, as
//     RocksDB writes, or a format major version this Pebble does not know)
//     fails Open with a plain error naming the "format major version". The
//     state in it is only a copy of the changelog, so it is rebuilt like a
//     damaged one; this is what a switch back from state/rocksdb meets.
//
// Damage in the tail of the last WAL is not reported at all: Pebble stops
// the replay at the first bad record and opens. That is safe here, because
// every Apply writes its offsets in the same batch: the database comes back
// as of an earlier Apply, with that Apply's offsets, and the changelog
// replay from those offsets restores the rest.
func isCorruption(err error) bool {
	return pebbledb.IsCorruptionError(err) ||
		errors.Is(err, fs.ErrNotExist) ||
		strings.Contains(err.Error(), "object size mismatch") ||
		strings.Contains(err.Error(), "format major version")
}

// pebbleLogger adapts slog to Pebble's Logger.
type pebbleLogger struct{ l *slog.Logger }

func (p *pebbleLogger) Infof(format string, args ...any) {
	if p.l.Enabled(context.Background(), slog.LevelDebug) {
		p.l.Debug(fmt.Sprintf(format, args...))
	}
}

func (p *pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...))
}

// Fatalf is called by Pebble on broken internal invariants, after which it
// must not continue (its default logger exits). A panic stops the goroutine
// with a stack trace that the log line alone would not give.
func (p *pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "fatal", true)
	panic(state.Fatal{Msg: "state/pebble: pebble fatal error: " + msg})
}
