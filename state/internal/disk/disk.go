// Package disk is the half of a disk backend that does not depend on its
// engine: the database format (its version, the migration of older ones,
// the offsets), the encoding of a state.Batch into an engine's batch, the
// bookkeeping of a Backend's directories, the validation of the tuning that
// the backends share, and the mapping of errors. state/pebble and
// state/rocksdb are each this package plus their engine's calls, so the two
// behave the same where the state.DB contract says they must, the way
// litestream's replica backends share one client contract.
package disk

import (
	"errors"
	"fmt"

	"github.com/eddy-streams/eddy/state"
)

// Reader reads one key of an open database. The value it returns belongs
// to the caller; ok is false for a missing key.
type Reader interface {
	Get(key []byte) (value []byte, ok bool, err error)
}

// Writer receives the operations of one atomic batch, in order. It copies
// the keys and values it is given (Pebble's and RocksDB's batches do), so
// the caller may reuse them.
type Writer interface {
	Set(key, value []byte) error
	Delete(key []byte) error
	// DeleteRange deletes [start, end); operations added after it survive
	// it.
	DeleteRange(start, end []byte) error
}

// Engine is an open database as the format's migrations need it.
type Engine interface {
	Reader
	// Write applies what fn adds to a Writer as one atomic, synced batch;
	// if fn fails, nothing is written. size is about how many bytes fn
	// adds (0 if unknown), so that the batch is sized once: a commit of
	// tens of megabytes grown by doubling spent up to 8 % of a large-state
	// Nexmark query's CPU copying itself.
	Write(size int, fn func(Writer) error) error
}

// Errors maps a backend's errors to what its users see: the package, the
// operation and the directory, with state.ErrCorrupt added when the engine
// says the database cannot be trusted.
type Errors struct {
	// Pkg prefixes every error ("state/pebble").
	Pkg string
	// IsCorruption reports whether an engine error means damage.
	IsCorruption func(error) bool
}

// Wrap wraps err, an error of op on the database in dir; nil stays nil. A
// state.ErrFormat error is returned as it is: it already names the
// directory and says what to do, and it is the user's to read.
func (e Errors) Wrap(op, dir string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, state.ErrFormat):
		return err
	case e.IsCorruption(err):
		return fmt.Errorf("%s: %s %s: %w: %w", e.Pkg, op, dir, state.ErrCorrupt, err)
	}
	return fmt.Errorf("%s: %s %s: %w", e.Pkg, op, dir, err)
}

// Core is the engine-independent state of one open database: its
// directory, the offsets it holds (read at Open, replaced by each Apply),
// Apply's encoder, and the batch being applied in the background. Like the
// database, it is used by one goroutine at a time; the background apply is
// its own, and the database's methods call Wait before they touch the
// engine, so nothing but the Shared reads runs alongside it.
type Core struct {
	Dir     string
	offsets state.Offsets
	enc     Encoder
	// applying is set while a goroutine applies enc's batch; it sends
	// the result to done. failed is the error of the first background
	// apply that failed: the database no longer holds what its owner
	// was told, and must not take a later batch on top.
	applying bool
	done     chan error
	failed   error
}

// Open checks, migrates if needed, and reads the offsets of the database e
// in c.Dir (see the package function Open).
func (c *Core) Open(e Engine) (err error) {
	c.offsets, err = Open(e, c.Dir)
	return err
}

// Apply writes b through e as one atomic, synced batch and, once it is
// written, keeps its offsets.
func (c *Core) Apply(e Engine, b *state.Batch) error {
	if err := c.Wait(); err != nil {
		return err
	}
	if err := c.enc.Copy(b); err != nil {
		return err
	}
	return c.write(e)
}

// ApplyInBackground is Apply on another goroutine: it returns once it has
// copied b (so the caller may reuse b's memory at once), and the next call
// of Wait returns the apply's error. It lets a task's commit go on with
// the next transaction while the engine inserts the last one into its
// memtable and syncs its log: the changelog, not the database, is what
// makes a transaction durable (docs/design.md §3 step 4).
func (c *Core) ApplyInBackground(e Engine, b *state.Batch) error {
	if err := c.Wait(); err != nil {
		return err
	}
	if err := c.enc.Copy(b); err != nil {
		return err
	}
	if c.done == nil {
		c.done = make(chan error, 1)
	}
	c.applying = true
	go func() { c.done <- c.write(e) }()
	return nil
}

// Wait waits for the background apply in flight, if any, and returns the
// error of the first background apply that failed: once one failed, every
// later call fails with it, so nothing is applied over the gap.
func (c *Core) Wait() error {
	if c.applying {
		c.applying = false
		if err := <-c.done; err != nil {
			c.failed = fmt.Errorf("a batch applied in the background failed: %w", err)
		}
	}
	return c.failed
}

func (c *Core) write(e Engine) error {
	if err := e.Write(c.enc.Size(), c.enc.Encode); err != nil {
		return err
	}
	c.offsets = c.enc.Offsets()
	return nil
}

// Offsets returns a copy of the offsets the database holds.
func (c *Core) Offsets() state.Offsets { return c.offsets.Clone() }
