// Package local runs a topology inside this process without a broker: its
// input is an in-process Source replayable by index (a generator), its state
// is in a real backend (Pebble), and the commit cycle of docs/design.md §3 runs
// on a timer, minus Kafka: at each commit every task's write buffer is
// applied to its database in one batch together with the source index it
// reflects, so a restart resumes where the state stands, as a Kafka
// partition's offset does. Records written to topics the topology reads
// (repartition topics) are processed in turn, first in, first out, after
// the source record that caused them; records written to any other topic go
// to the Sink. Global tables are loaded, before the run, from records the
// caller gives (Config.Globals), as the runtime loads them from their topics
// before its tasks start. This is what `eddy bench nexmark --source generator`
// measures: the engine's own cost, without a broker.
package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
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
	// StateCache is the budget the tasks' write buffers share, as an
	// App's half of Config.StateMemory (nil: each its own default).
	StateCache *state.CacheBudget
	// TableCacheBytes is the tasks' table cache budget, as an App's
	// Config.TableCacheBytes resolved (zero or negative: off).
	TableCacheBytes int64
	Sink            Sink
	// Globals are the contents of the topics of the topology's global
	// tables (eddy.GlobalTableFrom), by topic: bounded side inputs, with
	// no broker to read them from. Every global table's topic must have
	// an entry (empty for an empty table), and every entry a global table.
	Globals map[string][]Record
	Logger  *slog.Logger
}

// Record is a record of a global table's topic, encoded as the table's
// serdes read it. A nil Value deletes its key, as a tombstone in the
// topic does.
type Record struct {
	Key, Value []byte
}

// sourcePartition is the name the source index is stored under in each
// task's offsets.
var sourcePartition = state.TopicPartition{Topic: "local-source", Partition: 0}

// Runner runs one topology over one Source, each sub-topology as one task
// (partition 0) of a runtime.InProcess. It is not safe for concurrent use.
type Runner struct {
	cfg Config
	src Source
	run *runtime.InProcess
	// next is the index of the next source record to read; committed is
	// the index the databases reflect.
	next, committed int64
	// rec is the source's record.
	rec kgo.Record
	// failed is set when a commit failed part way: the tasks' databases
	// may disagree, so the runner refuses more work.
	failed error
	// Commits counts the commits made.
	Commits int
}

// New opens a task per sub-topology of topo: its database under cfg.Dir and
// its processors. The source index to resume from is what every database
// records; databases that disagree (a crash between two tasks' commits) are
// refused rather than guessed at.
func New(topo runtime.Topology, src Source, cfg Config) (*Runner, error) {
	if cfg.Backend == nil || cfg.Dir == "" {
		return nil, errors.New("local: Config.Backend and Config.Dir are required")
	}
	globals, err := loadGlobals(topo.Globals, cfg.Globals)
	if err != nil {
		return nil, err
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
	r := &Runner{cfg: cfg, src: src}
	var tableCache *runtime.TableCacheBudget
	if cfg.TableCacheBytes > 0 {
		tableCache = runtime.NewTableCacheBudget(cfg.TableCacheBytes)
	}
	run, err := runtime.NewInProcess(topo, runtime.InProcessOptions{
		TableCache: tableCache,
		Open: func(id runtime.TaskID) (state.DB, error) {
			return cfg.Backend.Open(filepath.Join(cfg.Dir, id.String()))
		},
		Input:   &sourcePartition,
		Globals: globals,
		Out: func(rec *kgo.Record, read bool) {
			if !read {
				cfg.Sink(rec.Topic, rec.Key, rec.Value, rec.Timestamp.UnixMilli())
			}
		},
		StateCache: cfg.StateCache,
		Logger:     cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	r.run = run
	var read []string
	for i, t := range run.Tasks() {
		read = append(read, topo.Subtopologies[i].Sources...)
		at := t.Input(sourcePartition)
		if i == 0 {
			r.committed = at
		} else if first := run.Tasks()[0]; at != r.committed {
			r.Close()
			return nil, fmt.Errorf("local: task %s reflects source index %d, task %s %d: the state in %s is torn; delete it to start over", first.ID(), r.committed, t.ID(), at, cfg.Dir)
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
	r.run.SetWallClock(last.UnixMilli())
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
		r.run.SetWallClock(now.UnixMilli())
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

// EndOfInput ends the source at Next: every task's operators act as if
// stream time had reached end (eddy.EndOfInputTime: every window closes
// and emits its final result, as Flink's end-of-input watermark does),
// in the order runtime.Topology.EndOrder gives, then the runner commits.
// The state then records stream time end: records run after it are late
// for every window.
func (r *Runner) EndOfInput(end int64) error {
	if r.failed != nil {
		return r.failed
	}
	if err := r.run.EndOfInput(end); err != nil {
		r.rollback()
		return fmt.Errorf("local: %w", err)
	}
	return r.commit(time.Now())
}

// one processes source record i, offset i of its topic, and every record
// it leads to.
func (r *Runner) one(i int64) error {
	rec := &r.rec
	if !r.src.Read(i, rec) {
		return nil
	}
	rec.Offset = i
	if err := r.run.Process(rec); err != nil {
		return fmt.Errorf("local: %w", err)
	}
	return nil
}

// commit runs the wall-clock punctuators, then applies each task's writes
// with the source index and stream time they reflect.
func (r *Runner) commit(now time.Time) error {
	if err := r.run.Punctuate(now); err != nil {
		r.rollback()
		return fmt.Errorf("local: %w", err)
	}
	if err := r.run.Commit(r.next); err != nil {
		err = fmt.Errorf("local: %w", err)
		r.failed = err
		return err
	}
	r.committed = r.next
	r.Commits++
	return nil
}

func (r *Runner) rollback() {
	r.run.Rollback()
	r.next = r.committed
}

// Close drops uncommitted work and closes the tasks.
func (r *Runner) Close() error { return r.run.Close() }

// globalTable is a global table's content, in memory: a bounded side input
// the caller gives in full at each New, so there is nothing to persist or
// resume, and a lookup (one per record of a joining stream) costs a map
// access rather than a read of the state backend. It is never written
// once loaded, so concurrent reads are safe (runtime.GlobalReader).
type globalTable map[string][]byte

// Get implements runtime.GlobalReader.
func (g globalTable) Get(key []byte) ([]byte, bool, error) {
	v, ok := g[string(key)]
	return v, ok, nil
}

// loadGlobals builds each global store of specs from its topic's records
// in recs, applied in order (a nil value deletes its key). A global table
// without records, or records for no global table, is refused: either is a
// mistake of the caller's, not an empty table.
func loadGlobals(specs []runtime.GlobalStore, recs map[string][]Record) (map[string]runtime.GlobalReader, error) {
	stores := make(map[string]runtime.GlobalReader, len(specs))
	for _, spec := range specs {
		topicRecs, ok := recs[spec.Topic]
		if !ok {
			return nil, fmt.Errorf("local: global table %s reads topic %s, which Config.Globals does not hold: give its records (an empty list for an empty table)", spec.Name, spec.Topic)
		}
		g := make(globalTable, len(topicRecs))
		for _, r := range topicRecs {
			if r.Value == nil {
				delete(g, string(r.Key))
				continue
			}
			g[string(r.Key)] = bytes.Clone(r.Value)
		}
		stores[spec.Name] = g
	}
	for topic := range recs {
		if !slices.ContainsFunc(specs, func(s runtime.GlobalStore) bool { return s.Topic == topic }) {
			return nil, fmt.Errorf("local: Config.Globals holds records for topic %s, which no global table of the topology reads", topic)
		}
	}
	return stores, nil
}
