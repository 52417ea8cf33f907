package local

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/internal/runtime"
)

// roundEvents is the number of source records a parallel round covers: a
// round ends at a barrier of every worker, so it is large enough that the
// barriers cost little next to the records, and small enough that a
// repartitioned record is not held back long.
const roundEvents = 4096

// parallel runs the topology over N partitions, as eddy runs on Kafka with
// N partitions per topic: worker p owns task (s, p) of every sub-topology
// s, an InProcess of its own, on a goroutine of its own. A record goes to
// the partition of its key (Kafka's default partitioner, murmur2, as the
// runtime's producer places it), for source topics (as nexmark.Produce
// writes them) and repartition topics alike. The source's work is split
// as Flink's parallel Nexmark source splits it: worker w generates the
// indexes i ≡ w (mod N) and routes each record to the worker of its
// partition.
//
// It works in rounds, so that a run is deterministic and every commit
// is a consistent cut: a round generates and routes the indexes of a
// range; then every worker processes what it was sent (step, deliver),
// what that writes to topics the topology reads is routed and processed
// in turn, and so on until nothing is in flight. Commits, punctuation
// and the end of input happen between rounds, every worker at once.
type parallel struct {
	topo    runtime.Topology
	workers []*worker
	sink    Sink
}

// worker owns one partition: its InProcess, its share of the source and
// the records it routed in the current step.
type worker struct {
	part  int32
	run   *runtime.InProcess
	src   Source
	peers []*worker
	// rec is the source's record; qrec carries routed records to the
	// tasks.
	rec, qrec kgo.Record
	// out[d] holds the records routed to partition d in the current
	// step; in holds those of the step before, which partition d's
	// worker reads in this one.
	out, in []inbox
	// sunk holds the records for the sink written in the current step:
	// the coordinator hands them to the sink after the step, so the sink
	// runs on one goroutine and the workers never wait for each other
	// on it (a lock around the bench's check cost more than it saved).
	sunk inbox
	// heads are the positions in each peer's inbox while delivering.
	heads []int
	// origin is the source index that the record being processed stems
	// from: records are delivered in origin order, as the single runner
	// processes them, whichever worker routed them.
	origin int64
	// spread places records without a key, round robin, as Kafka's
	// producer spreads them.
	spread uint32
	// err is a record the tasks wrote that cannot be placed.
	err error
	// steps carries the coordinator's steps to the worker's goroutine,
	// done their results back.
	steps chan func(*worker) error
	done  chan error
}

// inbox holds routed records, their bytes carved from one arena.
type inbox struct {
	recs  []routed
	arena []byte
}

type routed struct {
	topic      string
	key, value []byte
	headers    []kgo.RecordHeader
	timestamp  int64
	origin     int64
	// source marks a source record: its offset is its source index, as
	// in the single runner, so errors name the event.
	source bool
	// nilKey and tombstone keep nil apart from empty, which the arena
	// cannot.
	nilKey, tombstone bool
}

func newParallel(topo runtime.Topology, sources []Source, cfg Config) (*parallel, error) {
	n := len(sources)
	p := &parallel{topo: topo, sink: cfg.Sink}
	for i, src := range sources {
		w := &worker{part: int32(i), src: src, out: make([]inbox, n), in: make([]inbox, n), heads: make([]int, n)}
		for d := range n {
			w.out[d].reset()
			w.in[d].reset()
		}
		w.sunk.reset()
		run, err := openPartition(topo, cfg, w.part, cfg.TableCacheBytes/int64(n), true, w.written)
		if err != nil {
			p.close()
			return nil, err
		}
		w.run = run
		w.steps, w.done = make(chan func(*worker) error), make(chan error)
		go w.loop()
		p.workers = append(p.workers, w)
	}
	for _, w := range p.workers {
		w.peers = p.workers
	}
	return p, nil
}

func (w *worker) loop() {
	for f := range w.steps {
		w.done <- f(w)
	}
}

// step runs f on every worker at once and waits for all: a barrier. It
// returns the error of the lowest-numbered worker that failed.
func (p *parallel) step(f func(*worker) error) error {
	for _, w := range p.workers {
		w.steps <- f
	}
	var first error
	for _, w := range p.workers {
		if err := <-w.done; err != nil && first == nil {
			first = err
		}
	}
	for _, w := range p.workers {
		for i := range w.sunk.recs {
			q := &w.sunk.recs[i]
			q.fill(&w.qrec, w.part)
			p.sink(q.topic, w.qrec.Key, w.qrec.Value, q.timestamp)
		}
		w.sunk.reset()
	}
	return first
}

// settle delivers the routed records, and those they lead to, until
// nothing is in flight.
func (p *parallel) settle() error {
	for p.inFlight() {
		for _, w := range p.workers {
			w.in, w.out = w.out, w.in
			for d := range w.out {
				w.out[d].reset()
			}
		}
		if err := p.step((*worker).deliver); err != nil {
			return err
		}
	}
	return nil
}

func (p *parallel) inFlight() bool {
	for _, w := range p.workers {
		for _, b := range w.out {
			if len(b.recs) > 0 {
				return true
			}
		}
	}
	return false
}

func (p *parallel) process(from, to int64) error {
	if err := p.step(func(w *worker) error { return w.generate(from, to) }); err != nil {
		return err
	}
	return p.settle()
}

func (p *parallel) setWallClock(ms int64) {
	// The workers are between steps: the next step's hand-over orders
	// this write before their reads.
	for _, w := range p.workers {
		w.run.SetWallClock(ms)
	}
}

func (p *parallel) punctuate(now time.Time) error {
	if err := p.step(func(w *worker) error { w.origin = 0; return w.run.Punctuate(now) }); err != nil {
		return err
	}
	return p.settle()
}

// commit flushes every worker's table caches, delivering what they
// forward, until a flush forwards nothing to the topology; then every
// task prepares, and only then does any commit.
func (p *parallel) commit(next int64) error {
	for {
		if err := p.step(func(w *worker) error { w.origin = 0; return w.run.Flush() }); err != nil {
			return err
		}
		if !p.inFlight() {
			break
		}
		if err := p.settle(); err != nil {
			return err
		}
	}
	if err := p.step(func(w *worker) error { return w.run.Prepare() }); err != nil {
		p.rollback()
		return err
	}
	return p.step(func(w *worker) error { return w.run.CommitPrepared(next) })
}

// endOfInput ends the sub-topologies one by one in EndOrder: each
// worker ends its task of s, and what they emit is delivered before the
// next is ended.
func (p *parallel) endOfInput(end int64) error {
	for _, s := range p.topo.EndOrder() {
		if err := p.step(func(w *worker) error { w.origin = 0; return w.run.EndTask(s, end) }); err != nil {
			return err
		}
		if err := p.settle(); err != nil {
			return err
		}
	}
	return nil
}

func (p *parallel) rollback() {
	p.step(func(w *worker) error {
		w.run.Rollback()
		for d := range w.out {
			w.out[d].reset()
			w.in[d].reset()
		}
		w.err = nil
		return nil
	})
}

func (p *parallel) close() error {
	var first error
	for _, w := range p.workers {
		close(w.steps)
		if err := w.run.Close(); err != nil && first == nil {
			first = err
		}
	}
	p.workers = nil
	return first
}

// generate reads this worker's share of source records [from, to) and
// routes each to the partition of its key.
func (w *worker) generate(from, to int64) error {
	n := int64(len(w.peers))
	first := from + ((int64(w.part)-from)%n+n)%n
	for i := first; i < to; i += n {
		rec := &w.rec
		if !w.src.Read(i, rec) || !w.run.Reads(rec.Topic) {
			continue
		}
		rec.Partition = -1
		w.route(rec, i, true)
	}
	return w.err
}

// written is the InProcess's Out: a record for a topic the topology
// reads is routed, any other goes to the sink.
func (w *worker) written(rec *kgo.Record, read bool) {
	if !read {
		w.sunk.add(rec, w.origin, false)
		return
	}
	w.route(rec, w.origin, false)
}

// route copies rec into the inbox of its partition: the one the writer
// chose, else its key's.
func (w *worker) route(rec *kgo.Record, origin int64, source bool) {
	n := int32(len(w.peers))
	d := rec.Partition
	switch {
	case d >= n:
		if w.err == nil {
			w.err = fmt.Errorf("a record for %s partition %d: the runner has %d partitions (one per worker)", rec.Topic, d, n)
		}
		return
	case d >= 0:
	case rec.Key == nil:
		d = int32(w.spread % uint32(n))
		w.spread++
	default:
		d = kafka.KeyPartition(rec.Key, n)
	}
	w.out[d].add(rec, origin, source)
}

// deliver processes the records the workers routed to this one in the
// last step, in origin order (ties: by worker), and routes what they
// lead to.
func (w *worker) deliver() error {
	clear(w.heads)
	for {
		best := -1
		var at int64
		for k, peer := range w.peers {
			recs := peer.in[w.part].recs
			if h := w.heads[k]; h < len(recs) && (best < 0 || recs[h].origin < at) {
				best, at = k, recs[h].origin
			}
		}
		if best < 0 {
			return w.err
		}
		q := &w.peers[best].in[w.part].recs[w.heads[best]]
		w.heads[best]++
		w.origin = q.origin
		q.fill(&w.qrec, w.part)
		if !q.source {
			w.qrec.Offset = w.run.Append(q.topic)
		}
		if err := w.run.Process(&w.qrec); err != nil {
			return fmt.Errorf("local: %w", err)
		}
		if w.err != nil {
			return w.err
		}
	}
}

func (b *inbox) reset() {
	clear(b.recs)
	b.recs = b.recs[:0]
	// The arena stays non-nil: slices of a nil one are nil, and an
	// empty key or value would come out as a null one.
	if b.arena == nil {
		b.arena = make([]byte, 0, 4096)
	}
	b.arena = b.arena[:0]
}

// add copies r's bytes into the arena. Earlier records keep theirs when
// the arena grows: they point into the old array.
func (b *inbox) add(r *kgo.Record, origin int64, source bool) {
	start := len(b.arena)
	b.arena = append(b.arena, r.Key...)
	b.arena = append(b.arena, r.Value...)
	mid := start + len(r.Key)
	q := routed{
		topic: r.Topic, key: b.arena[start:mid:mid], value: b.arena[mid:len(b.arena):len(b.arena)],
		timestamp: r.Timestamp.UnixMilli(), origin: origin, source: source, nilKey: r.Key == nil, tombstone: r.Value == nil,
	}
	if len(r.Headers) > 0 {
		q.headers = make([]kgo.RecordHeader, len(r.Headers))
		for i, h := range r.Headers {
			hs := len(b.arena)
			b.arena = append(b.arena, h.Value...)
			q.headers[i] = kgo.RecordHeader{Key: h.Key, Value: b.arena[hs:len(b.arena):len(b.arena)]}
		}
	}
	b.recs = append(b.recs, q)
}

func (q *routed) fill(r *kgo.Record, partition int32) {
	r.Topic, r.Partition, r.Key, r.Value, r.Headers = q.topic, partition, q.key, q.value, q.headers
	r.Timestamp = time.UnixMilli(q.timestamp)
	r.Offset = q.origin
	if q.nilKey {
		r.Key = nil
	}
	if q.tombstone {
		r.Value = nil
	}
}
