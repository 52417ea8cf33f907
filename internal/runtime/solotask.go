package runtime

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/eddy-streams/eddy/state"
)

// SoloTask is a task run outside a worker, committed when its owner says:
// eddytest's driver (a commit per piped record) and the in-process runner
// (internal/local, a commit per interval). It holds the task's database,
// write buffer and stream time, and implements the parts of TaskContext
// that do not depend on its owner; the owner embeds it and adds Produce,
// GlobalStore and WallClock.
type SoloTask struct {
	// Proc is the task's processors, set by the owner once it can pass
	// itself to the sub-topology's NewTask.
	Proc       TaskProcessor
	id         TaskID
	stores     map[string]bool
	db         state.DB
	buf        *state.Buffer
	log        *slog.Logger
	streamTime int64
	committed  state.Offsets
	writes     []state.Write
	ranges     []state.DeleteRange
}

// NewSoloTask returns the task id of sub over db, at the stream time and
// offsets db holds.
func NewSoloTask(id TaskID, sub Subtopology, db state.DB, log *slog.Logger) (*SoloTask, error) {
	offsets, err := db.Offsets()
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	t := &SoloTask{id: id, stores: make(map[string]bool), db: db, buf: state.NewBuffer(db),
		log: log.With("task", id.String()), streamTime: offsets.StreamTime, committed: offsets}
	for _, s := range sub.Stores {
		t.stores[s.Name] = true
	}
	return t, nil
}

func (t *SoloTask) ID() TaskID           { return t.id }
func (t *SoloTask) Logger() *slog.Logger { return t.log }
func (t *SoloTask) StreamTime() int64    { return t.streamTime }

func (t *SoloTask) AdvanceStreamTime(ts int64) {
	if ts > t.streamTime {
		t.streamTime = ts
	}
}

func (t *SoloTask) Store(name string) (*state.StoreBuffer, error) {
	if !t.stores[name] {
		return nil, fmt.Errorf("store %q is not declared in sub-topology %d", name, t.id.Subtopology)
	}
	return t.buf.Store(name), nil
}

// Buffer is the task's write buffer, for tools that read its stores.
func (t *SoloTask) Buffer() *state.Buffer { return t.buf }

// Input reads the committed input offset of tp.
func (t *SoloTask) Input(tp state.TopicPartition) int64 { return t.committed.Input[tp] }

// Commit applies the open transaction's writes to the database in one
// batch, with the stream time and, when input is not nil, the input offset
// the state then reflects.
func (t *SoloTask) Commit(input *state.TopicPartition, next int64) error {
	t.writes = t.buf.Writes(t.writes[:0])
	t.ranges = t.buf.Ranges(t.ranges[:0])
	if input != nil {
		t.committed.Input[*input] = next
	}
	t.committed.StreamTime = t.streamTime
	err := t.db.Apply(&state.Batch{Writes: t.writes, Ranges: t.ranges, Offsets: t.committed})
	clear(t.writes)
	clear(t.ranges)
	if err != nil {
		return fmt.Errorf("task %s: commit: %w", t.id, err)
	}
	t.buf.Commit()
	return nil
}

// Rollback drops the open transaction's work.
func (t *SoloTask) Rollback() {
	t.buf.Reset()
	t.streamTime = t.committed.StreamTime
}

// Close drops uncommitted work and closes the processors and the database.
func (t *SoloTask) Close() error {
	t.Rollback()
	var errs []error
	if t.Proc != nil {
		errs = append(errs, t.Proc.Close())
	}
	return errors.Join(append(errs, t.db.Close())...)
}
