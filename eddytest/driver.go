// Package eddytest runs eddy topologies without a broker, deterministically,
// the way Kafka Streams' TopologyTestDriver does: a test pipes records with
// timestamps into source topics, advances the wall clock, reads what the
// topology wrote to its sink topics and inspects its state stores.
//
// Every sub-topology runs as one task (partition 0) over in-memory stores,
// with the same processors, write buffers and stream time as under Run. The
// driver commits after each piped record and its consequences, so stores
// and outputs always show committed state. Records written to a topic that
// the topology also reads (a repartition topic, or a topic chained by the
// user) are processed in turn, first in, first out, before Pipe returns.
package eddytest

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/eddy-streams/eddy/internal/plan"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/runtime"
	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/memory"
)

// Options configure a Driver. Zero fields take the defaults named on them.
type Options struct {
	// Config is passed to the topology as Run would: AppID names internal
	// topics (default "eddytest"), OnDecodeError applies. Broker, state and
	// commit settings are ignored.
	Config eddy.Config
	// WallClock is the initial wall-clock time. Default: 2026-01-01 UTC.
	WallClock time.Time
}

// Driver runs one topology. It is not safe for concurrent use.
type Driver struct {
	topo    runtime.Topology
	backend *memory.Backend
	tasks   []*task
	// bySource maps a topic to the task that reads it.
	bySource map[string]*task
	globals  map[string]*globalStore // by topic
	global   map[string]*globalStore // by store name
	log      *slog.Logger
	now      time.Time
	// maxRecordBytes is Config.MaxRecordBytes (0: the default), which
	// Produce enforces as Run does.
	maxRecordBytes int

	// outputs are the committed records per topic, not yet read.
	outputs map[string][]*kgo.Record
	// pending are records produced by the record being processed: they
	// become outputs (and inputs of the topics the topology reads) when it
	// commits, and vanish if it fails.
	pending []*kgo.Record
}

// New builds t and opens its tasks.
func New(t *eddy.Topology, opts Options) (*Driver, error) {
	cfg := opts.Config
	if cfg.AppID == "" {
		cfg.AppID = "eddytest"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	topo, err := plan.Build(t, cfg)
	if err != nil {
		return nil, err
	}
	d := &Driver{
		topo:           topo,
		backend:        memory.New(),
		bySource:       make(map[string]*task),
		globals:        make(map[string]*globalStore),
		global:         make(map[string]*globalStore),
		log:            cfg.Logger,
		now:            opts.WallClock,
		maxRecordBytes: cfg.MaxRecordBytes,
		outputs:        make(map[string][]*kgo.Record),
	}
	if d.now.IsZero() {
		d.now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	for _, g := range topo.Globals {
		db, err := d.backend.Open("global/" + g.Name)
		if err != nil {
			return nil, err
		}
		gs := &globalStore{name: g.Name, db: db}
		d.globals[g.Topic], d.global[g.Name] = gs, gs
	}
	for i, sub := range topo.Subtopologies {
		tk, err := d.openTask(i, sub)
		if err != nil {
			d.Close()
			return nil, err
		}
		d.tasks = append(d.tasks, tk)
		for _, topic := range sub.Sources {
			d.bySource[topic] = tk
		}
	}
	return d, nil
}

// Close closes the tasks' processors.
func (d *Driver) Close() error {
	var errs []error
	for _, t := range d.tasks {
		errs = append(errs, t.Close())
	}
	d.tasks = nil
	return errors.Join(errs...)
}

// PipeRaw sends one encoded record to topic, processes it and everything it
// leads to, and commits. A nil value is a tombstone. An error from the
// topology is returned and the record's effects are rolled back, as an
// aborted transaction's are.
func (d *Driver) PipeRaw(topic string, key, value []byte, timestamp int64, headers ...eddy.Header) error {
	r := &kgo.Record{Topic: topic, Key: key, Value: value, Timestamp: time.UnixMilli(timestamp)}
	for _, h := range headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	if g := d.globals[topic]; g != nil {
		return g.apply([]*kgo.Record{r})
	}
	if d.bySource[topic] == nil {
		return fmt.Errorf("eddytest: the topology does not read topic %q", topic)
	}
	return d.run(func() error { return d.deliver(r) })
}

// AdvanceWallClock moves the wall clock by step and runs the wall-clock
// punctuators that are due, then commits.
func (d *Driver) AdvanceWallClock(step time.Duration) error {
	if step < 0 {
		return fmt.Errorf("eddytest: AdvanceWallClock(%v): the wall clock only moves forward", step)
	}
	d.now = d.now.Add(step)
	return d.run(func() error {
		for _, t := range d.tasks {
			if err := t.Proc.Punctuate(d.now); err != nil {
				return fmt.Errorf("eddytest: task %s: punctuate: %w", t.ID(), err)
			}
		}
		return nil
	})
}

// LateRecordsDropped is the number of records that windowed operations
// dropped as late.
func (d *Driver) LateRecordsDropped() int64 {
	var n int64
	for _, t := range d.tasks {
		if c, ok := t.Proc.(interface{ LateDropped() int64 }); ok {
			n += c.LateDropped()
		}
	}
	return n
}

// WallClock returns the driver's wall-clock time.
func (d *Driver) WallClock() time.Time { return d.now }

// run runs step, then the records it produced to topics the topology reads,
// and commits every task; on error it rolls every task back.
func (d *Driver) run(step func() error) error {
	err := step()
	for i := 0; err == nil && i < len(d.pending); i++ {
		if r := d.pending[i]; d.bySource[r.Topic] != nil {
			err = d.deliver(r)
		}
	}
	if err != nil {
		for _, t := range d.tasks {
			t.Rollback()
		}
		d.pending = d.pending[:0]
		return err
	}
	for _, t := range d.tasks {
		if err := t.Commit(); err != nil {
			return fmt.Errorf("eddytest: %w", err)
		}
	}
	// Records written to a global table's topic reach its store once
	// they are committed, as the runtime's global consumer reads them.
	for _, r := range d.pending {
		d.outputs[r.Topic] = append(d.outputs[r.Topic], r)
		if g := d.globals[r.Topic]; g != nil {
			if err := g.apply([]*kgo.Record{r}); err != nil {
				return err
			}
		}
	}
	d.pending = d.pending[:0]
	return nil
}

func (d *Driver) deliver(r *kgo.Record) error {
	t := d.bySource[r.Topic]
	if err := t.Proc.Process(r); err != nil {
		return fmt.Errorf("eddytest: task %s: %s@%d: %w", t.ID(), r.Topic, r.Timestamp.UnixMilli(), err)
	}
	return nil
}

// readOutput removes and returns the oldest unread record of topic.
func (d *Driver) readOutput(topic string) (*kgo.Record, bool) {
	q := d.outputs[topic]
	if len(q) == 0 {
		return nil, false
	}
	d.outputs[topic] = q[1:]
	return q[0], true
}

// storeTask returns the task that owns store.
func (d *Driver) storeTask(store string) (*task, error) {
	for i, sub := range d.topo.Subtopologies {
		for _, s := range sub.Stores {
			if s.Name == store {
				return d.tasks[i], nil
			}
		}
	}
	return nil, fmt.Errorf("eddytest: the topology has no store %q", store)
}

// task is one sub-topology's only task.
type task struct {
	*runtime.TaskState
	Proc runtime.TaskProcessor
	d    *Driver
}

func (d *Driver) openTask(i int, sub runtime.Subtopology) (*task, error) {
	id := runtime.TaskID{Subtopology: i, Partition: 0}
	db, err := d.backend.Open("task/" + id.String())
	if err != nil {
		return nil, err
	}
	ts, err := runtime.NewTaskState(id, sub.Stores, nil, db, d.log)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("eddytest: %w", err)
	}
	t := &task{TaskState: ts, d: d}
	if t.Proc, err = sub.NewTask(t); err != nil {
		t.Close()
		return nil, fmt.Errorf("eddytest: task %s: %w", id, err)
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

// WallClock is the driver's wall clock, which only AdvanceWallClock moves:
// processing-time topologies run deterministically.
func (t *task) WallClock() int64 { return t.d.now.UnixMilli() }

func (t *task) GlobalStore(name string) (runtime.GlobalReader, error) {
	g := t.d.global[name]
	if g == nil {
		return nil, fmt.Errorf("eddytest: the topology has no global store %q", name)
	}
	return g, nil
}

func (t *task) Produce(topic string, key, value []byte, timestamp int64, headers []kgo.RecordHeader) error {
	if err := runtime.CheckRecordSize(topic, key, value, headers, t.d.maxRecordBytes); err != nil {
		return err // as Run refuses it
	}
	r := &kgo.Record{Topic: topic, Key: clone(key), Value: clone(value), Timestamp: time.UnixMilli(timestamp)}
	for _, h := range headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: clone(h.Value)})
	}
	t.d.pending = append(t.d.pending, r)
	return nil
}

// clone copies b, keeping nil nil (a tombstone) and empty empty.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// globalStore is a global table's store: every record of its topic is
// applied at once, as the runtime's global consumer does.
type globalStore struct {
	name string
	db   state.DB
}

func (g *globalStore) apply(recs []*kgo.Record) error {
	var b state.Batch
	for _, r := range recs {
		b.Writes = append(b.Writes, state.Write{Store: g.name, Key: r.Key, Value: r.Value, Delete: r.Value == nil})
	}
	var err error
	if b.Offsets, err = g.db.Offsets(); err != nil {
		return err
	}
	return g.db.Apply(&b)
}

func (g *globalStore) Get(key []byte) ([]byte, bool, error) { return g.db.Get(g.name, key) }
