// Package local runs a topology inside this process without a broker: its
// input is an in-process Source replayable by index (a generator), its state
// is in a real backend (Pebble), and the commit cycle of DESIGN.md §3 runs
// on a timer, minus Kafka: at each commit every task's write buffer is
// applied to its database in one batch together with the source index it
// reflects, so a restart resumes where the state stands, as a Kafka
// partition's offset does. Records written to topics the topology reads
// (repartition topics) are processed in turn, first in, first out, after
// the source record that caused them; records written to any other topic go
// to the Sink. This is what `eddy bench nexmark --source generator`
// measures: the engine's own cost, without a broker.
package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/runtime"
	"github.com/eddy-streams/eddy/state"
)

// Source is an in-process input addressed by index, like a Kafka partition
// by offset: Read(i) returns the same record on every call, so the state's
// committed index is all a restart needs.
type Source interface {
	// Read fills r with record i: Topic, Key, Value, Timestamp. It returns
	// false if the record's topic is not among the topics the runner said
	// it reads (the source may skip generating it). r's byte slices may be
	// reused by the next Read.
	Read(i int64, r *kgo.Record) bool
	// Topics tells the source which topics the topology reads, once,
	// before the first Read.
	Topics(read []string)
}

// Sink receives each record written to a topic the topology does not read.
// Its slices are valid only during the call.
type Sink func(topic string, key, value []byte, timestamp int64)

// Config configures a Runner.
type Config struct {
	// Backend opens the tasks' databases, one per sub-topology under Dir.
	Backend state.Backend
	Dir     string
	// CommitInterval is the time between commits (default 1 s).
	CommitInterval time.Duration
	Sink           Sink
	Logger         *slog.Logger
}

// sourcePartition is the name the source index is stored under in each
// task's offsets.
var sourcePartition = state.TopicPartition{Topic: "local-source", Partition: 0}

// Runner runs one topology over one Source, each sub-topology as one task
// (partition 0). It is not safe for concurrent use.
type Runner struct {
	cfg      Config
	src      Source
	tasks    []*task
	bySource map[string]*task
	// next is the index of the next source record to read; committed is
	// the index the databases reflect.
	next, committed int64
	// queue holds records written to topics the topology reads, their
	// bytes carved from arena; both are reset once drained.
	queue []queued
	arena []byte
	// rec is the source's record; qrec carries queued records, apart, so
	// that a source reusing rec's slices never writes into the arena.
	rec, qrec kgo.Record
	// failed is set when a commit failed part way: the tasks' databases
	// may disagree, so the runner refuses more work.
	failed error
	// now is the wall clock (ms) that tasks read, refreshed once per
	// batch of records, as the runtime refreshes it once per poll.
	now int64
	// Commits counts the commits made.
	Commits int
}

type queued struct {
	topic      string
	key, value []byte
	timestamp  int64
	// nilKey and tombstone keep nil apart from empty, which the arena
	// cannot.
	nilKey, tombstone bool
}

// New opens a task per sub-topology of topo: its database under cfg.Dir and
// its processors. The source index to resume from is what every database
// records; databases that disagree (a crash between two tasks' commits) are
// refused rather than guessed at.
func New(topo runtime.Topology, src Source, cfg Config) (*Runner, error) {
	if cfg.Backend == nil || cfg.Dir == "" {
		return nil, errors.New("local: Config.Backend and Config.Dir are required")
	}
	if len(topo.Globals) > 0 {
		return nil, errors.New("local: global tables are not supported by the in-process runner; run the topology with a broker")
	}
	if cfg.CommitInterval <= 0 {
		cfg.CommitInterval = time.Second
	}
	if cfg.Sink == nil {
		cfg.Sink = func(string, []byte, []byte, int64) {}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	// The arena starts non-nil: slices of a nil one are nil, and an empty
	// key or value would come out as a null one (a tombstone).
	r := &Runner{cfg: cfg, src: src, bySource: make(map[string]*task), arena: make([]byte, 0, 4096)}
	var read []string
	for i, sub := range topo.Subtopologies {
		t, err := r.openTask(i, sub)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.tasks = append(r.tasks, t)
		for _, topic := range sub.Sources {
			r.bySource[topic] = t
			read = append(read, topic)
		}
	}
	for i, t := range r.tasks {
		at := t.Input(sourcePartition)
		if i == 0 {
			r.committed = at
		} else if at != r.committed {
			r.Close()
			return nil, fmt.Errorf("local: task %s reflects source index %d, task %s %d: the state in %s is torn; delete it to start over", r.tasks[0].ID(), r.committed, t.ID(), at, cfg.Dir)
		}
	}
	r.next = r.committed
	src.Topics(read)
	return r, nil
}

// Next returns the index of the next source record to process.
func (r *Runner) Next() int64 { return r.next }

// Run processes source records from Next up to end (exclusive), committing
// every CommitInterval and at the end. progress, if not nil, is called after
// each commit with the committed index. When processing fails, the open
// transaction's work is dropped: the state stays at the last commit and Run
// may be called again. When a commit fails, some tasks may have applied it
// and others not: the Runner refuses more work, and reopening the directory
// reports it torn.
func (r *Runner) Run(ctx context.Context, end int64, progress func(committed int64)) error {
	if r.failed != nil {
		return r.failed
	}
	last := time.Now()
	r.now = last.UnixMilli()
	for r.next < end {
		// The clock and the context are checked once per batch of
		// records, not per record.
		batchEnd := min(end, r.next+1024)
		for ; r.next < batchEnd; r.next++ {
			if err := r.one(r.next); err != nil {
				r.rollback()
				return err
			}
		}
		if err := ctx.Err(); err != nil {
			r.rollback()
			return err
		}
		now := time.Now()
		r.now = now.UnixMilli()
		if now.Sub(last) >= r.cfg.CommitInterval {
			if err := r.commit(now); err != nil {
				return err
			}
			last = now
			if progress != nil {
				progress(r.committed)
			}
		}
	}
	if err := r.commit(time.Now()); err != nil {
		return err
	}
	if progress != nil {
		progress(r.committed)
	}
	return nil
}

// one processes source record i and every record it leads to.
func (r *Runner) one(i int64) error {
	rec := &r.rec
	if !r.src.Read(i, rec) {
		return nil
	}
	t := r.bySource[rec.Topic]
	if t == nil {
		return nil
	}
	rec.Offset = i
	if err := t.process(rec); err != nil {
		return err
	}
	for k := 0; k < len(r.queue); k++ {
		q := &r.queue[k]
		q.fill(&r.qrec, i)
		if err := r.bySource[q.topic].process(&r.qrec); err != nil {
			return err
		}
	}
	r.drained()
	return nil
}

func (q *queued) fill(rec *kgo.Record, offset int64) {
	rec.Topic, rec.Key, rec.Value, rec.Timestamp, rec.Offset = q.topic, q.key, q.value, time.UnixMilli(q.timestamp), offset
	if q.nilKey {
		rec.Key = nil
	}
	if q.tombstone {
		rec.Value = nil
	}
}

func (r *Runner) drained() {
	clear(r.queue)
	r.queue, r.arena = r.queue[:0], r.arena[:0]
	r.qrec.Key, r.qrec.Value = nil, nil
}

// produce is every task's Produce: into the queue for a topic the topology
// reads, to the sink otherwise. Headers are not carried (the queries this
// runner measures set none).
func (r *Runner) produce(topic string, key, value []byte, timestamp int64) {
	if r.bySource[topic] == nil {
		r.cfg.Sink(topic, key, value, timestamp)
		return
	}
	// Earlier queued records keep their bytes when the arena grows: they
	// point into the old array, which stays alive through them.
	start := len(r.arena)
	r.arena = append(r.arena, key...)
	r.arena = append(r.arena, value...)
	mid := start + len(key)
	r.queue = append(r.queue, queued{
		topic: topic, key: r.arena[start:mid:mid], value: r.arena[mid:len(r.arena):len(r.arena)],
		timestamp: timestamp, nilKey: key == nil, tombstone: value == nil,
	})
}

// commit runs the wall-clock punctuators, then applies each task's writes
// with the source index and stream time they reflect.
func (r *Runner) commit(now time.Time) error {
	r.now = now.UnixMilli()
	for _, t := range r.tasks {
		if err := t.Proc.Punctuate(now); err != nil {
			r.rollback()
			return fmt.Errorf("local: task %s: punctuate: %w", t.ID(), err)
		}
	}
	for k := 0; k < len(r.queue); k++ { // records punctuators wrote
		q := &r.queue[k]
		q.fill(&r.qrec, r.next)
		if err := r.bySource[q.topic].process(&r.qrec); err != nil {
			r.rollback()
			return err
		}
	}
	r.drained()
	for _, t := range r.tasks {
		t.Consume(0, r.next)
		if err := t.Commit(); err != nil {
			err = fmt.Errorf("local: %w", err)
			r.failed = err
			return err
		}
	}
	r.committed = r.next
	r.Commits++
	return nil
}

func (r *Runner) rollback() {
	for _, t := range r.tasks {
		t.Rollback()
	}
	r.drained()
	r.next = r.committed
}

// Close drops uncommitted work and closes the tasks.
func (r *Runner) Close() error {
	var errs []error
	for _, t := range r.tasks {
		errs = append(errs, t.Close())
	}
	r.tasks = nil
	return errors.Join(errs...)
}

// task is one sub-topology's only task. Its one input is the source: the
// offset it consumed is the source index.
type task struct {
	*runtime.TaskState
	Proc runtime.TaskProcessor
	r    *Runner
}

func (r *Runner) openTask(i int, sub runtime.Subtopology) (*task, error) {
	id := runtime.TaskID{Subtopology: i, Partition: 0}
	db, err := r.cfg.Backend.Open(filepath.Join(r.cfg.Dir, id.String()))
	if err != nil {
		return nil, fmt.Errorf("local: task %s: %w", id, err)
	}
	ts, err := runtime.NewTaskState(id, sub.Stores, []state.TopicPartition{sourcePartition}, db, r.cfg.Logger)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("local: %w", err)
	}
	t := &task{TaskState: ts, r: r}
	if t.Proc, err = sub.NewTask(t); err != nil {
		t.Close()
		return nil, fmt.Errorf("local: task %s: %w", id, err)
	}
	return t, nil
}

// Close closes the task's processors and database.
func (t *task) Close() error {
	var err error
	if t.Proc != nil {
		err = t.Proc.Close()
	}
	return errors.Join(err, t.TaskState.Close())
}

func (t *task) WallClock() int64 { return t.r.now }

func (t *task) GlobalStore(name string) (runtime.GlobalReader, error) {
	return nil, fmt.Errorf("local: global store %q: global tables are not supported by the in-process runner", name)
}

func (t *task) Produce(topic string, key, value []byte, timestamp int64, _ []kgo.RecordHeader) error {
	t.r.produce(topic, key, value, timestamp)
	return nil
}

func (t *task) process(rec *kgo.Record) error {
	if err := t.Proc.Process(rec); err != nil {
		return fmt.Errorf("local: task %s: %s@%d: %w", t.ID(), rec.Topic, rec.Offset, err)
	}
	return nil
}
