package pebble

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// verifyTables reads every block of every table of pdb, the database in
// dir opened with po, and checks its checksum; the first mismatch is
// returned (marked as Pebble's corruption, which isCorruption sees).
//
// Pebble checks a block's checksum only when a read loads it, so without
// this a damaged block is found by the first read that touches it: maybe
// the task's, maybe a query's, maybe never before a compaction rewrites
// it. Checked at open, a damaged database is rebuilt before the task
// processes anything. The tables are read through their own readers, not
// the shared block cache, so the check evicts no other task's blocks.
func verifyTables(pdb *pebbledb.DB, po *pebbledb.Options, dir string) error {
	levels, err := pdb.SSTables()
	if err != nil {
		return err
	}
	opts := po.Clone()
	opts.EnsureDefaults()
	ro := opts.MakeReaderOptions()
	seen := map[uint64]bool{}
	for _, level := range levels {
		for _, t := range level {
			num := uint64(t.BackingSSTNum)
			if seen[num] {
				continue // virtual tables share their backing file
			}
			seen[num] = true
			err := verifyTable(opts.FS, filepath.Join(dir, fmt.Sprintf("%06d.sst", num)), ro)
			if errors.Is(err, fs.ErrNotExist) && !live(pdb, num) {
				// A compaction that started at open replaced it since
				// the listing; the compaction read (and so checked)
				// every block of it.
				continue
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// live reports whether the table backed by file num is in pdb's current
// version (true when that cannot be told: the file is then missing).
func live(pdb *pebbledb.DB, num uint64) bool {
	levels, err := pdb.SSTables()
	if err != nil {
		return true
	}
	for _, level := range levels {
		for _, t := range level {
			if uint64(t.BackingSSTNum) == num {
				return true
			}
		}
	}
	return false
}

func verifyTable(fsys vfs.FS, path string, ro sstable.ReaderOptions) (err error) {
	f, err := fsys.Open(path, vfs.SequentialReadsOption)
	if err != nil {
		return err
	}
	readable, err := objstorageprovider.NewFileReadable(f, fsys, objstorageprovider.NewReadaheadConfig(), path)
	if err != nil {
		_ = f.Close()
		return err
	}
	r, err := sstable.NewReader(context.Background(), readable, ro)
	if err != nil {
		// NewReader leaves readable open when it fails; Close on success
		// closes it.
		return errors.Join(err, readable.Close())
	}
	defer func() { err = errors.Join(err, r.Close()) }()
	return r.ValidateBlockChecksums()
}
