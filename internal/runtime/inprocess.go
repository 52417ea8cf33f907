package runtime

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/chunked"
	"github.com/eddy-streams/eddy/state"
)

// InProcess runs a topology in this process without a broker: every
// sub-topology as one task (partition 0, or Options.Partition) over a
// TaskState, committed when its owner says. Records the topology writes to
// a topic it also reads (a repartition topic, or a topic chained by the
// user) are processed in turn, first in, first out, after the record or
// punctuation that wrote them, as a broker would deliver them (unless
// Options.Route hands them to the owner); every record written is also
// handed to the owner's Out. Two owners share it: eddytest's driver (a
// commit per piped record) and the harness's in-process runner (a commit
// per interval, over a generator; with several workers, an InProcess per
// partition, each on its own goroutine). It is not safe for concurrent use.
type InProcess struct {
	opts     InProcessOptions
	tasks    []*InProcessTask
	bySource map[string]*InProcessTask
	byStore  map[string]*InProcessTask
	// topo resolves a topic that no source names to the sub-topology
	// whose pattern matches it (added to bySource when first met).
	topo Topology
	// offsets are the next offset of each topic's partition 0: records
	// appended to a topic the topology reads get real, growing offsets.
	offsets map[string]int64
	now     int64 // the wall clock the tasks read, ms
	// queue holds records written to topics the topology reads, their
	// bytes carved from arena; both are reset once drained.
	queue chunked.List[queued]
	arena recordArena // its bytes only
	// qrec carries queued records to the tasks, apart from the caller's
	// records, so that a caller reusing its record's slices never writes
	// into the arena.
	qrec kgo.Record
	// out carries each written record to Options.Out, reused: a record
	// per output would cost an allocation on the per-record path.
	out kgo.Record
}

// InProcessTask is one sub-topology's only task: its state core and its
// processors.
type InProcessTask struct {
	*TaskState
	Proc TaskProcessor
	p    *InProcess
}

// InProcessOptions configure an InProcess.
type InProcessOptions struct {
	// AppID keeps source patterns from matching the app's internal
	// topics (Topology.PatternSub).
	AppID string
	// Open opens task id's database.
	Open func(id TaskID) (state.DB, error)
	// Partition is the partition of every task: an owner that runs the
	// topology over several partitions runs an InProcess per partition.
	Partition int32
	// Route, when set, makes the owner deliver the records written to
	// topics the topology reads: they are handed to Out (read true, its
	// Partition the one the writer chose, or -1 for the key's) and not
	// queued; the owner passes each to the InProcess of its partition
	// with Process, giving it an offset with Append.
	Route bool
	// Input, when set, is an input partition each task records its
	// position in at every commit (the runner's source index): a restart
	// resumes from it.
	Input *state.TopicPartition
	// Globals are the global stores, by name.
	Globals map[string]GlobalReader
	// Out receives each record the topology writes, as it writes it;
	// read reports whether the topology reads the record's topic (it is
	// then processed in turn too). The record's slices are valid during
	// the call only. Nil: records are dropped.
	Out func(r *kgo.Record, read bool)
	// MaxRecordBytes caps a written record as Run does (0: the default).
	MaxRecordBytes int
	// StateCache is the budget the tasks' write buffers share (nil: each
	// its own state.DefaultBufferCache).
	StateCache *state.CacheBudget
	// TableCache is the budget of the tasks' table caches (nil: off).
	TableCache *TableCacheBudget
	Logger     *slog.Logger
}

type queued struct {
	topic      string
	key, value []byte
	headers    []kgo.RecordHeader
	timestamp  int64
	offset     int64
}

// NewInProcess opens a task per sub-topology of topo: its database and
// its processors.
func NewInProcess(topo Topology, opts InProcessOptions) (*InProcess, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	p := &InProcess{opts: opts, topo: topo, bySource: make(map[string]*InProcessTask), byStore: make(map[string]*InProcessTask),
		offsets: make(map[string]int64)}
	for i, sub := range topo.Subtopologies {
		t, err := p.openTask(TaskID{Subtopology: i, Partition: opts.Partition}, sub)
		if err != nil {
			p.Close()
			return nil, err
		}
		p.tasks = append(p.tasks, t)
		for _, topic := range sub.Sources {
			p.bySource[topic] = t
		}
		for _, s := range sub.Stores {
			p.byStore[s.Name] = t
		}
	}
	return p, nil
}

func (p *InProcess) openTask(id TaskID, sub Subtopology) (*InProcessTask, error) {
	db, err := p.opts.Open(id)
	if err != nil {
		return nil, fmt.Errorf("eddy: task %s: open state: %w", id, err)
	}
	var inputs []state.TopicPartition
	if p.opts.Input != nil {
		inputs = []state.TopicPartition{*p.opts.Input}
	}
	ts, err := NewTaskState(id, sub.Stores, inputs, db, p.opts.StateCache, p.opts.Logger)
	if err != nil {
		db.Close()
		return nil, err
	}
	ts.LimitWrites(cmp.Or(p.opts.MaxRecordBytes, DefaultMaxRecordBytes))
	t := &InProcessTask{TaskState: ts, p: p}
	if t.Proc, err = sub.NewTask(t); err != nil {
		t.close()
		return nil, fmt.Errorf("eddy: task %s: build processors: %w", id, err)
	}
	return t, nil
}

// Tasks are the tasks, one per sub-topology, in sub-topology order.
func (p *InProcess) Tasks() []*InProcessTask { return p.tasks }

// StoreTask returns the task that holds store.
func (p *InProcess) StoreTask(store string) (*InProcessTask, bool) {
	t, ok := p.byStore[store]
	return t, ok
}

// Reads reports whether the topology reads topic.
func (p *InProcess) Reads(topic string) bool { return p.reader(topic) != nil }

// reader returns the task that reads topic, by name or by pattern; nil
// if the topology does not read it.
func (p *InProcess) reader(topic string) *InProcessTask {
	if t := p.bySource[topic]; t != nil {
		return t
	}
	i, ok := p.topo.PatternSub(p.opts.AppID, topic)
	if !ok {
		return nil
	}
	t := p.tasks[i]
	p.bySource[topic] = t
	return t
}

// Append takes the next offset of topic (partition 0), as a broker
// appending a record would.
func (p *InProcess) Append(topic string) int64 {
	o := p.offsets[topic]
	p.offsets[topic] = o + 1
	return o
}

// SetWallClock sets the wall clock the tasks read (ms since the epoch).
func (p *InProcess) SetWallClock(ms int64) { p.now = ms }

// Process runs r through the task that reads its topic, then every record
// that leads to; a record of a topic the topology does not read is
// ignored (see Reads). r.Offset is the caller's.
func (p *InProcess) Process(r *kgo.Record) error {
	t := p.reader(r.Topic)
	if t == nil {
		return nil
	}
	if err := t.process(r); err != nil {
		return err
	}
	return p.drain()
}

// Punctuate runs every task's wall-clock punctuators at now, then every
// record they lead to.
func (p *InProcess) Punctuate(now time.Time) error {
	p.now = now.UnixMilli()
	for _, t := range p.tasks {
		if err := t.Proc.Punctuate(now); err != nil {
			return fmt.Errorf("eddy: task %s: punctuate: %w", t.ID(), err)
		}
	}
	return p.drain()
}

// EndOfInput tells every task that its input has ended (TaskInputEnder),
// in Topology.EndOrder, processing what each writes to topics the
// topology reads before the next ends: a window that closes at the end
// upstream reaches the aggregation downstream of its repartition topic
// before that one ends too. Commit afterwards; a record processed after
// it is late for every window.
func (p *InProcess) EndOfInput(end int64) error {
	for _, i := range p.topo.EndOrder() {
		if err := p.EndTask(i, end); err != nil {
			return err
		}
	}
	return nil
}

// EndTask ends the input of sub-topology sub's task (see EndOfInput),
// then processes what that leads to.
func (p *InProcess) EndTask(sub int, end int64) error {
	t := p.tasks[sub]
	if e, ok := t.Proc.(TaskInputEnder); ok {
		if err := e.EndOfInput(end); err != nil {
			return fmt.Errorf("eddy: task %s: end of input: %w", t.ID(), err)
		}
	}
	return p.drain()
}

// drain processes the queued records, and those they queue, in order.
func (p *InProcess) drain() error {
	if p.queue.Len() == 0 {
		return nil
	}
	for k := 0; k < p.queue.Len(); k++ {
		q := p.queue.At(k)
		q.fill(&p.qrec)
		if err := p.reader(q.topic).process(&p.qrec); err != nil {
			return err
		}
	}
	p.drained()
	return nil
}

func (q *queued) fill(r *kgo.Record) {
	r.Topic, r.Partition, r.Key, r.Value, r.Headers = q.topic, 0, q.key, q.value, q.headers
	r.Timestamp, r.Offset = time.UnixMilli(q.timestamp), q.offset
}

func (p *InProcess) drained() {
	p.queue.Reset()
	p.arena.reset()
	p.qrec.Key, p.qrec.Value, p.qrec.Headers = nil, nil, nil
}

// Flush forwards what the tasks hold back (their table caches, see
// TaskFlusher), then every record that leads to, as a commit's first step
// does under Run. A record a flush writes to a topic the topology reads
// may fill another task's cache, so it goes round until a round
// forwards nothing more: it ends because the operators forward what
// they held once (a sub-topology may read a repartition topic it writes,
// but what it reads there it does not hold again). With Options.Route it
// goes round once: the owner delivers the records and flushes again.
func (p *InProcess) Flush() error {
	for {
		for _, t := range p.tasks {
			f, ok := t.Proc.(TaskFlusher)
			if !ok {
				continue
			}
			if err := f.Flush(); err != nil {
				return fmt.Errorf("eddy: task %s: flush: %w", t.ID(), err)
			}
		}
		if p.queue.Len() == 0 {
			return nil
		}
		if err := p.drain(); err != nil {
			return err
		}
	}
}

// Commit flushes (Flush), then commits every task: its writes, stream time
// and, with Options.Input, inputNext as the input position its state
// reflects. A failed prepare of a transactional sink rolls every task
// back; a failure after it may leave some tasks committed and others not.
func (p *InProcess) Commit(inputNext int64) error {
	if err := p.Flush(); err != nil {
		return err
	}
	if err := p.Prepare(); err != nil {
		return err
	}
	return p.CommitPrepared(inputNext)
}

// Prepare is a commit's second step, after Flush: every transactional
// sink prepares; a failure rolls every task back. An owner of several
// InProcess prepares them all before it commits any (CommitPrepared).
func (p *InProcess) Prepare() error {
	for _, t := range p.tasks {
		if c, ok := t.Proc.(TaskCommitter); ok {
			if err := c.Prepare(); err != nil {
				// Nothing is committed yet: everything rolls back, as
				// the worker aborts the Kafka transaction.
				p.Rollback()
				return fmt.Errorf("eddy: task %s: %w", t.ID(), err)
			}
		}
	}
	return nil
}

// CommitPrepared is a commit's last step, after Prepare: every task
// commits; a failure may leave some tasks committed and others not.
func (p *InProcess) CommitPrepared(inputNext int64) error {
	for _, t := range p.tasks {
		if p.opts.Input != nil {
			t.Consume(0, inputNext)
		}
		if err := t.Commit(); err != nil {
			return err
		}
		if c, ok := t.Proc.(TaskCommitter); ok {
			if err := c.Committed(); err != nil {
				return fmt.Errorf("eddy: task %s: %w", t.ID(), err)
			}
		}
	}
	return nil
}

// Rollback drops every task's uncommitted work and the queued records.
func (p *InProcess) Rollback() {
	for _, t := range p.tasks {
		t.Rollback()
		if f, ok := t.Proc.(TaskFlusher); ok {
			f.Discard()
		}
	}
	p.drained()
}

// Close drops uncommitted work (held table updates included, giving back
// their share of the table cache budget, which Reopen passes on) and
// closes the tasks.
func (p *InProcess) Close() error {
	var errs []error
	for _, t := range p.tasks {
		if f, ok := t.Proc.(TaskFlusher); ok {
			f.Discard()
		}
		errs = append(errs, t.close())
	}
	p.tasks = nil
	return errors.Join(errs...)
}

// Reopen closes p's tasks, dropping their uncommitted work as a crash
// would, and opens them again from their databases with p's options, as
// a restarted app does: what they committed (stores, stream time,
// offsets) carries over, processors start afresh. Offsets given to
// appended records carry on from p's. p is not usable afterwards.
func (p *InProcess) Reopen() (*InProcess, error) {
	if err := p.Close(); err != nil {
		return nil, err
	}
	q, err := NewInProcess(p.topo, p.opts)
	if err != nil {
		return nil, err
	}
	q.offsets, q.now = p.offsets, p.now
	return q, nil
}

func (t *InProcessTask) close() error {
	var err error
	if t.Proc != nil {
		err = t.Proc.Close()
	}
	return errors.Join(err, t.TaskState.Close())
}

func (t *InProcessTask) process(r *kgo.Record) error {
	if err := t.Proc.Process(r); err != nil {
		return fmt.Errorf("eddy: task %s: process %s/%d@%d: %w", t.ID(), r.Topic, r.Partition, r.Offset, err)
	}
	return nil
}

// TableCache is Options.TableCache.
func (t *InProcessTask) TableCache() *TableCacheBudget { return t.p.opts.TableCache }

// WallClock is the owner's wall clock (SetWallClock, Punctuate): a test's
// deterministic clock, or the runner's, refreshed once per batch.
func (t *InProcessTask) WallClock() int64 { return t.p.now }

func (t *InProcessTask) GlobalStore(name string) (GlobalReader, error) {
	g, ok := t.p.opts.Globals[name]
	if !ok {
		return nil, fmt.Errorf("eddy: the topology has no global store %q", name)
	}
	return g, nil
}

// ProduceTo is Produce to partition: every topic has one partition here,
// unless Options.Route lets the owner place the record.
func (t *InProcessTask) ProduceTo(topic string, partition int32, key, value []byte, timestamp int64, headers []kgo.RecordHeader) error {
	return t.produce(topic, partition, key, value, timestamp, headers)
}

// Produce hands the record to Out and, for a topic the topology reads,
// queues it with the topic's next offset (with Options.Route, the owner
// does).
func (t *InProcessTask) Produce(topic string, key, value []byte, timestamp int64, headers []kgo.RecordHeader) error {
	return t.produce(topic, -1, key, value, timestamp, headers)
}

func (t *InProcessTask) produce(topic string, partition int32, key, value []byte, timestamp int64, headers []kgo.RecordHeader) error {
	p := t.p
	if err := CheckRecordSize(topic, key, value, headers, p.opts.MaxRecordBytes); err != nil {
		return err // as Run refuses it
	}
	read := p.reader(topic) != nil
	queue := read && !p.opts.Route
	var offset int64
	if queue {
		offset = p.Append(topic)
	}
	if timestamp < 0 {
		timestamp = p.now // NoTimestamp: the producer's clock
	}
	if !p.opts.Route {
		partition = 0 // the only one
	}
	if p.opts.Out != nil {
		o := &p.out
		o.Topic, o.Partition, o.Key, o.Value, o.Headers, o.Timestamp, o.Offset = topic, partition, key, value, headers, time.UnixMilli(timestamp), offset
		p.opts.Out(o, read)
	}
	if !queue {
		return nil
	}
	q := queued{
		topic: topic, key: p.arena.copy(key), value: p.arena.copy(value),
		timestamp: timestamp, offset: offset,
	}
	if len(headers) > 0 {
		q.headers = make([]kgo.RecordHeader, len(headers))
		for i, h := range headers {
			q.headers[i] = kgo.RecordHeader{Key: h.Key, Value: p.arena.copy(h.Value)}
		}
	}
	p.queue.Append(q)
	return nil
}
