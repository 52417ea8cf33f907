// Package local runs a topology inside this process without a broker: its
// input is an in-process Source replayable by index (a generator), its state
// is in a real backend (Pebble), and the commit cycle of docs/design.md §3 runs
// on a timer, minus Kafka: at each commit every task's write buffer is
// applied to its database in one batch together with the source index it
// reflects, so a restart resumes where the state stands, as a Kafka
// partition's offset does. Records written to topics the topology reads
// (repartition topics) are processed in turn, first in, first out, after
// the source record that caused them; records written to any other topic go
// to the Sink. With several workers (a Source each), the topology runs over
// as many partitions, as on Kafka, each worker on its goroutine (parallel.go).
// Global tables are loaded, before the run, from records the caller gives
// (Config.Globals), as the runtime loads them from their topics before its
// tasks start; each partition holds them whole, as each instance does.
// This is what `eddy bench nexmark --source generator` measures: the
// engine's own cost, without a broker.
package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
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
	// Backend opens the tasks' databases, one per task under Dir.
	Backend state.Backend
	Dir     string
	// CommitInterval is the time between commits (default 1 s).
	CommitInterval time.Duration
	// StateCache is the budget the tasks' write buffers share, as an
	// App's half of Config.StateMemory (nil: each its own default).
	StateCache *state.CacheBudget
	// TableCacheBytes is the tasks' table cache budget, as an App's
	// Config.TableCacheBytes resolved (zero or negative: off); workers
	// divide it, as an App's do.
	TableCacheBytes int64
	// Sink receives the records written to topics the topology does not
	// read, from one goroutine at a time (with several workers, the
	// coordinator's, after each step, in worker order).
	Sink Sink
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

// Runner runs one topology over a Source per worker: with one, each
// sub-topology as one task (partition 0) of a runtime.InProcess on the
// caller's goroutine; with N, over N partitions (see parallel). It is not
// safe for concurrent use.
type Runner struct {
	cfg Config
	eng engine
	// batch is the number of source records processed between looks at
	// the clock and the context.
	batch int64
	// next is the index of the next source record to read; committed is
	// the index the databases reflect.
	next, committed int64
	// failed is set when a commit failed part way: the tasks' databases
	// may disagree, so the runner refuses more work.
	failed error
	// Commits counts the commits made.
	Commits int
}

// engine runs the tasks for a Runner: single, or parallel.
type engine interface {
	// process processes source records [from, to) and every record they
	// lead to.
	process(from, to int64) error
	// setWallClock sets the wall clock the tasks read (ms).
	setWallClock(ms int64)
	// punctuate runs the wall-clock punctuators at now, and what they
	// lead to.
	punctuate(now time.Time) error
	// commit flushes, then commits every task with next as the source
	// index its state reflects.
	commit(next int64) error
	// endOfInput ends every task's input (InProcess.EndOfInput).
	endOfInput(end int64) error
	// rollback drops every task's uncommitted work.
	rollback()
	close() error
}

// New opens a task per sub-topology of topo and partition (one per
// source: sources[w] is worker w's, read by its goroutine only): its
// database under cfg.Dir and its processors. The source index to resume
// from is what every database records; databases that disagree (a crash
// between two tasks' commits) are refused rather than guessed at, and so
// is state written with another number of workers (its keys are spread
// over another number of partitions).
func New(topo runtime.Topology, sources []Source, cfg Config) (*Runner, error) {
	if cfg.Backend == nil || cfg.Dir == "" {
		return nil, errors.New("local: Config.Backend and Config.Dir are required")
	}
	if len(sources) == 0 {
		return nil, errors.New("local: no source; pass one per worker")
	}
	if _, err := loadGlobals(topo.Globals, cfg.Globals); err != nil {
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
	if err := checkPartitions(cfg.Dir, len(sources)); err != nil {
		return nil, err
	}
	r := &Runner{cfg: cfg}
	var runs []*runtime.InProcess
	if len(sources) == 1 {
		s, err := newSingle(topo, sources[0], cfg)
		if err != nil {
			return nil, fmt.Errorf("local: %w", err)
		}
		r.eng, r.batch, runs = s, 1024, []*runtime.InProcess{s.run}
	} else {
		p, err := newParallel(topo, sources, cfg)
		if err != nil {
			return nil, fmt.Errorf("local: %w", err)
		}
		r.eng, r.batch = p, roundEvents
		for _, w := range p.workers {
			runs = append(runs, w.run)
		}
	}
	var read []string
	for i := range topo.Subtopologies {
		read = append(read, topo.Subtopologies[i].Sources...)
	}
	first := runs[0].Tasks()[0]
	r.committed = first.Input(sourcePartition)
	for _, run := range runs {
		for _, t := range run.Tasks() {
			if at := t.Input(sourcePartition); at != r.committed {
				r.Close()
				return nil, fmt.Errorf("local: task %s reflects source index %d, task %s %d: the state in %s is torn; delete it to start over", first.ID(), r.committed, t.ID(), at, cfg.Dir)
			}
		}
	}
	r.next = r.committed
	for _, src := range sources {
		src.Topics(read)
	}
	return r, nil
}

// checkPartitions refuses state in dir written with another number of
// workers than n: a key's state would be looked for in the wrong
// partition's task.
func checkPartitions(dir string, n int) error {
	had := 0
	for {
		_, err := os.Stat(filepath.Join(dir, runtime.TaskID{Partition: int32(had)}.String()))
		if err != nil {
			break
		}
		had++
	}
	if had > 0 && had != n {
		return fmt.Errorf("local: the state in %s was written by %d workers, not %d: run with as many workers, or delete it to start over", dir, had, n)
	}
	return nil
}

// openPartition opens the InProcess of one partition: its tasks'
// databases under cfg.Dir, named by task.
func openPartition(topo runtime.Topology, cfg Config, partition int32, tableCacheBytes int64, route bool, out func(*kgo.Record, bool)) (*runtime.InProcess, error) {
	var tableCache *runtime.TableCacheBudget
	if tableCacheBytes > 0 {
		tableCache = runtime.NewTableCacheBudget(tableCacheBytes)
	}
	globals, err := loadGlobals(topo.Globals, cfg.Globals)
	if err != nil {
		return nil, err
	}
	return runtime.NewInProcess(topo, runtime.InProcessOptions{
		Globals:    globals,
		TableCache: tableCache,
		Open: func(id runtime.TaskID) (state.DB, error) {
			return cfg.Backend.Open(filepath.Join(cfg.Dir, id.String()))
		},
		Partition:  partition,
		Route:      route,
		Input:      &sourcePartition,
		Out:        out,
		StateCache: cfg.StateCache,
		Logger:     cfg.Logger,
	})
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
	r.eng.setWallClock(last.UnixMilli())
	for r.next < end {
		// The clock and the context are checked once per batch of
		// records, not per record.
		batchEnd := min(end, r.next+r.batch)
		if err := r.eng.process(r.next, batchEnd); err != nil {
			r.rollback()
			return err
		}
		r.next = batchEnd
		if err := ctx.Err(); err != nil {
			r.rollback()
			return err
		}
		now := time.Now()
		r.eng.setWallClock(now.UnixMilli())
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
	if err := r.eng.endOfInput(end); err != nil {
		r.rollback()
		return fmt.Errorf("local: %w", err)
	}
	return r.commit(time.Now())
}

// commit runs the wall-clock punctuators, then applies each task's writes
// with the source index and stream time they reflect.
func (r *Runner) commit(now time.Time) error {
	if err := r.eng.punctuate(now); err != nil {
		r.rollback()
		return fmt.Errorf("local: %w", err)
	}
	if err := r.eng.commit(r.next); err != nil {
		err = fmt.Errorf("local: %w", err)
		r.failed = err
		return err
	}
	r.committed = r.next
	r.Commits++
	return nil
}

func (r *Runner) rollback() {
	r.eng.rollback()
	r.next = r.committed
}

// Close drops uncommitted work and closes the tasks.
func (r *Runner) Close() error { return r.eng.close() }

// single runs every task on the caller's goroutine, one InProcess with
// partition 0 of each sub-topology: repartitioned records are processed
// right after the record that wrote them.
type single struct {
	src Source
	run *runtime.InProcess
	// rec is the source's record.
	rec kgo.Record
}

func newSingle(topo runtime.Topology, src Source, cfg Config) (*single, error) {
	run, err := openPartition(topo, cfg, 0, cfg.TableCacheBytes, false, func(rec *kgo.Record, read bool) {
		if !read {
			cfg.Sink(rec.Topic, rec.Key, rec.Value, rec.Timestamp.UnixMilli())
		}
	})
	if err != nil {
		return nil, err
	}
	return &single{src: src, run: run}, nil
}

func (s *single) process(from, to int64) error {
	for i := from; i < to; i++ {
		if err := s.one(i); err != nil {
			return err
		}
	}
	return nil
}

// one processes source record i, offset i of its topic, and every record
// it leads to.
func (s *single) one(i int64) error {
	rec := &s.rec
	if !s.src.Read(i, rec) {
		return nil
	}
	rec.Offset = i
	if err := s.run.Process(rec); err != nil {
		return fmt.Errorf("local: %w", err)
	}
	return nil
}

func (s *single) setWallClock(ms int64)         { s.run.SetWallClock(ms) }
func (s *single) punctuate(now time.Time) error { return s.run.Punctuate(now) }
func (s *single) commit(next int64) error       { return s.run.Commit(next) }
func (s *single) endOfInput(end int64) error    { return s.run.EndOfInput(end) }
func (s *single) rollback()                     { s.run.Rollback() }
func (s *single) close() error                  { return s.run.Close() }

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
