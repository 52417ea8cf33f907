// Package memory is an in-memory state.Backend for tests. Its databases live
// in the Backend value and survive Close and a later Open of the same
// directory, so a test can simulate a task restart without a disk; Destroy
// forgets them, like a wiped task directory.
package memory

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"github.com/eddy-streams/eddy/state"
	"github.com/google/btree"
)

// Backend holds the databases of every directory opened through it. It is
// safe for concurrent use; each DB it returns is used by one goroutine at a
// time, as state.DB requires.
type Backend struct {
	mu  sync.Mutex
	dbs map[string]*data
}

var _ state.Backend = (*Backend)(nil)

// data is the content of one directory's database: each store an ordered
// tree, so that a point read is O(log n) and a scan O(log n + k) (eddytest
// runs joins and windows on it: a scan per record that walked and sorted the
// whole store made it quadratic).
type data struct {
	stores  map[string]*btree.BTreeG[entry]
	offsets state.Offsets
	open    bool
	// applied counts Applies; an entry remembers the Apply that created
	// it, so that a scan skips keys created while it runs.
	applied uint64
	// scans counts the scans under way (a scan's callback may Apply, or
	// scan again). Only they care when a key was born: with none, an
	// Apply writes each key with one walk down its tree, without looking
	// for the birth of the key it replaces.
	scans int
	// doomed is Apply's scratch list of the keys a range deletes; chunk
	// and kv are the scratch of the outermost scan (a nested one
	// allocates its own).
	doomed []entry
	chunk  []entry
	kv     []byte
}

// entry is one key of a store. Its key and value share one allocation,
// which the garbage collector visits as one object; a lookup wraps the
// caller's key in an entry without copying it.
type entry struct {
	kv   []byte // the key, then the value
	klen int
	// born is the Apply that created the key (a rewrite keeps it), or 0
	// for a key written while no scan ran: every later scan began after
	// it anyway.
	born uint64
}

func (e entry) key() []byte   { return e.kv[:e.klen:e.klen] }
func (e entry) value() []byte { return e.kv[e.klen:] }

// probe is the entry to look key up with.
func probe(key []byte) entry { return entry{kv: key, klen: len(key)} }

// newEntry copies key and value into a new entry. Its value is never nil:
// an empty value is a value.
func newEntry(key, value []byte, born uint64) entry {
	kv := make([]byte, len(key)+len(value))
	copy(kv, key)
	copy(kv[len(key):], value)
	return entry{kv: kv, klen: len(key), born: born}
}

func lessEntry(a, b entry) bool { return bytes.Compare(a.key(), b.key()) < 0 }

// scanChunk is how many keys a scan takes from the tree at a time. The tree
// must not change while it is walked, and fn may Apply to the database, so
// a scan copies a chunk of keys, releases the tree, and visits them.
const scanChunk = 64

// New returns a Backend with no databases.
func New() *Backend { return &Backend{dbs: make(map[string]*data)} }

// Open returns the database of dir, creating it if needed. A directory can be
// open only once at a time, as with Pebble's directory lock: two tasks
// sharing a directory is a bug that should fail loudly.
func (b *Backend) Open(dir string) (state.DB, error) {
	dir = filepath.Clean(dir)
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.dbs[dir]
	if !ok {
		d = &data{
			stores:  make(map[string]*btree.BTreeG[entry]),
			offsets: state.NewOffsets(),
		}
		b.dbs[dir] = d
	}
	if d.open {
		return nil, fmt.Errorf("state/memory: open %s: already open", dir)
	}
	d.open = true
	return &db{backend: b, dir: dir, data: d}, nil
}

// Destroy forgets the database of dir. It fails if the database is open,
// because the task still using it would keep writing to a ghost.
func (b *Backend) Destroy(dir string) error {
	dir = filepath.Clean(dir)
	b.mu.Lock()
	defer b.mu.Unlock()
	if d, ok := b.dbs[dir]; ok && d.open {
		return fmt.Errorf("state/memory: destroy %s: database is open", dir)
	}
	delete(b.dbs, dir)
	return nil
}

// Dirs returns the directories that hold a database, sorted; tests use it to
// check what a component created or destroyed.
func (b *Backend) Dirs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	dirs := make([]string, 0, len(b.dbs))
	for dir := range b.dbs {
		dirs = append(dirs, dir)
	}
	slices.Sort(dirs)
	return dirs
}

type db struct {
	backend *Backend
	dir     string
	data    *data // nil once closed
}

func (d *db) Get(store string, key []byte) ([]byte, bool, error) {
	if d.data == nil {
		return nil, false, fmt.Errorf("state/memory: get: %w", state.ErrClosed)
	}
	if err := state.CheckStoreName(store); err != nil {
		return nil, false, fmt.Errorf("state/memory: get: %w", err)
	}
	t := d.data.stores[store]
	if t == nil {
		return nil, false, nil
	}
	e, ok := t.Get(probe(key))
	if !ok {
		return nil, false, nil
	}
	return bytes.Clone(e.value()), true, nil
}

func (d *db) Scan(store string, lower, upper []byte, fn func(key, value []byte) error) error {
	if d.data == nil {
		return fmt.Errorf("state/memory: scan: %w", state.ErrClosed)
	}
	if err := state.CheckStoreName(store); err != nil {
		return fmt.Errorf("state/memory: scan: %w", err)
	}
	t := d.data.stores[store]
	if t == nil {
		return nil
	}
	// Keys created after the scan began are not visited; a key deleted
	// meanwhile is skipped and a changed value is seen, as an iterator
	// over a live structure would.
	data := d.data
	var chunk []entry
	var kv []byte // the copies passed to fn, reused
	if data.scans == 0 {
		chunk, kv = data.chunk[:0], data.kv[:0]
		defer func() {
			clear(chunk[:cap(chunk)]) // let go of the values
			data.chunk, data.kv = chunk[:0], kv[:0]
		}()
	}
	data.scans++
	defer func() { data.scans-- }()
	began := data.applied
	from := lower
	var next []byte // the key after a chunk's last one
	for {
		if d.data == nil { // fn closed the database
			return fmt.Errorf("state/memory: scan: %w", state.ErrClosed)
		}
		chunk = chunk[:0]
		t.AscendGreaterOrEqual(probe(from), func(e entry) bool {
			if upper != nil && bytes.Compare(e.key(), upper) >= 0 {
				return false
			}
			chunk = append(chunk, e)
			return len(chunk) < scanChunk
		})
		taken := data.applied
		for _, e := range chunk {
			if d.data == nil {
				return fmt.Errorf("state/memory: scan: %w", state.ErrClosed)
			}
			if data.applied != taken {
				// fn applied a batch: the entry may have changed or gone.
				var ok bool
				if e, ok = data.stores[store].Get(e); !ok {
					continue
				}
			}
			if e.born > began {
				continue
			}
			// Copies, so a caller that breaks the no-modify rule corrupts
			// only its own slices, as it would with Pebble's iterator
			// buffers; and reused, as those are.
			kv = append(kv[:0], e.kv...)
			n := e.klen
			if err := fn(kv[:n:n], kv[n:len(kv):len(kv)]); err != nil {
				return err
			}
		}
		if len(chunk) < scanChunk {
			return nil
		}
		// The entries are never written to (an Apply replaces them), but
		// the byte after the last key is its value's: copy.
		next = append(append(next[:0], chunk[len(chunk)-1].key()...), 0)
		from = next
	}
}

func (d *db) Apply(b *state.Batch) error {
	if d.data == nil {
		return fmt.Errorf("state/memory: apply: %w", state.ErrClosed)
	}
	if b == nil {
		return fmt.Errorf("state/memory: apply: nil batch")
	}
	// Validate everything before changing anything: Apply is atomic.
	for _, r := range b.Ranges {
		if err := state.CheckStoreName(r.Store); err != nil {
			return fmt.Errorf("state/memory: apply: %w", err)
		}
	}
	for _, w := range b.Writes {
		if err := state.CheckStoreName(w.Store); err != nil {
			return fmt.Errorf("state/memory: apply: %w", err)
		}
	}
	data := d.data
	data.applied++
	if data.scans == 0 {
		data.applyQuiet(b)
	} else {
		data.applyScanned(b)
	}
	copyOffsets(&data.offsets, b.Offsets)
	return nil
}

// applyQuiet applies b while no scan runs: no birth to keep, so a write is
// one walk down the tree.
func (d *data) applyQuiet(b *state.Batch) {
	// Ranges first, as state.Batch specifies: the batch's writes survive.
	for _, r := range b.Ranges {
		if t := d.stores[r.Store]; t != nil {
			d.deleteRange(t, r)
		}
	}
	for _, w := range b.Writes {
		t := d.tree(w.Store)
		if w.Delete {
			t.Delete(probe(w.Key))
			continue
		}
		t.ReplaceOrInsert(newEntry(w.Key, w.Value, 0))
	}
}

// applyScanned applies b while a scan runs (its callback applies b): a
// key that existed before the batch keeps its birth, so that the scan
// visits it; a key created by the batch is born now, and the scan skips
// it.
func (d *data) applyScanned(b *state.Batch) {
	// A key that a range of this batch deletes and a write of it puts back
	// exists before and after the batch: it keeps its birth too.
	var rangedBorn map[string]uint64
	for _, r := range b.Ranges {
		t := d.stores[r.Store]
		if t == nil {
			continue
		}
		for _, e := range d.deleteRange(t, r) {
			if rangedBorn == nil {
				rangedBorn = make(map[string]uint64)
			}
			rangedBorn[string(e.key())] = e.born
		}
	}
	for _, w := range b.Writes {
		t := d.tree(w.Store)
		if w.Delete {
			t.Delete(probe(w.Key))
			continue
		}
		born := d.applied
		if old, ok := t.Get(probe(w.Key)); ok {
			born = old.born
		} else if b, ok := rangedBorn[string(w.Key)]; ok {
			born = b
		}
		t.ReplaceOrInsert(newEntry(w.Key, w.Value, born))
	}
}

// deleteRange deletes r's keys from t and returns them (valid until the
// next call). Window stores expire their oldest segment, at the start of
// the tree: those keys go without a search each.
func (d *data) deleteRange(t *btree.BTreeG[entry], r state.DeleteRange) []entry {
	old := d.doomed
	doomed := old[:0]
	t.AscendGreaterOrEqual(probe(r.Lower), func(e entry) bool {
		if len(r.Upper) > 0 && bytes.Compare(e.key(), r.Upper) >= 0 {
			return false
		}
		doomed = append(doomed, e)
		return true
	})
	if first, ok := t.Min(); ok && len(doomed) > 0 && bytes.Equal(first.key(), doomed[0].key()) {
		for range doomed {
			t.DeleteMin()
		}
	} else {
		for _, e := range doomed {
			t.Delete(e)
		}
	}
	if len(doomed) < len(old) {
		clear(old[len(doomed):]) // let go of an older, longer list's values
	}
	d.doomed = doomed
	return doomed
}

// tree returns store's tree, creating it.
func (d *data) tree(store string) *btree.BTreeG[entry] {
	t := d.stores[store]
	if t == nil {
		t = btree.NewG(16, lessEntry)
		d.stores[store] = t
	}
	return t
}

// copyOffsets makes dst equal to src in dst's own maps, which it reuses
// (eddytest applies a batch per task after every record: a Clone was two
// new maps each time).
func copyOffsets(dst *state.Offsets, src state.Offsets) {
	if dst.Input == nil || dst.Changelog == nil {
		*dst = state.NewOffsets()
	}
	clear(dst.Input)
	clear(dst.Changelog)
	for k, v := range src.Input {
		dst.Input[k] = v
	}
	for k, v := range src.Changelog {
		dst.Changelog[k] = v
	}
	dst.StreamTime = src.StreamTime
}

func (d *db) Offsets() (state.Offsets, error) {
	if d.data == nil {
		return state.Offsets{}, fmt.Errorf("state/memory: offsets: %w", state.ErrClosed)
	}
	return d.data.offsets.Clone(), nil
}

func (d *db) Close() error {
	if d.data == nil {
		return fmt.Errorf("state/memory: close: %w", state.ErrClosed)
	}
	d.backend.mu.Lock()
	d.data.open = false
	d.backend.mu.Unlock()
	d.data = nil
	return nil
}

// String names the database for logs and test failures.
func (d *db) String() string { return "memory:" + d.dir }
