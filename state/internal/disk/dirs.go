package disk

import (
	"fmt"
	"sync"
)

// Dirs is a Backend's bookkeeping of its task directories: a directory is
// open at most once at a time (two handles on one database would each
// cache offsets the other changes), nothing opens after the Backend closed,
// and an open directory is not destroyed. It is safe for concurrent use.
type Dirs struct {
	pkg    string
	mu     sync.Mutex
	open   map[string]bool
	closed bool
}

// NewDirs returns the bookkeeping of a Backend whose errors start with pkg.
func NewDirs(pkg string) *Dirs { return &Dirs{pkg: pkg, open: make(map[string]bool)} }

// Acquire marks dir open. It fails if the Backend is closed or dir is open
// already. locked, if not nil, runs under the same lock: a Backend takes its
// references on shared caches there, so that a concurrent Close cannot free
// them before the database holds them.
func (d *Dirs) Acquire(dir string, locked func()) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("%s: open %s: backend closed", d.pkg, dir)
	}
	if d.open[dir] {
		return fmt.Errorf("%s: open %s: already open", d.pkg, dir)
	}
	d.open[dir] = true
	if locked != nil {
		locked()
	}
	return nil
}

// Release marks dir closed, after its database closed or failed to open.
func (d *Dirs) Release(dir string) {
	d.mu.Lock()
	delete(d.open, dir)
	d.mu.Unlock()
}

// IfOpen runs fn under the lock unless the Backend is closed, and reports
// whether it ran.
func (d *Dirs) IfOpen(fn func()) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	fn()
	return true
}

// Destroy removes dir with removeAll (the whole directory, whatever the
// engine left in it: the rebuild is for a database the engine may not read)
// unless its database is open.
func (d *Dirs) Destroy(dir string, removeAll func(string) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.open[dir] {
		return fmt.Errorf("%s: destroy %s: database is open", d.pkg, dir)
	}
	if err := removeAll(dir); err != nil {
		return fmt.Errorf("%s: destroy %s: %w", d.pkg, dir, err)
	}
	return nil
}

// Close marks the Backend closed and, the first time only, runs release
// under the lock, where a Backend drops its shared caches.
func (d *Dirs) Close(release func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.closed = true
	if release != nil {
		release()
	}
}
