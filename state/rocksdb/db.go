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
	"github.com/eddy-streams/eddy/state/internal/keys"
	"github.com/eddy-streams/eddy/state/internal/offsetcodec"
)

// db is one task's RocksDB database. Like every state.DB it is used by one
// goroutine at a time, which lets it reuse its C objects and key buffers.
type db struct {
	backend *Backend
	dir     string
	rdb     *grocksdb.DB // nil once closed; RocksDB crashes on use after close
	opts    rocksOptions
	ro      *grocksdb.ReadOptions  // for Get
	wo      *grocksdb.WriteOptions // synced
	wb      *grocksdb.WriteBatch   // reused by Apply
	// offsets caches what the metadata key holds: read at Open, replaced
	// after each successful Apply.
	offsets state.Offsets
	key     []byte // scratch for Get and Apply keys
	meta    []byte // scratch for encoded offsets
}

var _ state.DB = (*db)(nil)

func newDB(b *Backend, dir string, rdb *grocksdb.DB, opts rocksOptions) *db {
	wo := grocksdb.NewDefaultWriteOptions()
	wo.SetSync(true)
	return &db{
		backend: b,
		dir:     dir,
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
	d.key = keys.Append(d.key[:0], store, key)
	return d.get("get from", d.key)
}

// get reads one database key for op. A pinned slice, not rocksdb_get: its
// result tells a missing key (no slice) from an empty value (an empty slice).
func (d *db) get(op string, key []byte) ([]byte, bool, error) {
	h, err := d.rdb.GetPinned(d.ro, key)
	if err != nil {
		return nil, false, wrapErr(op, d.dir, err)
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
		return wrapErr("scan", d.dir, err)
	}
	return nil
}

func (d *db) Apply(b *state.Batch) error {
	if d.rdb == nil {
		return fmt.Errorf("state/rocksdb: apply: %w", state.ErrClosed)
	}
	if b == nil {
		return fmt.Errorf("state/rocksdb: apply to %s: nil batch", d.dir)
	}
	d.wb.Clear()
	// Ranges go into the batch before the writes. RocksDB gives each
	// operation of a batch the next sequence number, and a range tombstone
	// deletes only keys with lower numbers, so the writes survive the
	// ranges, as state.Batch specifies. Nothing reaches the database before
	// Write, so an invalid entry part way leaves it untouched.
	for _, r := range b.Ranges {
		if err := state.CheckStoreName(r.Store); err != nil {
			return fmt.Errorf("state/rocksdb: apply to %s: %w", d.dir, err)
		}
		if len(r.Upper) != 0 && bytes.Compare(r.Lower, r.Upper) >= 0 {
			continue // empty, and RocksDB wants start < end
		}
		// Both bounds in the one scratch buffer; the batch copies them.
		d.key = keys.Append(d.key[:0], r.Store, r.Lower)
		n := len(d.key)
		if len(r.Upper) == 0 {
			d.key = keys.AppendStoreEnd(d.key, r.Store)
		} else {
			d.key = keys.Append(d.key, r.Store, r.Upper)
		}
		d.wb.DeleteRange(d.key[:n], d.key[n:])
	}
	for _, w := range b.Writes {
		if err := state.CheckStoreName(w.Store); err != nil {
			return fmt.Errorf("state/rocksdb: apply to %s: %w", d.dir, err)
		}
		d.key = keys.Append(d.key[:0], w.Store, w.Key)
		if w.Delete {
			d.wb.Delete(d.key)
		} else {
			d.wb.Put(d.key, w.Value)
		}
	}
	d.meta = offsetcodec.Append(d.meta[:0], b.Offsets)
	d.wb.Put(keys.Meta(), d.meta)
	if err := d.rdb.Write(d.wo, d.wb); err != nil {
		return wrapErr("apply to", d.dir, err)
	}
	d.offsets = b.Offsets.Clone()
	return nil
}

func (d *db) Offsets() (state.Offsets, error) {
	if d.rdb == nil {
		return state.Offsets{}, fmt.Errorf("state/rocksdb: offsets: %w", state.ErrClosed)
	}
	return d.offsets.Clone(), nil
}

// readOffsets reads the metadata key; a new database has none and reflects
// no offsets and no stream time.
func (d *db) readOffsets() (state.Offsets, error) {
	v, ok, err := d.get("read offsets of", keys.Meta())
	if err != nil {
		return state.Offsets{}, err
	}
	if !ok {
		return state.NewOffsets(), nil
	}
	o, err := offsetcodec.Decode(v)
	if err != nil {
		return state.Offsets{}, fmt.Errorf("state/rocksdb: read offsets of %s: %w: %w", d.dir, state.ErrCorrupt, err)
	}
	return o, nil
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

// Close closes the RocksDB database. Applied batches were synced, so nothing
// is flushed here; the WAL replays on the next Open.
func (d *db) Close() error {
	if d.rdb == nil {
		return fmt.Errorf("state/rocksdb: close: %w", state.ErrClosed)
	}
	d.release()
	d.opts.destroy()
	d.backend.closed1(d.dir)
	return nil
}
