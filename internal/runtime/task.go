package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	w    *worker
	sub  *subPlan
	id   TaskID
	dir  string
	log  *slog.Logger
	db   state.DB
	buf  *state.Buffer
	proc TaskProcessor

	// committed is what db reflects: input offsets and, per store, the
	// next changelog offset.
	committed state.Offsets
	// sources[i] is the i-th source partition; next[i] is the offset after
	// the last record processed in the open transaction, skip[i] the
	// committed input offset below which records are already in the state.
	sources []state.TopicPartition
	next    []int64
	skip    []int64

	// streamTime is the open transaction's stream time; committed holds
	// the committed one.
	streamTime int64

	// pending[i] are the current poll's records of source i, consumed
	// from pendingAt[i] on; polled marks the task as listed in the
	// worker's polled tasks (see route).
	pending   [][]*kgo.Record
	pendingAt []int
	polled    bool

	// corrupt is set when the database reported corruption while the
	// task ran: close discards it.
	corrupt bool

	// dirty is set once the open transaction processed a record here, or
	// a punctuator wrote or produced.
	dirty bool
	// writes are the buffer's dirty writes, taken once per commit: sent to
	// the changelog, then applied to db if the transaction committed.
	writes []state.Write
	// ranges are the buffer's range deletes (expired window segments),
	// applied with writes; they are not logged (see state.Buffer).
	ranges []state.DeleteRange
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

func (t *task) ID() TaskID           { return t.id }
func (t *task) Logger() *slog.Logger { return t.log }
func (t *task) Store(name string) (*state.StoreBuffer, error) {
	if _, ok := t.sub.storeIndex[name]; !ok {
		return nil, fmt.Errorf("eddy: store %q is not declared in sub-topology %d; pass it to the processor that uses it", name, t.sub.index)
	}
	return t.buf.Store(name), nil
}

func (t *task) StreamTime() int64 { return t.streamTime }

func (t *task) WallClock() int64 { return t.w.wallClock }

func (t *task) AdvanceStreamTime(ts int64) {
	if ts > t.streamTime {
		t.streamTime = ts
	}
}

func (t *task) GlobalStore(name string) (GlobalReader, error) { return t.w.globals.store(name) }

func (t *task) Produce(topic string, key, value []byte, timestamp int64, headers []kgo.RecordHeader) error {
	t.m.produced++
	_, err := t.w.produceRecord(topic, -1, key, value, timestamp, headers)
	return err
}

// openTask opens (creating it if needed) the task's database, restores it
// from the changelog and instantiates the processors.
func (w *worker) openTask(ctx context.Context, id TaskID) (_ *task, err error) {
	t := &task{
		w:      w,
		sub:    &w.plan.subs[id.Subtopology],
		id:     id,
		dir:    filepath.Join(w.cfg.StateDir, w.cfg.AppID, id.String()),
		log:    w.log.With("task", id.String()),
		status: w.board.open(id),
	}
	defer func() {
		if err != nil {
			w.board.closed(id, t.status)
		}
	}()
	for _, topic := range t.sub.Sources {
		t.sources = append(t.sources, state.TopicPartition{Topic: topic, Partition: id.Partition})
	}
	t.next = make([]int64, len(t.sources))
	t.skip = make([]int64, len(t.sources))
	t.pending = make([][]*kgo.Record, len(t.sources))
	t.pendingAt = make([]int, len(t.sources))
	t.openMetrics()
	defer func() {
		if err != nil {
			t.closeMetrics()
		}
	}()
	if err := os.MkdirAll(t.dir, 0o700); err != nil {
		return nil, fmt.Errorf("eddy: task %s: %w", id, err)
	}
	if err := t.openDB(); err != nil {
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
	for i, tp := range t.sources {
		if !w.cfg.IgnoreStateOffsets {
			t.skip[i] = t.committed.Input[tp]
		}
		t.next[i] = t.skip[i]
	}
	t.streamTime = t.committed.StreamTime
	t.buf = state.NewBuffer(t.db)
	proc, err := t.sub.NewTask(t)
	if err != nil {
		t.db.Close()
		return nil, permanent(fmt.Errorf("eddy: task %s: build processors: %w", id, err))
	}
	t.proc = proc
	t.runMetrics()
	return t, nil
}

// openDB opens the database, discarding it when the backend reports it
// corrupt (the changelog is the truth; DESIGN.md §4).
func (t *task) openDB() error {
	if db, offsets, ok := t.w.standbys.handOver(t.id); ok {
		// This process's standby of the task: open and caught up.
		t.db, t.committed = db, offsets
		return nil
	}
	db, err := t.w.cfg.Backend.Open(t.dir)
	if errors.Is(err, state.ErrCorrupt) {
		t.log.Warn("local state is corrupt; rebuilding it (from the newest checkpoint if checkpoints are on, then the changelog)", "err", err)
		if err = t.w.cfg.Backend.Destroy(t.dir); err == nil {
			db, err = t.w.cfg.Backend.Open(t.dir)
		}
	}
	if err != nil {
		return fmt.Errorf("eddy: task %s: open state: %w", t.id, err)
	}
	offsets, err := db.Offsets()
	if err != nil {
		db.Close()
		return fmt.Errorf("eddy: task %s: read offsets: %w", t.id, err)
	}
	t.db, t.committed = db, offsets
	return nil
}

// restoreTask brings t's database up to the changelog's end: from the
// newest remote checkpoint first when the database is empty (a fresh
// machine, a wiped directory, a database discarded as corrupt) and
// checkpoints are on, then from the changelog records after what the
// database reflects.
func (w *worker) restoreTask(ctx context.Context, t *task) error {
	if w.ckpt != nil && isEmpty(t.committed) {
		if _, err := w.ckpt.restore(ctx, t); err != nil {
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
	if err := t.w.cfg.Backend.Destroy(t.dir); err != nil {
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
// record per store, to the task's changelog partitions (DESIGN.md §3 step 2).
func (t *task) logChangelog() error {
	t.writes = t.buf.Writes(t.writes[:0])
	t.logged, t.loggedStore = t.logged[:0], t.loggedStore[:0]
	// Changelog records carry the wall clock, not the records' event
	// time: a changelog with a delete policy (a window store's) expires
	// by it, and a zero timestamp would leave it to the client.
	now := time.Now().UnixMilli()
	for i := range t.writes {
		wr := &t.writes[i]
		si := t.sub.storeIndex[wr.Store]
		var value []byte // nil: a tombstone
		if !wr.Delete {
			value = wr.Value
			if value == nil {
				value = []byte{} // an empty value is a value
			}
		}
		r, err := t.w.produceRecord(t.sub.changelogs[si], t.id.Partition, wr.Key, value, now, nil)
		if err != nil {
			return err
		}
		t.logged, t.loggedStore = append(t.logged, r), append(t.loggedStore, si)
	}
	input := make(map[state.TopicPartition]int64, len(t.sources))
	for i, tp := range t.sources {
		input[tp] = t.next[i]
	}
	t.scratch = appendOffsetsRecord(t.scratch[:0], input, t.streamTime)
	for si, topic := range t.sub.changelogs {
		r, err := t.w.produceRecord(topic, t.id.Partition, []byte(offsetsRecordKey), t.scratch, now, offsetsHeader)
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
// database in one batch (DESIGN.md §3 step 4).
func (t *task) applyCommitted() error {
	for i, tp := range t.sources {
		t.committed.Input[tp] = t.next[i]
	}
	t.committed.StreamTime = t.streamTime
	t.status.streamTime.Store(t.streamTime)
	for i, r := range t.logged {
		store := t.sub.storeNames[t.loggedStore[i]]
		if r.Offset+1 > t.committed.Changelog[store] {
			t.committed.Changelog[store] = r.Offset + 1
		}
	}
	t.ranges = t.buf.Ranges(t.ranges[:0])
	if err := t.db.Apply(&state.Batch{Writes: t.writes, Ranges: t.ranges, Offsets: t.committed}); err != nil {
		return fmt.Errorf("eddy: task %s: apply committed state: %w", t.id, err)
	}
	if t.view != nil {
		t.view.streamTime.Store(t.streamTime)
	}
	copy(t.skip, t.next)
	t.buf.Commit()
	t.reset()
	return nil
}

// hasRanges reports whether the open transaction deleted a range (a
// punctuator dropping expired segments writes nothing else).
func (t *task) hasRanges() bool {
	t.ranges = t.buf.Ranges(t.ranges[:0])
	return len(t.ranges) > 0
}

// recordChangelogEnds stores the changelog end offsets when they are past
// what the database records only by the commit markers of the task's own
// last transaction (one marker per transaction and partition).
func (t *task) recordChangelogEnds(ends kadm.ListedOffsets) error {
	changed := false
	for _, store := range t.sub.storeNames {
		end, ok := ends.Lookup(ChangelogTopic(t.w.cfg.AppID, store), t.id.Partition)
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

// rollback drops the open transaction's work after an abort (§3 step 5).
func (t *task) rollback() {
	copy(t.next, t.skip)
	t.streamTime = t.committed.StreamTime
	t.buf.Reset()
	t.reset()
}

func (t *task) reset() {
	t.dirty = false
	clear(t.writes)
	t.writes = t.writes[:0]
	clear(t.ranges)
	t.ranges = t.ranges[:0]
	clear(t.logged)
	t.logged, t.loggedStore = t.logged[:0], t.loggedStore[:0]
}

// close drops uncommitted work and releases the processors and the database.
func (t *task) close() error {
	t.w.board.set(t.status, TaskClosing)
	defer t.w.board.closed(t.id, t.status)
	t.rollback()
	var errs []error
	if t.proc != nil {
		errs = append(errs, t.proc.Close())
	}
	t.closeMetrics()      // before the database closes: a scrape may read it
	t.w.queries.remove(t) // waits for the queries reading db
	errs = append(errs, t.db.Close())
	if t.corrupt {
		// Found corrupt while it ran (a damaged block read by a Get or
		// a scan): the next open rebuilds it from the changelog.
		t.log.Warn("local state is corrupt; discarding it, the next open rebuilds it (from the newest checkpoint if checkpoints are on, then the changelog)")
		errs = append(errs, t.w.cfg.Backend.Destroy(t.dir))
	}
	// Only now may this process's standby of the task reopen the database.
	t.w.standbys.release(t.id)
	return errors.Join(errs...)
}

// corrupted marks the task's database as corrupt and returns the error
// that ends the session: the open transaction aborts, the task closes and
// discards its database, and the next session restores it.
func (t *task) corrupted(err error) error {
	t.corrupt = true
	return fmt.Errorf("eddy: task %s: %w", t.id, err)
}
