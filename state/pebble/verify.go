package pebble

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/block"
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
	buf := make([]byte, verifyWindow)
	seen := map[uint64]bool{}
	for _, level := range levels {
		for _, t := range level {
			num := uint64(t.BackingSSTNum)
			if seen[num] {
				continue // virtual tables share their backing file
			}
			seen[num] = true
			err := verifyTable(opts.FS, filepath.Join(dir, fmt.Sprintf("%06d.sst", num)), ro, &buf)
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

// verifyTable checks the checksum of every block of the table at path.
// sstable.Reader.ValidateBlockChecksums does as much but decompresses
// every block too, which takes four times as long (BenchmarkVerifyTables,
// 1M keys: 47 ms against 11 ms); a checksum covers the block as it is
// stored, so the stored bytes are enough. The table's layout comes from
// its index, which the reader reads (and checks) as usual.
func verifyTable(fsys vfs.FS, path string, ro sstable.ReaderOptions, buf *[]byte) (err error) {
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
	l, err := r.Layout()
	if err != nil {
		return err
	}
	handles := []block.Handle{l.TopIndex, l.RangeDel, l.RangeKey, l.ValueIndex, l.Properties, l.MetaIndex, l.BlobReferenceIndex}
	for _, d := range l.Data {
		handles = append(handles, d.Handle)
	}
	handles = append(handles, l.Index...)
	handles = append(handles, l.ValueBlock...)
	for _, fb := range l.Filter {
		handles = append(handles, fb.Handle)
	}
	slices.SortFunc(handles, func(a, b block.Handle) int { return cmp.Compare(a.Offset, b.Offset) })
	return checkBlocks(readable, r.BlockReader().ChecksumType(), handles, buf)
}

// verifyWindow is how much of a table checkBlocks reads at once.
const verifyWindow = 4 << 20

// checkBlocks reads the blocks at handles (sorted by offset) from the
// file in windows of verifyWindow bytes into *buf (grown if a block is
// larger), and checks each one's checksum.
func checkBlocks(file objstorage.Readable, ct block.ChecksumType, handles []block.Handle, buf *[]byte) error {
	if ct != block.ChecksumTypeCRC32c && ct != block.ChecksumTypeXXHash64 {
		// Pebble writes one of these two; its reads fail on any other.
		return fmt.Errorf("%w: the table's footer names checksum type %d", pebbledb.ErrCorruption, ct)
	}
	size := uint64(file.Size())
	var win []byte   // the part of the file in *buf
	var start uint64 // the file offset of win[0]
	for _, h := range handles {
		if h.Length == 0 {
			continue // a block the table does not have
		}
		end := h.Offset + h.Length + block.TrailerLen
		if end > size || end < h.Offset {
			return fmt.Errorf("%w: block %d/%d ends beyond the end of the file (%d bytes)", pebbledb.ErrCorruption, h.Offset, h.Length, size)
		}
		if h.Offset < start || end > start+uint64(len(win)) {
			start = h.Offset
			n := min(max(verifyWindow, end-start), size-start)
			if uint64(cap(*buf)) < n {
				*buf = make([]byte, n)
			}
			win = (*buf)[:n]
			if err := file.ReadAt(context.Background(), win, int64(start)); err != nil {
				return err
			}
		}
		b := win[h.Offset-start : end-start]
		if err := block.ValidateChecksum(ct, b, h); err != nil {
			return err
		}
	}
	return nil
}
