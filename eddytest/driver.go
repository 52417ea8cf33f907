// Package eddytest runs eddy topologies without a broker, deterministically,
// the way Kafka Streams' TopologyTestDriver does: a test pipes records with
// timestamps into source topics, advances the wall clock, reads what the
// topology wrote to its sink topics and inspects its state stores.
//
// Every sub-topology runs as one task (partition 0) over in-memory stores,
// with the same processors, write buffers and stream time as under Run. The
// driver commits after each piped record and its consequences, so stores
// and outputs always show committed state; Transaction pipes several
// records in one commit, as Run's transactions do. The table cache
// (Config.TableCacheBytes) is off unless the test sets it: a test sees
// every table update, as before the cache; set, it collapses a key's
// updates within one commit, as under Run (one piped record that updates
// a key twice, through FlatMap or GroupTableBy, shows once). Records
// written to a topic that the topology also reads (a repartition topic,
// or a topic chained by the user) are processed in turn, first in, first
// out, before Pipe returns.
//
// Records are processed in the order they are piped, whatever their
// timestamps: a test that pipes two topics of a join chooses their
// interleaving. Under Run a task with several sources processes the
// earliest record among their heads and waits for a partition the broker
// holds records of (Config.MaxTaskIdle, docs/design.md §5.2); to test a
// topology as it runs there, pipe in timestamp order.
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
	// commit settings are ignored. MaxEventTimeAhead applies only when set
	// (its default is off here): the driver's wall clock is the test's,
	// often far from the times of the records it pipes. TableCacheBytes
	// too applies only when set (positive; its default is off here).
	Config eddy.Config
	// WallClock is the initial wall-clock time. Default: 2026-01-01 UTC.
	WallClock time.Time
}

// Driver runs one topology. It is not safe for concurrent use.
type Driver struct {
	run     *runtime.InProcess
	backend *memory.Backend
	globals map[string]*globalStore // by topic
	now     time.Time

	// outputs are the records the topology wrote, per topic: committed
	// ones until read, and those of the step under way, which become
	// readable (and global tables' contents) when it commits and vanish
	// if it fails.
	outputs map[string]*outputQueue
	// step lists the queues the step under way wrote to.
	step []*outputQueue
	// inTxn is set within Transaction: steps do not commit; txnErr is
	// the first error of one of them.
	inTxn  bool
	txnErr error
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
	if cfg.MaxEventTimeAhead == 0 {
		cfg.MaxEventTimeAhead = -1 // off
	}
	var tableCache *runtime.TableCacheBudget // nil: off
	if cfg.TableCacheBytes > 0 {
		tableCache = runtime.NewTableCacheBudget(cfg.TableCacheBytes)
	}
	topo, err := plan.Build(t, cfg)
	if err != nil {
		return nil, err
	}
	d := &Driver{
		backend: memory.New(),
		globals: make(map[string]*globalStore),
		now:     opts.WallClock,
		outputs: make(map[string]*outputQueue),
	}
	if d.now.IsZero() {
		d.now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	byName := make(map[string]runtime.GlobalReader)
	for _, g := range topo.Globals {
		db, err := d.backend.Open("global/" + g.Name)
		if err != nil {
			return nil, err
		}
		gs := &globalStore{name: g.Name, db: db}
		d.globals[g.Topic], byName[g.Name] = gs, gs
	}
	d.run, err = runtime.NewInProcess(topo, runtime.InProcessOptions{
		AppID:          cfg.AppID,
		Open:           func(id runtime.TaskID) (state.DB, error) { return d.backend.Open("task/" + id.String()) },
		Globals:        byName,
		Out:            d.produced,
		MaxRecordBytes: cfg.MaxRecordBytes,
		TableCache:     tableCache,
		Logger:         cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("eddytest: %w", err)
	}
	d.run.SetWallClock(d.now.UnixMilli())
	return d, nil
}

// Close closes the tasks' processors.
func (d *Driver) Close() error { return d.run.Close() }

// Restart closes the topology's tasks and opens them again on the same
// stores, as an app restarted after a crash restores its tasks: what was
// committed carries over (state, stream time, window and suppression
// buffers, the marks of what was emitted), what a processor kept only in
// memory does not, and processors' Init runs again. Since the driver
// commits after each step, nothing is lost but inside Transaction, where
// Restart is refused. Use it to test that a topology's outputs go on as
// they would have without the restart: nothing emitted twice, nothing
// lost.
func (d *Driver) Restart() error {
	if d.inTxn {
		return errors.New("eddytest: Restart within Transaction: a restart ends the transaction; restart after it")
	}
	run, err := d.run.Reopen()
	if err != nil {
		return fmt.Errorf("eddytest: restart: %w", err)
	}
	d.run = run
	return nil
}

// PipeRaw sends one encoded record to topic, processes it and everything it
// leads to, and commits. A nil value is a tombstone. The record gets the
// topic's next offset (partition 0), as a broker appending it would. An
// error from the topology is returned and the record's effects are rolled
// back, as an aborted transaction's are.
func (d *Driver) PipeRaw(topic string, key, value []byte, timestamp int64, headers ...eddy.Header) error {
	if d.txnErr != nil {
		return d.txnErr // the transaction failed: it rolls back
	}
	r := &kgo.Record{Topic: topic, Key: key, Value: value, Timestamp: time.UnixMilli(timestamp)}
	for _, h := range headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	if g := d.globals[topic]; g != nil {
		return g.apply(key, value)
	}
	if !d.run.Reads(topic) {
		return fmt.Errorf("eddytest: the topology does not read topic %q", topic)
	}
	r.Offset = d.run.Append(topic)
	return d.commit(d.run.Process(r))
}

// AdvanceWallClock moves the wall clock by step and runs the wall-clock
// punctuators that are due, then commits.
func (d *Driver) AdvanceWallClock(step time.Duration) error {
	if step < 0 {
		return fmt.Errorf("eddytest: AdvanceWallClock(%v): the wall clock only moves forward", step)
	}
	if d.txnErr != nil {
		return d.txnErr
	}
	d.now = d.now.Add(step)
	return d.commit(d.run.Punctuate(d.now))
}

// EndOfInput says the input has ended, as a bounded source's end does:
// every task's operators act as if stream time had reached
// eddy.EndOfInputTime, upstream sub-topologies first, so every window
// closes and emits its final result (EmitFinal, Suppress), outer stream
// joins emit their unmatched records and stream-time punctuators fire;
// then it commits. Records piped after it are late for every window.
func (d *Driver) EndOfInput() error {
	if d.txnErr != nil {
		return d.txnErr
	}
	return d.commit(d.run.EndOfInput(eddy.EndOfInputTime))
}

// LateRecordsDropped is the number of records that windowed operations
// dropped as late.
func (d *Driver) LateRecordsDropped() int64 {
	var n int64
	for _, t := range d.run.Tasks() {
		if c, ok := t.Proc.(interface{ LateDropped() int64 }); ok {
			n += c.LateDropped()
		}
	}
	return n
}

// WallClock returns the driver's wall-clock time.
func (d *Driver) WallClock() time.Time { return d.now }

// produced keeps a copy of a record the topology wrote, readable once its
// step commits.
func (d *Driver) produced(r *kgo.Record, _ bool) {
	q := d.outputs[r.Topic]
	if q == nil {
		q = &outputQueue{topic: r.Topic}
		d.outputs[r.Topic] = q
	}
	if !q.inStep {
		q.inStep = true
		d.step = append(d.step, q)
	}
	q.push(r)
}

// Transaction runs fn, whose pipes (and wall-clock advances) are
// processed as they come but committed once, when fn returns, as records
// polled together are under Run: the table cache forwards the latest
// update per key of the whole transaction, and outputs become readable
// at the end. If fn or a pipe within it fails, everything the transaction
// did is rolled back (an aborted transaction) and the first error is
// returned; later pipes within it are not processed.
func (d *Driver) Transaction(fn func() error) error {
	if d.inTxn {
		return fmt.Errorf("eddytest: Transaction within a Transaction")
	}
	d.inTxn, d.txnErr = true, nil
	err := fn()
	d.inTxn = false
	if d.txnErr != nil {
		err = d.txnErr
	}
	d.txnErr = nil
	return d.commit(err)
}

// commit commits every task after a step that returned err == nil, and
// makes the step's records readable; after a failed step it rolls every
// task back and drops them. Within Transaction it only keeps the first
// error: the transaction commits or rolls back at its end.
func (d *Driver) commit(err error) error {
	if d.inTxn {
		if d.txnErr == nil {
			d.txnErr = err
		}
		return err
	}
	if err == nil {
		// Forwarding held updates is the commit's first step; its
		// failure rolls the step back like a processing error.
		err = d.run.Flush()
	}
	if err != nil {
		d.run.Rollback()
		d.rollbackStep()
		return err
	}
	if err := d.run.Commit(0); err != nil {
		d.rollbackStep() // the step's outputs are not committed
		return fmt.Errorf("eddytest: %w", err)
	}
	for _, q := range d.step {
		// Records written to a global table's topic reach its store once
		// they are committed, as the runtime's global consumer reads them.
		if g := d.globals[q.topic]; g != nil {
			recs := q.uncommitted()
			for i := range recs {
				r := q.read(&recs[i])
				if err := g.apply(r.key, r.value); err != nil {
					return err
				}
			}
		}
		q.commit()
		q.inStep = false
	}
	d.step = d.step[:0]
	return nil
}

// rollbackStep drops the records the step wrote.
func (d *Driver) rollbackStep() {
	for _, q := range d.step {
		q.rollback()
		q.inStep = false
	}
	d.step = d.step[:0]
}

// readOutput removes and returns the oldest unread record of topic.
func (d *Driver) readOutput(topic string) (outputRead, bool) {
	q := d.outputs[topic]
	if q == nil {
		return outputRead{}, false
	}
	return q.pop()
}

// outputLen is the number of committed records of topic not read yet.
func (d *Driver) outputLen(topic string) int {
	if q := d.outputs[topic]; q != nil {
		return q.len()
	}
	return 0
}

// storeTask returns the task that owns store.
func (d *Driver) storeTask(store string) (*runtime.InProcessTask, error) {
	t, ok := d.run.StoreTask(store)
	if !ok {
		return nil, fmt.Errorf("eddytest: the topology has no store %q", store)
	}
	return t, nil
}

// globalStore is a global table's store: every record of its topic is
// applied at once, as the runtime's global consumer does.
type globalStore struct {
	name string
	db   state.DB
}

// apply puts key = value, or deletes key when value is nil (a tombstone).
func (g *globalStore) apply(key, value []byte) error {
	b := state.Batch{Writes: []state.Write{{Store: g.name, Key: key, Value: value, Delete: value == nil}}}
	var err error
	if b.Offsets, err = g.db.Offsets(); err != nil {
		return err
	}
	return g.db.Apply(&b)
}

func (g *globalStore) Get(key []byte) ([]byte, bool, error) { return g.db.Get(g.name, key) }
