package pebble

import (
	"bytes"
	"errors"
	"fmt"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/internal/disk"
	"github.com/eddy-streams/eddy/state/internal/keys"
)

// db is one task's Pebble database. Like every state.DB it is used by one
// goroutine at a time, which lets it reuse its key buffers.
type db struct {
	disk.Core // the directory, the offsets, Apply's encoding
	backend   *Backend
	pdb       *pebbledb.DB // nil once closed; Pebble panics on use after Close
	stalls    *stalls      // write stalls, counted from Pebble's events
	key       []byte       // scratch for Get keys
	// it is Scan's iterator, kept from scan to scan until the next Apply:
	// the database changes only through Apply, so it sees what a new one
	// would, and repositioning it costs much less than creating one (a
	// session store scans several times per record). iterBusy marks it in
	// use by a scan whose fn scans again; that one gets its own. lo and
	// hi are the scratch bounds (SetBounds copies them). The iterator pins
	// the version it reads (compacted tables stay on disk until the next
	// Apply), and a scan's fn must not call Apply.
	it       *pebbledb.Iterator
	iterBusy bool
	lo, hi   []byte
}

var _ state.DB = (*db)(nil)

func (d *db) Get(store string, key []byte) ([]byte, bool, error) {
	if d.pdb == nil {
		return nil, false, fmt.Errorf("state/pebble: get: %w", state.ErrClosed)
	}
	if err := state.CheckStoreName(store); err != nil {
		return nil, false, fmt.Errorf("state/pebble: get: %w", err)
	}
	if err := d.Wait(); err != nil {
		return nil, false, errs.Wrap("get from", d.Dir, err)
	}
	d.key = keys.Append(d.key[:0], store, key)
	return d.get(d.key)
}

// get reads the full key k; it touches no scratch buffer, so SharedGet
// may call it from any goroutine.
func (d *db) get(k []byte) ([]byte, bool, error) {
	v, ok, err := engine{d.pdb}.Get(k)
	if err != nil {
		return nil, false, errs.Wrap("get from", d.Dir, err)
	}
	return v, ok, nil
}

// engine is a Pebble database as state/internal/disk reads and writes it.
type engine struct{ pdb *pebbledb.DB }

func (e engine) Get(k []byte) ([]byte, bool, error) {
	v, closer, err := e.pdb.Get(k)
	if errors.Is(err, pebbledb.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	// v points into Pebble's memory until closer.Close; the caller owns
	// what we return.
	out := bytes.Clone(v)
	if out == nil {
		out = []byte{}
	}
	if err := closer.Close(); err != nil {
		return nil, false, err
	}
	return out, true, nil
}

func (e engine) Write(size int, fn func(disk.Writer) error) error {
	batch := e.pdb.NewBatchWithSize(size)
	defer batch.Close()
	if err := fn(batchWriter{batch}); err != nil {
		return err
	}
	return batch.Commit(pebbledb.Sync)
}

// batchWriter adds to a Pebble batch, which copies keys and values.
type batchWriter struct{ b *pebbledb.Batch }

func (w batchWriter) Set(k, v []byte) error           { return w.b.Set(k, v, nil) }
func (w batchWriter) Delete(k []byte) error           { return w.b.Delete(k, nil) }
func (w batchWriter) DeleteRange(lo, hi []byte) error { return w.b.DeleteRange(lo, hi, nil) }

func (d *db) Scan(store string, lower, upper []byte, fn func(key, value []byte) error) error {
	if d.pdb != nil {
		if err := d.Wait(); err != nil {
			return errs.Wrap("scan", d.Dir, err)
		}
	}
	if d.iterBusy || d.pdb == nil {
		return d.scan(store, lower, upper, fn)
	}
	if err := state.CheckStoreName(store); err != nil {
		return fmt.Errorf("state/pebble: scan: %w", err)
	}
	if upper != nil && bytes.Compare(lower, upper) >= 0 {
		return nil
	}
	d.lo = keys.Append(d.lo[:0], store, lower)
	if upper != nil {
		d.hi = keys.Append(d.hi[:0], store, upper)
	} else {
		d.hi = keys.AppendStoreEnd(d.hi[:0], store)
	}
	if d.it == nil {
		// The first scan since the last Apply: the iterator keeps its
		// bounds' slices, so they are its own.
		it, err := d.pdb.NewIter(&pebbledb.IterOptions{LowerBound: bytes.Clone(d.lo), UpperBound: bytes.Clone(d.hi)})
		if err != nil {
			return errs.Wrap("scan", d.Dir, err)
		}
		d.it = it
	} else {
		d.it.SetBounds(d.lo, d.hi)
	}
	d.iterBusy = true
	defer func() { d.iterBusy = false }()
	it, prefixLen := d.it, keys.PrefixLen(store)
	var fnErr error
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			break // it.Error reports it
		}
		if fnErr = fn(it.Key()[prefixLen:], v); fnErr != nil {
			break
		}
	}
	if err := it.Error(); err != nil {
		d.closeIter()
		if fnErr != nil {
			return fnErr
		}
		return errs.Wrap("scan", d.Dir, err)
	}
	return fnErr
}

// closeIter drops Scan's iterator: before an Apply, which it would not see,
// and at Close.
func (d *db) closeIter() error {
	if d.it == nil {
		return nil
	}
	err := d.it.Close()
	d.it = nil
	return err
}

var _ state.SharedReader = (*db)(nil)

// SharedGet is Get for other goroutines: Pebble's reads are safe
// alongside its writes, and this one uses its own key buffer.
func (d *db) SharedGet(store string, key []byte) ([]byte, bool, error) {
	if d.pdb == nil {
		return nil, false, fmt.Errorf("state/pebble: get: %w", state.ErrClosed)
	}
	if err := state.CheckStoreName(store); err != nil {
		return nil, false, fmt.Errorf("state/pebble: get: %w", err)
	}
	return d.get(keys.Append(nil, store, key))
}

// SharedScan is Scan for other goroutines (Scan uses no scratch buffer).
func (d *db) SharedScan(store string, lower, upper []byte, fn func(key, value []byte) error) error {
	return d.scan(store, lower, upper, fn)
}

func (d *db) scan(store string, lower, upper []byte, fn func(key, value []byte) error) error {
	if d.pdb == nil {
		return fmt.Errorf("state/pebble: scan: %w", state.ErrClosed)
	}
	if err := state.CheckStoreName(store); err != nil {
		return fmt.Errorf("state/pebble: scan: %w", err)
	}
	if upper != nil && bytes.Compare(lower, upper) >= 0 {
		return nil
	}
	// Fresh bounds rather than d.key: Pebble reads them for the iterator's
	// whole life, and fn may call Get, which reuses d.key.
	opts := pebbledb.IterOptions{LowerBound: keys.Append(nil, store, lower)}
	if upper != nil {
		opts.UpperBound = keys.Append(nil, store, upper)
	} else {
		opts.UpperBound = keys.AppendStoreEnd(nil, store)
	}
	prefixLen := keys.PrefixLen(store)
	it, err := d.pdb.NewIter(&opts)
	if err != nil {
		return errs.Wrap("scan", d.Dir, err)
	}
	var fnErr error
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			break // it.Error reports it
		}
		if fnErr = fn(it.Key()[prefixLen:], v); fnErr != nil {
			break
		}
	}
	iterErr := it.Error()
	closeErr := it.Close()
	switch {
	case fnErr != nil:
		return fnErr
	case iterErr != nil:
		return errs.Wrap("scan", d.Dir, iterErr)
	case closeErr != nil:
		return errs.Wrap("scan", d.Dir, closeErr)
	}
	return nil
}

func (d *db) Apply(b *state.Batch) error {
	if d.pdb == nil {
		return fmt.Errorf("state/pebble: apply: %w", state.ErrClosed)
	}
	if err := d.closeIter(); err != nil {
		return errs.Wrap("apply to", d.Dir, err)
	}
	return errs.Wrap("apply to", d.Dir, d.Core.Apply(engine{d.pdb}, b))
}

var _ state.BackgroundApplier = (*db)(nil)

// ApplyInBackground is Apply on another goroutine (disk.Core): every
// other method but the Shared reads and Metrics waits for it first.
func (d *db) ApplyInBackground(b *state.Batch) error {
	if d.pdb == nil {
		return fmt.Errorf("state/pebble: apply: %w", state.ErrClosed)
	}
	if err := d.closeIter(); err != nil {
		return errs.Wrap("apply to", d.Dir, err)
	}
	return errs.Wrap("apply to", d.Dir, d.Core.ApplyInBackground(engine{d.pdb}, b))
}

func (d *db) Offsets() (state.Offsets, error) {
	if d.pdb == nil {
		return state.Offsets{}, fmt.Errorf("state/pebble: offsets: %w", state.ErrClosed)
	}
	if err := d.Wait(); err != nil {
		return state.Offsets{}, errs.Wrap("offsets of", d.Dir, err)
	}
	return d.Core.Offsets(), nil
}

// Close closes the Pebble database once a background apply in flight is
// done. Applied batches were synced, so nothing is flushed here; the WAL
// replays on the next Open.
func (d *db) Close() error {
	if d.pdb == nil {
		return fmt.Errorf("state/pebble: close: %w", state.ErrClosed)
	}
	applyErr := d.Wait()
	iterErr := d.closeIter()
	err := errors.Join(applyErr, iterErr, d.pdb.Close())
	d.pdb = nil
	d.backend.dirs.Release(d.Dir)
	if err != nil {
		return errs.Wrap("close", d.Dir, err)
	}
	return nil
}

var _ state.Checkpointer = (*db)(nil)

// Checkpoint uses Pebble's checkpoint: tables are hard-linked (they are
// immutable), the MANIFEST, OPTIONS and write-ahead logs copied, so it
// costs milliseconds and the disk space of the logs. Every Apply was
// synced, so the copy holds all of them.
func (d *db) Checkpoint(dir string) error {
	if d.pdb == nil {
		return fmt.Errorf("state/pebble: checkpoint: %w", state.ErrClosed)
	}
	// The checkpoint's files are read back through the OS (package
	// checkpoint uploads them), so a database on another file system
	// (an in-memory one in tests) cannot give one.
	if d.backend.opts.FS != vfs.Default {
		return fmt.Errorf("state/pebble: checkpoint of %s: the backend's file system is not the OS's; remote checkpoints need Options.FS = nil", d.Dir)
	}
	if err := d.Wait(); err != nil {
		return errs.Wrap("checkpoint", d.Dir, err)
	}
	if err := d.pdb.Checkpoint(dir); err != nil {
		return errs.Wrap("checkpoint", d.Dir, err)
	}
	return nil
}
