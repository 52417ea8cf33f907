package pebble

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/internal/disk"
	"github.com/eddy-streams/eddy/state/internal/keys"
)

// Summary is what Inspect found in a task database.
type Summary struct {
	// Offsets are the offsets the database reflects.
	Offsets state.Offsets
	// Format is the database's format version (state/internal/keys): an
	// older one is migrated when eddy next opens the database.
	Format int
	// Stores are the task's stores, by name, with what they hold.
	Stores []StoreSummary
	// DiskBytes is the space the database's files take (tables, logs,
	// manifest), as Pebble counts it.
	DiskBytes uint64
	// Tables is the number of sstables; L0Tables those in level 0.
	Tables, L0Tables int64
}

// StoreSummary is one store's share of a task database.
type StoreSummary struct {
	Name       string
	Keys       int64
	KeyBytes   int64 // user keys, without the store prefix
	ValueBytes int64
}

// ErrInUse is returned by Inspect for a database a running process holds.
var ErrInUse = errors.New("state/pebble: database in use by a running process")

// Inspect opens the database in dir read-only, reads its offsets and counts
// every store's keys and bytes, for operators (`eddy inspect`). It scans the
// whole database: a database of a million keys takes a fraction of a
// second. A database that a running eddy holds is locked: Inspect returns
// ErrInUse rather than wait (ask the running instance: its /v1/status).
//
// A damaged database is an error wrapping state.ErrCorrupt: every table's
// checksums are verified first, and Pebble's fatal errors (it reports
// some corruption that way) are returned rather than a panic.
func Inspect(dir string) (sum Summary, err error) {
	defer func() {
		// Read-only, Pebble writes nothing: what it finds fatal is in
		// the files.
		r := recover()
		if r == nil {
			return
		}
		f, ok := r.(state.Fatal)
		if !ok {
			panic(r)
		}
		sum, err = Summary{}, fmt.Errorf("state/pebble: inspect %s: %w: %s", dir, state.ErrCorrupt, f.Msg)
	}()
	if _, err := os.Stat(dir); err != nil {
		return sum, fmt.Errorf("state/pebble: inspect: %w", err)
	}
	lock, err := pebbledb.LockDirectory(dir, vfs.Default)
	if err != nil {
		return sum, fmt.Errorf("%w: %s: %w", ErrInUse, dir, err)
	}
	defer lock.Close()
	logger := &pebbleLogger{l: slog.New(slog.DiscardHandler)}
	po := &pebbledb.Options{
		ReadOnly:           true,
		ErrorIfNotExists:   true,
		Lock:               lock,
		Logger:             logger,
		FS:                 vfs.Default,
		FormatMajorVersion: pebbledb.FormatNewest,
		// Pebble's default handler of a damaged block is Logger.Fatalf;
		// the read that met it returns the error as well.
		EventListener: &pebbledb.EventListener{DataCorruption: func(pebbledb.DataCorruptionInfo) {}},
	}
	pdb, err := pebbledb.Open(dir, po)
	if err != nil {
		return sum, errs.Wrap("inspect", dir, err)
	}
	defer pdb.Close()
	if err := verifyTables(pdb, po, dir); err != nil {
		return sum, errs.Wrap("inspect: verify checksums", dir, err)
	}

	// Read-only: an older format is read as it is, not migrated.
	if sum.Offsets, sum.Format, err = disk.ReadOffsets(engine{pdb}, dir); err != nil {
		return sum, errs.Wrap("inspect", dir, err)
	}

	it, err := pdb.NewIter(&pebbledb.IterOptions{
		LowerBound: keys.StoresStart(),
		UpperBound: keys.StoresEnd(),
	})
	if err != nil {
		return sum, errs.Wrap("inspect", dir, err)
	}
	stores := map[string]*StoreSummary{}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()[1:] // store name, 0x00, user key
		i := bytes.IndexByte(k, 0)
		if i < 0 {
			continue // not a store key (cannot happen in a database eddy wrote)
		}
		s := stores[string(k[:i])]
		if s == nil {
			s = &StoreSummary{Name: string(k[:i])}
			stores[s.Name] = s
		}
		s.Keys++
		s.KeyBytes += int64(len(k) - i - 1)
		s.ValueBytes += int64(len(it.Value()))
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return sum, errs.Wrap("inspect", dir, err)
	}
	for _, s := range stores {
		sum.Stores = append(sum.Stores, *s)
	}
	sort.Slice(sum.Stores, func(i, j int) bool { return sum.Stores[i].Name < sum.Stores[j].Name })

	m := pdb.Metrics()
	sum.DiskBytes = m.DiskSpaceUsage()
	for level := range m.Levels {
		sum.Tables += m.Levels[level].TablesCount
	}
	sum.L0Tables = m.Levels[0].TablesCount
	return sum, nil
}
