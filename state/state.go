// Package state holds the storage side of eddy: the database interface that
// every backend implements (one database per task, holding all of the task's
// stores and the offsets the state reflects), and the write buffer that keeps
// uncommitted writes out of that database until their transaction commits.
//
// The database never sees uncommitted data (docs/design.md §3): processors write to
// a Buffer, the runtime turns the Buffer's dirty keys into changelog records
// inside the Kafka transaction, and only once the transaction committed does it
// call DB.Apply with the same writes and the offsets they reflect, atomically.
package state

import (
	"errors"
	"fmt"
	"math"
)

// ErrRead wraps a database's failure to read (an I/O error, corruption, a
// closed database) as a StoreBuffer reports it: the store's trouble, never
// the record's, so error policies that skip or dead-letter bad records
// leave it alone.
var ErrRead = errors.New("state: read failed")

// Fatal is the value a backend panics with when its store cannot go on
// (Pebble's fatal errors: a failed write-ahead-log write, a broken
// invariant). It is never recovered as a record's failure: the process
// must crash and restart on what is durable.
type Fatal struct{ Msg string }

func (f Fatal) Error() string { return f.Msg }

// ErrClosed is returned by a DB used after Close.
var ErrClosed = errors.New("state: database closed")

// ErrCorrupt wraps an error that means the database cannot be trusted
// (checksum mismatch, missing file, unreadable metadata). The runtime reacts
// by discarding the database and rebuilding it from the changelog.
var ErrCorrupt = errors.New("state: database corrupt")

// ErrFormat wraps the error of a backend that meets a task database in a
// format it cannot read: one written by a newer eddy (formats only grow,
// and an older eddy would misread a newer one), or by one too old to
// migrate. The error names the database's format, the formats this eddy
// reads, and what to do. Unlike ErrCorrupt, the runtime does not discard
// such a database by itself: an operator who downgraded eddy by mistake
// gets to upgrade again instead of paying a rebuild.
var ErrFormat = errors.New("eddy: unsupported state format")

// TopicPartition names one partition of one topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// Offsets are the positions that a database's content reflects. They are
// written in the same atomic batch as the state they describe.
type Offsets struct {
	// Input is, per source partition of the task, the offset of the next
	// record to consume: every record before it has changed the state.
	Input map[TopicPartition]int64
	// Changelog is, per store, the offset of the next changelog record
	// after the last one the database holds (the changelog partition is
	// the task's partition). Restore replays from there.
	Changelog map[string]int64
	// StreamTime is the task's stream time (docs/design.md §5): the largest
	// record timestamp, in ms since the epoch, that the state reflects, or
	// NoStreamTime before the first record.
	StreamTime int64
}

// NoStreamTime is the stream time of a task that has seen no record.
const NoStreamTime int64 = math.MinInt64

// NewOffsets returns the offsets of an empty database: no input, no
// changelog, no stream time.
func NewOffsets() Offsets {
	return Offsets{Input: map[TopicPartition]int64{}, Changelog: map[string]int64{}, StreamTime: NoStreamTime}
}

// Clone returns a deep copy of o.
func (o Offsets) Clone() Offsets {
	c := Offsets{
		Input:      make(map[TopicPartition]int64, len(o.Input)),
		Changelog:  make(map[string]int64, len(o.Changelog)),
		StreamTime: o.StreamTime,
	}
	for k, v := range o.Input {
		c.Input[k] = v
	}
	for k, v := range o.Changelog {
		c.Changelog[k] = v
	}
	return c
}

// Write is one change to one key of one store. A nil Value with Delete set
// removes the key.
type Write struct {
	Store  string
	Key    []byte
	Value  []byte
	Delete bool
}

// DeleteRange removes every key of Store in [Lower, Upper). Window stores
// use it to drop a whole expired time segment at once (docs/design.md §5). A nil
// Lower means from the store's first key; a nil or empty Upper means to the
// end of the store (an empty upper bound would otherwise always make an empty
// range). A range with Upper <= Lower is empty and removes nothing. Only Store
// is touched, whatever the bounds: other stores' keys, including those of a
// store whose name extends this one's ("ab" for "a"), are out of reach.
type DeleteRange struct {
	Store        string
	Lower, Upper []byte
}

// Batch is what a committed transaction changed in one task's database.
type Batch struct {
	Writes []Write
	// Ranges are applied BEFORE Writes in the same atomic batch, so a key
	// written by this batch survives a range that covers it. That is the
	// order of a transaction that dropped a range and then wrote into it
	// (Buffer.Ranges and Buffer.Writes describe the buffer that way).
	Ranges []DeleteRange
	// Offsets replace the database's offsets in the same atomic write.
	Offsets Offsets
}

// DB is the durable state of one task. Implementations are used by one
// goroutine at a time; they need not be safe for concurrent use.
type DB interface {
	// Get returns the value of key in store. The returned slice belongs to
	// the caller (it stays valid after later calls).
	Get(store string, key []byte) (value []byte, ok bool, err error)
	// Scan calls fn for each key of store in [lower, upper) in ascending
	// byte order; a nil upper means no upper bound. The slices passed to fn
	// are valid only during the call and must not be modified (they may
	// alias the backend's own memory). An error from fn stops the scan and
	// is returned.
	Scan(store string, lower, upper []byte, fn func(key, value []byte) error) error
	// Apply writes b atomically and durably (synced): after it returns nil,
	// a crash leaves either all of b (its ranges, its writes and its
	// offsets) or, had it failed, none of them.
	Apply(b *Batch) error
	// Offsets returns the offsets stored by the last Apply, or NewOffsets()
	// for a new database (so a new task starts at NoStreamTime, not at the
	// epoch). The maps are never nil.
	Offsets() (Offsets, error)
	// Close releases the database. Data applied before stays on disk.
	Close() error
}

// BackgroundApplier is implemented by databases that can apply a batch on
// another goroutine while their owner goes on: ApplyInBackground returns
// once it has copied b (the caller may reuse b's memory at once), and
// every other method of the database, but SharedReader's, first waits for
// that apply to finish, returning its error if it failed (and so does
// every call after: nothing is applied over a batch that failed). A task
// commits this way: its next transaction starts while the last one's
// state goes into the database, which is only a cache of the changelog.
// state/pebble's and state/rocksdb's databases implement it.
type BackgroundApplier interface {
	ApplyInBackground(b *Batch) error
}

// SharedReader is implemented by databases whose reads may run on other
// goroutines while the task's goroutine uses the database (reads, Apply,
// Checkpoint), but never concurrently with Close: interactive queries read
// a running task's committed state through it, and the runtime keeps Close
// waiting until they are done. state/pebble's databases implement it.
type SharedReader interface {
	// SharedGet is DB.Get.
	SharedGet(store string, key []byte) (value []byte, ok bool, err error)
	// SharedScan is DB.Scan; it sees a consistent view of the database
	// as of its start.
	SharedScan(store string, lower, upper []byte, fn func(key, value []byte) error) error
}

// Backend opens task databases. Dir is a directory owned by one task.
type Backend interface {
	Open(dir string) (DB, error)
	// Destroy removes the database in dir, for a rebuild from the changelog.
	Destroy(dir string) error
}

// Checkpointer is implemented by databases that can copy themselves for
// remote checkpoints (package checkpoint); state/pebble's do. It is a
// separate interface so that a backend without it (the in-memory one)
// still is a Backend: the runtime then takes no checkpoints.
type Checkpointer interface {
	// Checkpoint writes a consistent copy of the database into dir, which
	// must not exist and must be on the database's file system (Pebble
	// hard-links its tables there rather than copying them). The copy
	// holds what the database held when Checkpoint was called, offsets
	// included, and opens with the Backend's Open. Like every DB method
	// it is not called concurrently with Apply.
	Checkpoint(dir string) error
}

// CheckpointPreparer is implemented by backends whose databases are
// Checkpointers (state/pebble's).
type CheckpointPreparer interface {
	// PrepareCheckpoint readies the checkpoint in dir for upload and
	// returns the offsets it holds, read from it rather than taken from
	// what its database was told. It opens the checkpoint as a restore
	// will, which proves that it opens, and does here, once and off the
	// restore's path, the work that open does (Pebble writes the log into
	// a table and, if its level 0 then holds several, compacts them).
	PrepareCheckpoint(dir string) (Offsets, error)
}
