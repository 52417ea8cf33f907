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
)

// Backend holds the databases of every directory opened through it. It is
// safe for concurrent use; each DB it returns is used by one goroutine at a
// time, as state.DB requires.
type Backend struct {
	mu  sync.Mutex
	dbs map[string]*data
}

var _ state.Backend = (*Backend)(nil)

// data is the content of one directory's database.
type data struct {
	stores  map[string]map[string][]byte
	offsets state.Offsets
	open    bool
}

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
			stores:  make(map[string]map[string][]byte),
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
	v, ok := d.data.stores[store][string(key)]
	if !ok {
		return nil, false, nil
	}
	return bytes.Clone(v), true, nil
}

func (d *db) Scan(store string, lower, upper []byte, fn func(key, value []byte) error) error {
	if d.data == nil {
		return fmt.Errorf("state/memory: scan: %w", state.ErrClosed)
	}
	if err := state.CheckStoreName(store); err != nil {
		return fmt.Errorf("state/memory: scan: %w", err)
	}
	m := d.data.stores[store]
	keys := make([]string, 0, len(m))
	for k := range m {
		if k >= string(lower) && (upper == nil || k < string(upper)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		// fn may Apply to this database during the scan; a key it deleted
		// is skipped and a changed value is seen, as an iterator over a
		// live structure would.
		v, ok := m[k]
		if !ok {
			continue
		}
		// Copies, so a caller that breaks the no-modify rule corrupts only
		// its own slices, as it would with Pebble's iterator buffers.
		if err := fn([]byte(k), bytes.Clone(v)); err != nil {
			return err
		}
	}
	return nil
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
	// Ranges first, as state.Batch specifies: the batch's writes survive.
	for _, r := range b.Ranges {
		m := d.data.stores[r.Store]
		for k := range m {
			if k >= string(r.Lower) && (len(r.Upper) == 0 || k < string(r.Upper)) {
				delete(m, k)
			}
		}
	}
	for _, w := range b.Writes {
		m := d.data.stores[w.Store]
		if m == nil {
			m = make(map[string][]byte)
			d.data.stores[w.Store] = m
		}
		if w.Delete {
			delete(m, string(w.Key))
			continue
		}
		v := make([]byte, len(w.Value))
		copy(v, w.Value)
		m[string(w.Key)] = v
	}
	d.data.offsets = b.Offsets.Clone()
	return nil
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
