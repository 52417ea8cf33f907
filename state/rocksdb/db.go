//go:build rocksdb

package rocksdb

// #include <stdlib.h>
import "C"

import (
	"bytes"
	"fmt"
	"unsafe"

	"github.com/linxGnu/grocksdb"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/internal/disk"
	"github.com/eddy-streams/eddy/state/internal/keys"
)

// db is one task's RocksDB database. Like every state.DB it is used by one
// goroutine at a time, which lets it reuse its C objects and key buffers.
type db struct {
	disk.Core // the directory, the offsets, Apply's encoding
	backend   *Backend
	rdb       *grocksdb.DB // nil once closed; RocksDB crashes on use after close
	opts      rocksOptions
	ro        *grocksdb.ReadOptions  // for Get
	wo        *grocksdb.WriteOptions // synced
	wb        *grocksdb.WriteBatch   // reused by Apply
	key       []byte                 // scratch for Get keys
}

var _ state.DB = (*db)(nil)

func newDB(b *Backend, dir string, rdb *grocksdb.DB, opts rocksOptions) *db {
	wo := grocksdb.NewDefaultWriteOptions()
	wo.SetSync(true)
	return &db{
		Core:    disk.Core{Dir: dir},
		backend: b,
		rdb:     rdb,
		opts:    opts,
		ro:      grocksdb.NewDefaultReadOptions(),
		wo:      wo,
		wb:      grocksdb.NewWriteBatch(),
	}
}

func (d *db) Get(store string, key []byte) ([]byte, bool, error) {
	if d.rdb == nil {
		return nil, false, fmt.Errorf("state/rocksdb: get: %w", state.ErrClosed)
	}
	if err := state.CheckStoreName(store); err != nil {
		return nil, false, fmt.Errorf("state/rocksdb: get: %w", err)
	}
	if err := d.Wait(); err != nil {
		return nil, false, errs.Wrap("get from", d.Dir, err)
	}
	d.key = keys.Append(d.key[:0], store, key)
	return d.get("get from", d.key)
}

// get reads one database key for op.
func (d *db) get(op string, key []byte) ([]byte, bool, error) {
	v, ok, err := engine{d}.Get(key)
	if err != nil {
		return nil, false, errs.Wrap(op, d.Dir, err)
	}
	return v, ok, nil
}

// engine is a RocksDB database as state/internal/disk reads and writes it.
type engine struct{ d *db }

// Get reads through a pinned slice, not rocksdb_get: its result tells a
// missing key (no slice) from an empty value (an empty slice).
func (e engine) Get(key []byte) ([]byte, bool, error) {
	h, err := e.d.rdb.GetPinned(e.d.ro, key)
	if err != nil {
		return nil, false, err
	}
	if !h.Exists() {
		return nil, false, nil
	}
	defer h.Destroy()
	// The value is RocksDB's memory until Destroy; the caller owns what
	// we return.
	out := bytes.Clone(h.Data())
	if out == nil {
		out = []byte{}
	}
	return out, true, nil
}

// Write fills the database's reused WriteBatch and writes it, synced.
// Nothing reaches the database before Write, so a failure part way leaves
// it untouched.
func (e engine) Write(_ int, fn func(disk.Writer) error) error {
	e.d.wb.Clear()
	if err := fn(batchWriter{e.d.wb}); err != nil {
		return err
	}
	return e.d.rdb.Write(e.d.wo, e.d.wb)
}

// batchWriter adds to a RocksDB WriteBatch, which copies keys and values
// and reports no errors of its own.
type batchWriter struct{ wb *grocksdb.WriteBatch }

func (w batchWriter) Set(k, v []byte) error           { w.wb.Put(k, v); return nil }
func (w batchWriter) Delete(k []byte) error           { w.wb.Delete(k); return nil }
func (w batchWriter) DeleteRange(lo, hi []byte) error { w.wb.DeleteRange(lo, hi); return nil }

// cBytes copies b into C memory. Iterator bounds are kept by RocksDB for the
// iterator's life, and cgo forbids C keeping Go pointers past a call.
func cBytes(b []byte) (view []byte, free func()) {
	p := C.CBytes(b)
	return unsafe.Slice((*byte)(p), len(b)), func() { C.free(p) }
}

func (d *db) Scan(store string, lower, upper []byte, fn func(key, value []byte) error) error {
	if d.rdb == nil {
		return fmt.Errorf("state/rocksdb: scan: %w", state.ErrClosed)
	}
	if err := state.CheckStoreName(store); err != nil {
		return fmt.Errorf("state/rocksdb: scan: %w", err)
	}
	if err := d.Wait(); err != nil {
		return errs.Wrap("scan", d.Dir, err)
	}
	if upper != nil && bytes.Compare(lower, upper) >= 0 {
		return nil
	}
	var hi []byte
	if upper != nil {
		hi = keys.Append(nil, store, upper)
	} else {
		hi = keys.AppendStoreEnd(nil, store)
	}
	lo, freeLo := cBytes(keys.Append(nil, store, lower))
	defer freeLo()
	hi, freeHi := cBytes(hi)
	defer freeHi()

	ro := grocksdb.NewDefaultReadOptions()
	defer ro.Destroy()
	ro.SetIterateLowerBound(lo)
	ro.SetIterateUpperBound(hi)
	it := d.rdb.NewIterator(ro)
	defer it.Close()

	prefixLen := keys.PrefixLen(store)
	for it.SeekToFirst(); it.Valid(); it.Next() {
		// Key and Value point into the iterator's memory, valid until it
		// moves: what state.DB promises fn.
		k, v := it.Key(), it.Value()
		if err := fn(k.Data()[prefixLen:], v.Data()); err != nil {
			return err
		}
	}
	if err := it.Err(); err != nil {
		return errs.Wrap("scan", d.Dir, err)
	}
	return nil
}

// Apply is one synced WriteBatch: its range deletes, then its writes, then
// the offsets.
func (d *db) Apply(b *state.Batch) error {
	if d.rdb == nil {
		return fmt.Errorf("state/rocksdb: apply: %w", state.ErrClosed)
	}
	return errs.Wrap("apply to", d.Dir, d.Core.Apply(engine{d}, b))
}

var _ state.BackgroundApplier = (*db)(nil)

// ApplyInBackground is Apply on another goroutine (disk.Core), which uses
// the reused WriteBatch alone: every other method waits for it first.
func (d *db) ApplyInBackground(b *state.Batch) error {
	if d.rdb == nil {
		return fmt.Errorf("state/rocksdb: apply: %w", state.ErrClosed)
	}
	return errs.Wrap("apply to", d.Dir, d.Core.ApplyInBackground(engine{d}, b))
}

func (d *db) Offsets() (state.Offsets, error) {
	if d.rdb == nil {
		return state.Offsets{}, fmt.Errorf("state/rocksdb: offsets: %w", state.ErrClosed)
	}
	if err := d.Wait(); err != nil {
		return state.Offsets{}, errs.Wrap("offsets of", d.Dir, err)
	}
	return d.Core.Offsets(), nil
}

// release closes the RocksDB database and frees the C objects of d, but not
// d.opts, which Open frees itself when it fails.
func (d *db) release() {
	d.rdb.Close()
	d.rdb = nil
	d.ro.Destroy()
	d.wo.Destroy()
	d.wb.Destroy()
}

// Close closes the RocksDB database once a background apply in flight is
// done. Applied batches were synced, so nothing is flushed here; the WAL
// replays on the next Open.
func (d *db) Close() error {
	if d.rdb == nil {
		return fmt.Errorf("state/rocksdb: close: %w", state.ErrClosed)
	}
	applyErr := d.Wait()
	d.release()
	d.opts.destroy()
	d.backend.dirs.Release(d.Dir)
	if applyErr != nil {
		return errs.Wrap("close", d.Dir, applyErr)
	}
	return nil
}
