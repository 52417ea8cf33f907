package runtime

import (
	"fmt"
	"log/slog"

	"github.com/eddy-streams/eddy/state"
)

// TaskState is a task's state core: its database, the write buffer of the
// open transaction, the stream time, the input positions and the offsets
// the database reflects, and the commit and rollback of a transaction.
// Three owners run one per task: the runtime's task (which logs the
// buffer's writes to the changelog inside a Kafka transaction and commits
// the state once that transaction has committed), eddytest's driver and
// the in-process runner (which commit when they decide).
//
// It implements the parts of TaskContext that do not depend on its owner;
// the owner embeds it and adds Produce, GlobalStore and WallClock. It is
// used by one goroutine at a time.
type TaskState struct {
	id     TaskID
	log    *slog.Logger
	stores map[string]bool // declared store names
	db     state.DB
	buf    *state.Buffer
	// cache is the budget the buffer's cache of committed values shares
	// with the other tasks' (nil: a budget of the buffer's own).
	cache *state.CacheBudget
	// maxWrite bounds a write's key and value (LimitWrites).
	maxWrite int

	// committed is what db reflects: input offsets, stream time and, per
	// store, the next changelog offset.
	committed state.Offsets
	// streamTime is the open transaction's stream time.
	streamTime int64
	// sources[i] is the i-th input partition; next[i] is the offset after
	// the last record consumed in the open transaction, skip[i] the
	// committed input offset below which records are already in the state.
	sources []state.TopicPartition
	next    []int64
	skip    []int64

	// writes and ranges are the buffer's dirty writes and range deletes,
	// taken once per commit (the runtime logs writes to the changelog
	// before it applies them).
	writes []state.Write
	ranges []state.DeleteRange
}

// NewTaskState returns the state core of task id over db, which holds
// stores, at the stream time and offsets db reflects. sources are the
// task's input partitions, whose consumed offsets each commit records.
// cache is the budget its write buffer's cache shares (nil: its own).
func NewTaskState(id TaskID, stores []Store, sources []state.TopicPartition, db state.DB, cache *state.CacheBudget, log *slog.Logger) (*TaskState, error) {
	t := &TaskState{cache: cache}
	t.init(id, stores, sources, log)
	if err := t.attach(db); err != nil {
		return nil, err
	}
	t.resume(false)
	return t, nil
}

// init sets what does not depend on the database.
func (t *TaskState) init(id TaskID, stores []Store, sources []state.TopicPartition, log *slog.Logger) {
	t.id, t.log = id, log.With("task", id.String())
	t.stores = make(map[string]bool, len(stores))
	for _, s := range stores {
		t.stores[s.Name] = true
	}
	t.sources = sources
	t.next = make([]int64, len(sources))
	t.skip = make([]int64, len(sources))
}

// attach takes db as the task's database, with the offsets it holds.
func (t *TaskState) attach(db state.DB) error {
	offsets, err := db.Offsets()
	if err != nil {
		return fmt.Errorf("eddy: task %s: read offsets: %w", t.id, err)
	}
	t.db, t.committed = db, offsets
	return nil
}

// resume starts processing at what the database reflects (or, with
// ignoreInputs, at the group's offsets: every input record is new) and
// opens the write buffer.
func (t *TaskState) resume(ignoreInputs bool) {
	for i, tp := range t.sources {
		t.skip[i] = 0
		if !ignoreInputs {
			t.skip[i] = t.committed.Input[tp]
		}
		t.next[i] = t.skip[i]
	}
	t.streamTime = t.committed.StreamTime
	t.buf = state.NewBuffer(t.db, t.cache)
	t.buf.LimitWrites(t.maxWrite)
}

// LimitWrites bounds a state write's key and value to n bytes, the largest
// changelog record its owner produces (MaxRecordBytes): a larger write
// fails in the typed store, with the record that made it.
func (t *TaskState) LimitWrites(n int) {
	t.maxWrite = n
	if t.buf != nil {
		t.buf.LimitWrites(n)
	}
}

func (t *TaskState) ID() TaskID           { return t.id }
func (t *TaskState) Logger() *slog.Logger { return t.log }
func (t *TaskState) StreamTime() int64    { return t.streamTime }

func (t *TaskState) AdvanceStreamTime(ts int64) {
	if ts > t.streamTime {
		t.streamTime = ts
	}
}

func (t *TaskState) Store(name string) (*state.StoreBuffer, error) {
	if !t.stores[name] {
		return nil, fmt.Errorf("eddy: store %q is not declared in sub-topology %d; pass it to the processor that uses it", name, t.id.Subtopology)
	}
	return t.buf.Store(name), nil
}

// Buffer is the task's write buffer, for tools that read its stores.
func (t *TaskState) Buffer() *state.Buffer { return t.buf }

// Input returns the committed offset of input partition tp: the offset of
// the first record the state does not reflect.
func (t *TaskState) Input(tp state.TopicPartition) int64 { return t.committed.Input[tp] }

// Consume records that the open transaction consumed input i up to next
// (exclusive). It reports false when the record before next is already in
// the state (a replay after a rewind): the caller skips it.
func (t *TaskState) Consume(i int, next int64) bool {
	if next <= t.next[i] {
		return false
	}
	t.next[i] = next
	return true
}

// takeWrites takes the open transaction's writes from the buffer, for the
// changelog; Commit applies them.
func (t *TaskState) takeWrites() []state.Write {
	t.writes = t.buf.Writes(t.writes[:0])
	return t.writes
}

// Commit applies the open transaction to the database in one batch: its
// writes and range deletes, with the consumed input offsets and the stream
// time they reflect (and the changelog offsets the owner set in
// committed.Changelog). On error the database may not hold the
// transaction and the owner must not go on as if it did.
func (t *TaskState) Commit() error {
	t.takeWrites()
	return t.apply()
}

// apply is Commit with the writes already taken (by the runtime's
// changelog step).
func (t *TaskState) apply() error {
	t.ranges = t.buf.Ranges(t.ranges[:0])
	for i, tp := range t.sources {
		t.committed.Input[tp] = t.next[i]
	}
	t.committed.StreamTime = t.streamTime
	// In the background where the database can: it copies the batch, and
	// the next transaction starts while the engine inserts this one (a
	// fifth of a task's commit at a million keys). A failure comes back
	// from the database's next call, before it can serve a read or take
	// a batch that assumes this one.
	b := &state.Batch{Writes: t.writes, Ranges: t.ranges, Offsets: t.committed}
	var err error
	if bg, ok := t.db.(state.BackgroundApplier); ok {
		err = bg.ApplyInBackground(b)
	} else {
		err = t.db.Apply(b)
	}
	t.clear()
	if err != nil {
		return fmt.Errorf("eddy: task %s: apply committed state: %w", t.id, err)
	}
	copy(t.skip, t.next)
	t.buf.Commit()
	return nil
}

// hasRanges reports whether the open transaction deleted a range (a
// punctuator dropping expired segments writes nothing else).
func (t *TaskState) hasRanges() bool {
	t.ranges = t.buf.Ranges(t.ranges[:0])
	return len(t.ranges) > 0
}

// Rollback drops the open transaction's work: writes, stream time and
// consumed input positions go back to what the database reflects.
func (t *TaskState) Rollback() {
	copy(t.next, t.skip)
	t.streamTime = t.committed.StreamTime
	if t.buf != nil {
		t.buf.Reset()
	}
	t.clear()
}

func (t *TaskState) clear() {
	clear(t.writes)
	t.writes = t.writes[:0]
	clear(t.ranges)
	t.ranges = t.ranges[:0]
}

// Close drops uncommitted work and closes the database; the owner closes
// the processors first.
func (t *TaskState) Close() error {
	t.Rollback()
	if t.buf != nil {
		t.buf.Close() // gives its cache's memory back to the budget
	}
	return t.db.Close()
}
