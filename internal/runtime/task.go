package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/state"
)

// task is partition p of the sources of one sub-topology, partition p of
// its stores' changelogs, and its processors. It is used by its worker's goroutine only (rebalance callbacks
// run serialized with processing, see worker).
type task struct {
	// TaskState is the task's database, write buffer, stream time and
	// offsets; the task adds the changelog and the worker's transaction.
	TaskState
	sub  *subPlan
	dir  string
	proc TaskProcessor

	// What the task needs of its worker, and nothing more: the open
	// transaction to produce into, the wall clock of the current poll,
	// the global stores, and the backend its database lives in (which a
	// corrupt or stale database is destroyed from and reopened with).
	txn     producer
	clock   *int64
	globals *globals
	backend state.Backend
	// tableCache is the worker's table cache budget (nil: off).
	tableCache *TableCacheBudget

	// pending[i] are the current poll's records of source i, consumed
	// from pendingAt[i] on; polled marks the task as listed in the
	// worker's polled tasks (see route). A task with several sources
	// keeps its records across polls, in timestamp order (align; nil for
	// a task with one source, or when Config.MaxTaskIdle is negative).
	pending   [][]*kgo.Record
	pendingAt []int
	polled    bool
	align     *alignment

	// end is what the task knows of its end in a bounded run
	// (bounded.go); nil otherwise.
	end *taskEnd

	// corrupt is set when the database reported corruption while the
	// task ran: close discards it.
	corrupt bool

	// dirty is set once the open transaction processed a record here, or
	// a punctuator wrote or produced.
	dirty bool
	// logged are the changelog records of the open transaction and
	// loggedStore[i] the index (in topology Stores) of logged[i]'s store.
	logged      []*kgo.Record
	loggedStore []int
	// scratch holds encoded offsets records.
	scratch []byte
	// view is what queries read, set while the task is queryable.
	view *taskView
	// status is the task's entry on its worker's status board.
	status *boardTask
	// assignedAt is when the task was installed, until its first
	// committed transaction (logged with the time since: how long a
	// task that moved was unavailable once it arrived).
	assignedAt time.Time
	// m are the task's metrics (metrics.go).
	m taskMetrics
}

// producer produces a record into the open transaction: the worker's,
// which step begins before anything can produce. partition < 0 means the
// partitioner chooses from the key.
type producer interface {
	produceRecord(topic string, partition int32, key, value []byte, ts int64, headers []kgo.RecordHeader) (*kgo.Record, error)
}

func (t *task) WallClock() int64 { return *t.clock }

func (t *task) TableCache() *TableCacheBudget { return t.tableCache }

func (t *task) GlobalStore(name string) (GlobalReader, error) { return t.globals.store(name) }

func (t *task) Produce(topic string, key, value []byte, timestamp int64, headers []kgo.RecordHeader) error {
	t.m.produced++
	_, err := t.txn.produceRecord(topic, -1, key, value, timestamp, headers)
	return err
}

func (t *task) ProduceTo(topic string, partition int32, key, value []byte, timestamp int64, headers []kgo.RecordHeader) error {
	if partition < 0 {
		return fmt.Errorf("eddy: produce to %s: partition %d", topic, partition)
	}
	t.m.produced++
	_, err := t.txn.produceRecord(topic, partition, key, value, timestamp, headers)
	return err
}

// openTask opens (creating it if needed) the task's database, restores it
// from the changelog and instantiates the processors.
func (w *worker) openTask(ctx context.Context, id TaskID) (_ *task, err error) {
	t := &task{
		txn: w, clock: &w.wallClock, globals: w.globals, backend: w.cfg.Backend, tableCache: w.tableCache,
		sub:    &w.plan.subs[id.Subtopology],
		dir:    filepath.Join(w.cfg.StateDir, w.cfg.AppID, id.String()),
		status: w.board.open(id),
	}
	defer func() {
		if err != nil {
			w.board.closed(id, t.status)
		}
	}()
	sources := make([]state.TopicPartition, len(t.sub.Sources))
	for i, topic := range t.sub.Sources {
		sources[i] = state.TopicPartition{Topic: topic, Partition: id.Partition}
	}
	t.init(id, t.sub.Stores, sources, w.log)
	t.cache = w.cfg.StateCache
	t.pending = make([][]*kgo.Record, len(t.sources))
	t.pendingAt = make([]int, len(t.sources))
	if w.aligns() && len(t.sources) > 1 {
		t.align = newAlignment(len(t.sources), w.cfg.MaxTaskIdle)
	}
	t.openMetrics(w.cfg.Metrics)
	defer func() {
		if err != nil {
			t.closeMetrics()
		}
	}()
	if err := os.MkdirAll(t.dir, 0o700); err != nil {
		return nil, fmt.Errorf("eddy: task %s: %w", id, err)
	}
	if db, offsets, ok := w.standbys.handOver(id); ok {
		// This process's standby of the task: open and caught up.
		t.db, t.committed = db, offsets
	} else if err := t.openDB(); err != nil {
		return nil, err
	}
	if len(t.sub.storeNames) > 0 {
		err := w.restoreTask(ctx, t)
		if errors.Is(err, errStateAhead) {
			// The database claims more than the changelog holds: it is
			// from another life of the topic. Rebuild it (from a
			// checkpoint that is not ahead, then the changelog).
			t.log.Warn("local state is ahead of its changelog; rebuilding it", "err", err)
			if err = t.rebuildDB(); err == nil {
				err = w.restoreTask(ctx, t)
			}
		}
		if err != nil {
			if t.db != nil {
				t.db.Close()
			}
			return nil, fmt.Errorf("eddy: task %s: restore: %w", id, err)
		}
	}
	t.maxWrite = cmp.Or(w.cfg.MaxRecordBytes, DefaultMaxRecordBytes) // a changelog record's bound
	t.resume(w.cfg.IgnoreStateOffsets)
	proc, err := t.sub.NewTask(t)
	if err != nil {
		t.db.Close()
		return nil, permanent(fmt.Errorf("eddy: task %s: build processors: %w", id, err))
	}
	t.proc = proc
	if w.cfg.Bounded {
		if err := t.openEnd(); err != nil {
			proc.Close()
			t.db.Close()
			return nil, fmt.Errorf("eddy: task %s: %w", id, err)
		}
	}
	t.runMetrics(w.cfg.Metrics)
	return t, nil
}

// openDB opens the database, discarding it when the backend reports it
// corrupt (the changelog is the truth; docs/design.md §4).
func (t *task) openDB() error {
	db, err := t.backend.Open(t.dir)
	if errors.Is(err, state.ErrCorrupt) {
		t.log.Warn("local state is corrupt; rebuilding it (from the newest checkpoint if checkpoints are on, then the changelog)", "err", err)
		if err = t.backend.Destroy(t.dir); err == nil {
			db, err = t.backend.Open(t.dir)
		}
	}
	if err != nil {
		return fmt.Errorf("eddy: task %s: open state: %w", t.id, err)
	}
	if err := t.attach(db); err != nil {
		db.Close()
		return err
	}
	return nil
}

// restoreTask brings t's database up to the changelog's end: from the
// newest remote checkpoint first when the database is empty (a fresh
// machine, a wiped directory, a database discarded as corrupt) and
// checkpoints are on, then from the changelog records after what the
// database reflects.
func (w *worker) restoreTask(ctx context.Context, t *task) error {
	if w.ckpt != nil && isEmpty(t.committed) {
		if _, err := w.ckpt.restore(ctx, t, w.cl); err != nil {
			return err
		}
	}
	return w.restore(ctx, t)
}

// isEmpty reports whether offsets are those of a database that never
// applied a batch.
func isEmpty(o state.Offsets) bool {
	return len(o.Input) == 0 && len(o.Changelog) == 0 && o.StreamTime == state.NoStreamTime
}

func (t *task) rebuildDB() error {
	t.db.Close()
	if err := t.backend.Destroy(t.dir); err != nil {
		return err
	}
	return t.openDB()
}

// process runs the topology on r, turning a panic in user code into an
// error: a panic must not leave the worker with rebalances blocked and the
// transaction open.
func (t *task) process(r *kgo.Record) (err error) {
	defer recoverPanic(&err)
	return t.proc.Process(r)
}

// flush forwards what f, the task's processors, hold back, turning a
// panic into an error as process does.
func (t *task) flush(f TaskFlusher) (err error) {
	defer recoverPanic(&err)
	return f.Flush()
}

// punctuate runs the task's wall-clock punctuators, turning a panic into
// an error as process does.
func (t *task) punctuate(now time.Time) (err error) {
	defer recoverPanic(&err)
	return t.proc.Punctuate(now)
}

// recoverPanic turns a panic of a task's processors into *err, the failure
// of the open transaction, except a state.Fatal: the store cannot go on, so
// the process must crash and restart on what is durable (state.Fatal's
// promise), and it panics again with the value unchanged.
func recoverPanic(err *error) {
	p := recover()
	if p == nil {
		return
	}
	if _, fatal := p.(state.Fatal); fatal {
		panic(p)
	}
	*err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
}

// sourceIndex returns the index of topic among the task's sources.
func (t *task) sourceIndex(topic string) int {
	for i := range t.sources {
		if t.sources[i].Topic == topic {
			return i
		}
	}
	return -1
}

// logChangelog produces the open transaction's dirty keys, then one offsets
// record per store, to the task's changelog partitions (docs/design.md §3 step 2).
func (t *task) logChangelog() error {
	writes := t.takeWrites()
	t.logged, t.loggedStore = t.logged[:0], t.loggedStore[:0]
	// Changelog records carry the wall clock, not the records' event
	// time: a changelog with a delete policy (a window store's) expires
	// by it, and an event time may be far in the past (or 0, the epoch).
	now := time.Now().UnixMilli()
	for i := range writes {
		wr := &writes[i]
		si := t.sub.storeIndex[wr.Store]
		var value []byte // nil: a tombstone
		if !wr.Delete {
			value = wr.Value
			if value == nil {
				value = []byte{} // an empty value is a value
			}
		}
		r, err := t.txn.produceRecord(t.sub.changelogs[si], t.id.Partition, wr.Key, value, now, nil)
		if err != nil {
			return err
		}
		// From here on the write is the record's copy, which lies in order
		// in the transaction's arena, not in the buffer's slots spread over
		// the heap: applyCommitted's copy of the batch reads it faster
		// there, before the arena is reused.
		wr.Key, wr.Value = r.Key, r.Value
		t.logged, t.loggedStore = append(t.logged, r), append(t.loggedStore, si)
	}
	input := make(map[state.TopicPartition]int64, len(t.sources))
	for i, tp := range t.sources {
		input[tp] = t.next[i]
	}
	t.scratch = appendOffsetsRecord(t.scratch[:0], input, t.streamTime)
	for si, topic := range t.sub.changelogs {
		r, err := t.txn.produceRecord(topic, t.id.Partition, []byte(offsetsRecordKey), t.scratch, now, offsetsHeader)
		if err != nil {
			return err
		}
		t.logged, t.loggedStore = append(t.logged, r), append(t.loggedStore, si)
	}
	t.m.h.Changelog.Add(float64(len(t.logged)))
	return nil
}

var offsetsHeader = []kgo.RecordHeader{{Key: offsetsHeaderKey, Value: []byte{offsetsFormatV2}}}

// applyCommitted writes the committed transaction's state and offsets to the
// database in one batch (docs/design.md §3 step 4).
func (t *task) applyCommitted() error {
	for i, r := range t.logged {
		store := t.sub.storeNames[t.loggedStore[i]]
		if r.Offset+1 > t.committed.Changelog[store] {
			t.committed.Changelog[store] = r.Offset + 1
		}
	}
	t.status.streamTime.Store(t.streamTime)
	if err := t.apply(); err != nil {
		return err
	}
	if t.view != nil {
		t.view.streamTime.Store(t.streamTime)
	}
	t.reset()
	return nil
}

// recordChangelogEnds stores the changelog end offsets when they are past
// what the database records only by the commit markers of the task's own
// last transaction (one marker per transaction and partition).
func (t *task) recordChangelogEnds(ends kadm.ListedOffsets) error {
	changed := false
	for i, store := range t.sub.storeNames {
		end, ok := ends.Lookup(t.sub.changelogs[i], t.id.Partition)
		if ok && end.Offset == t.committed.Changelog[store]+1 {
			t.committed.Changelog[store] = end.Offset
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if err := t.db.Apply(&state.Batch{Offsets: t.committed}); err != nil {
		return fmt.Errorf("eddy: task %s: record changelog ends: %w", t.id, err)
	}
	return nil
}

// rollback drops the open transaction's work after an abort (§3 step 5),
// and the records the task held: the abort rewound the consumer to the
// committed offsets, which are before them.
func (t *task) rollback() {
	t.Rollback()
	t.reset()
	t.dropHeld()
	if f, ok := t.proc.(TaskFlusher); ok {
		f.Discard() // the held updates belong to the aborted transaction
	}
	if t.end != nil {
		if err := t.end.load(t); err != nil {
			// The next transaction reads the store again: its error
			// comes back there, with the record.
			t.log.Warn("bounded run: reload the task's end", "err", err)
		}
	}
}

func (t *task) reset() {
	t.dirty = false
	clear(t.logged)
	t.logged, t.loggedStore = t.logged[:0], t.loggedStore[:0]
}

// closeTask drops t's uncommitted work and releases its processors and
// database.
func (w *worker) closeTask(t *task) error {
	w.board.set(t.status, TaskClosing)
	defer w.board.closed(t.id, t.status)
	t.rollback()
	var errs []error
	if t.proc != nil {
		errs = append(errs, t.proc.Close())
	}
	t.closeMetrics()    // before the database closes: a scrape may read it
	w.queries.remove(t) // waits for the queries reading db
	if t.buf != nil {
		t.buf.Close() // gives its cache's memory back to the budget
	}
	errs = append(errs, t.db.Close())
	if t.corrupt {
		// Found corrupt while it ran (a damaged block read by a Get or
		// a scan): the next open rebuilds it from the changelog.
		t.log.Warn("local state is corrupt; discarding it, the next open rebuilds it (from the newest checkpoint if checkpoints are on, then the changelog)")
		errs = append(errs, t.backend.Destroy(t.dir))
	}
	// Only now may this process's standby of the task reopen the database.
	w.standbys.release(t.id)
	return errors.Join(errs...)
}

// corrupted marks the task's database as corrupt and returns the error
// that ends the session: the open transaction aborts, the task closes and
// discards its database, and the next session restores it.
func (t *task) corrupted(err error) error {
	t.corrupt = true
	return fmt.Errorf("eddy: task %s: %w", t.id, err)
}
