package runtime

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddy-streams/eddy/state"
)

// Time alignment across a task's source partitions (docs/design.md §5.2),
// after Kafka Streams' PartitionGroup.readyToProcess (KIP-695): a task with
// several source partitions processes the record with the smallest
// timestamp among the heads of all of them, across polls, and holds what it
// buffered while a partition that has nothing buffered may still bring an
// earlier record.

// alignBuffer is how many unprocessed records a source partition of a
// waiting task may hold before its fetch pauses (Kafka Streams'
// buffered.records.per.partition default). A poll may bring more: the
// bound is this plus one poll's records.
const alignBuffer = 1000

// lagStall is how long a task waits for a partition that, by the offsets
// its fetches reported, holds records the task has not fetched, when none
// of them arrives. Records the broker holds arrive within a fetch or two;
// a partition whose tail the task can never see as a record (an empty
// batch a compaction left) would otherwise hold the task forever.
const lagStall = 30 * time.Second

// alignment is what a task with several source partitions keeps between
// polls to process them in timestamp order. A task with one source, or
// with MaxTaskIdle negative, has none and processes each poll's records as
// they come.
type alignment struct {
	// idle is Config.MaxTaskIdle: how long to wait for a partition that
	// has nothing buffered and nothing on the broker either.
	idle time.Duration
	// fetchedTo[i] is the offset after the last record of source i that
	// the consumer delivered, commit markers included (the worker keeps
	// control records for this), and end[i] the partition's last stable
	// offset as the broker last reported it; -1 while not known. A
	// partition lags while end > fetchedTo.
	fetchedTo []int64
	end       []int64
	// waitSince[i] is when the task began waiting for source i (zero: it
	// is not waiting), lagging[i] whether that wait is for records the
	// broker holds, and forced[i] whether the wait ended by time (it was
	// counted once).
	waitSince []time.Time
	lagging   []bool
	forced    []bool
	// paused[i] is set while the worker paused source i's fetch because it
	// buffered alignBuffer records.
	paused []bool
	// forcedCount is what forced waits added since the last flush.
	forcedCount int64
}

func newAlignment(sources int, idle time.Duration) *alignment {
	a := &alignment{
		idle:      idle,
		fetchedTo: make([]int64, sources),
		end:       make([]int64, sources),
		waitSince: make([]time.Time, sources),
		lagging:   make([]bool, sources),
		forced:    make([]bool, sources),
		paused:    make([]bool, sources),
	}
	a.forget()
	return a
}

// forget drops what the task knew of its partitions' positions: the
// consumer was rewound (an abort). Until the worker probes them again
// (reprobeInputs) or a fetch reports them, the task does not wait for what
// it cannot know is there.
func (a *alignment) forget() {
	for i := range a.fetchedTo {
		a.fetchedTo[i], a.end[i] = -1, -1
		a.waitSince[i], a.forced[i] = time.Time{}, false
	}
}

// fetched notes a poll's records of source i (rs, control records
// included) and the partition's end offset the fetch reported.
func (a *alignment) fetched(i int, rs []*kgo.Record, end int64) {
	if n := len(rs); n > 0 {
		a.fetchedTo[i] = rs[n-1].Offset + 1
	}
	if end >= 0 {
		a.end[i] = end
	}
}

// arrived ends a wait for source i: records of it are buffered.
func (a *alignment) arrived(i int) {
	a.waitSince[i], a.forced[i] = time.Time{}, false
}

// ready reports whether the task may process records of its other sources
// while source i has nothing buffered, at now. It waits while the broker
// holds records of i that the consumer has not delivered (at most
// lagStall without any arriving, or idle if longer), and, when idle is
// positive, that long for a partition with nothing on the broker either.
// A wait that ends by time is forced: counted once.
func (a *alignment) ready(i int, now time.Time) bool {
	lagging := a.fetchedTo[i] >= 0 && a.end[i] > a.fetchedTo[i]
	if !lagging && a.idle == 0 {
		a.waitSince[i] = time.Time{}
		return true
	}
	if a.waitSince[i].IsZero() || a.lagging[i] != lagging {
		a.waitSince[i], a.lagging[i], a.forced[i] = now, lagging, false
	}
	limit := a.idle
	if lagging {
		limit = max(a.idle, lagStall)
	}
	if now.Sub(a.waitSince[i]) < limit {
		return false
	}
	if !a.forced[i] {
		a.forced[i] = true
		a.forcedCount++
	}
	return true
}

// nextAligned returns the task's next record in timestamp order (ties: the
// source listed first), or nil when it has none or must wait for a source
// that has nothing buffered.
func (t *task) nextAligned(now time.Time) *kgo.Record {
	best := -1
	for i, rs := range t.pending {
		at := t.pendingAt[i]
		if at < len(rs) && (best < 0 || rs[at].Timestamp.Before(t.pending[best][t.pendingAt[best]].Timestamp)) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	for i, rs := range t.pending {
		// An input that ended brings nothing more: not waited for.
		if t.pendingAt[i] == len(rs) && (t.end == nil || !t.inputEnded(i)) && !t.align.ready(i, now) {
			return nil
		}
	}
	r := t.pending[best][t.pendingAt[best]]
	t.pending[best][t.pendingAt[best]] = nil
	t.pendingAt[best]++
	return r
}

// hold appends a poll's records of source src to what the task holds,
// dropping the processed ones first, and skipping control records (kept by
// the consumer only so that fetchedTo passes commit markers).
func (t *task) hold(src int, rs []*kgo.Record, end int64) {
	t.align.fetched(src, rs, end)
	held := t.pending[src]
	if at := t.pendingAt[src]; at > 0 {
		n := copy(held, held[at:])
		clear(held[n:])
		held, t.pendingAt[src] = held[:n], 0
	}
	before := len(held)
	for _, r := range rs {
		if !r.Attrs.IsControl() {
			held = append(held, r)
		}
	}
	if len(held) > before {
		t.align.arrived(src)
	}
	t.pending[src] = held
}

// held returns how many records of source i the task holds unprocessed.
func (t *task) held(i int) int { return len(t.pending[i]) - t.pendingAt[i] }

// holding reports whether the task holds unprocessed records.
func (t *task) holding() bool {
	for i := range t.pending {
		if t.held(i) > 0 {
			return true
		}
	}
	return false
}

// dropHeld drops every record the task holds: the consumer was rewound
// and delivers them again.
func (t *task) dropHeld() {
	for i := range t.pending {
		clear(t.pending[i])
		t.pending[i], t.pendingAt[i] = t.pending[i][:0], 0
	}
	if t.align != nil {
		t.align.forget()
	}
}

// aligns reports whether tasks with several sources align them: unless
// MaxTaskIdle is negative.
func (w *worker) aligns() bool { return w.cfg.MaxTaskIdle >= 0 }

// pausedPartition is a source partition whose fetch the worker paused.
type pausedPartition struct {
	id  TaskID
	src int
	tp  state.TopicPartition
}

// flowControl bounds what aligning tasks hold: it pauses the fetch of a
// source partition once its task holds alignBuffer of its records, and
// resumes it once the task holds less than half as many, or is gone.
func (w *worker) flowControl() {
	var pause, resume map[string][]int32
	kept := w.paused[:0]
	for _, p := range w.paused {
		t := w.tasks[p.id]
		if t != nil && t.align != nil && t.align.paused[p.src] && t.held(p.src) >= alignBuffer/2 {
			kept = append(kept, p)
			continue
		}
		if t != nil && t.align != nil {
			t.align.paused[p.src] = false
		}
		resume = addPartition(resume, p.tp)
	}
	clear(w.paused[len(kept):])
	w.paused = kept
	for _, t := range w.polled {
		if t.align == nil {
			continue
		}
		for i, tp := range t.sources {
			if !t.align.paused[i] && t.held(i) >= alignBuffer {
				t.align.paused[i] = true
				w.paused = append(w.paused, pausedPartition{id: t.id, src: i, tp: tp})
				t.log.Debug("fetch paused: the task holds enough records of the partition", "topic", tp.Topic, "partition", tp.Partition, "held", t.held(i))
				pause = addPartition(pause, tp)
			}
		}
	}
	if pause != nil {
		w.cl.PauseFetchPartitions(pause)
	}
	if resume != nil {
		w.cl.ResumeFetchPartitions(resume)
	}
}

func addPartition(m map[string][]int32, tp state.TopicPartition) map[string][]int32 {
	if m == nil {
		m = make(map[string][]int32)
	}
	m[tp.Topic] = append(m[tp.Topic], tp.Partition)
	return m
}

// commitHeldFrom returns ctx carrying a rewrite of the transaction's (or,
// at least once, the commit's) consumed offsets: the consumer's position
// is past the records that aligning tasks hold unprocessed, and committing
// it would lose them to a crash. Such a partition commits the offset of
// the first record its task holds instead.
func (w *worker) commitHeldFrom(ctx context.Context) context.Context {
	if !w.keepControl {
		return ctx
	}
	var from map[string]map[int32]int64
	for _, t := range w.tasks {
		if t.align == nil {
			continue
		}
		for i, tp := range t.sources {
			if t.held(i) == 0 {
				continue
			}
			if from == nil {
				from = make(map[string]map[int32]int64)
			}
			if from[tp.Topic] == nil {
				from[tp.Topic] = make(map[int32]int64)
			}
			from[tp.Topic][tp.Partition] = t.pending[i][t.pendingAt[i]].Offset
		}
	}
	if from == nil {
		return ctx
	}
	// The two requests' partitions are different types with the same
	// fields; rewrite serves both.
	rewrite := func(topic string, partition int32, offset *int64, epoch *int32) {
		if off, ok := from[topic][partition]; ok {
			*offset, *epoch = off, -1
		}
	}
	ctx = kgo.PreTxnCommitFnContext(ctx, func(req *kmsg.TxnOffsetCommitRequest) error {
		for i := range req.Topics {
			for j := range req.Topics[i].Partitions {
				p := &req.Topics[i].Partitions[j]
				rewrite(req.Topics[i].Topic, p.Partition, &p.Offset, &p.LeaderEpoch)
			}
		}
		return nil
	})
	return kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			for j := range req.Topics[i].Partitions {
				p := &req.Topics[i].Partitions[j]
				rewrite(req.Topics[i].Topic, p.Partition, &p.Offset, &p.LeaderEpoch)
			}
		}
		return nil
	})
}

// probeInputs tells aligning tasks where the consumer starts each of their
// source partitions and where the partition ends (its last stable offset).
// The consumer reports a partition's end only with records, so without
// this a task would not know, until its first fetch of a partition,
// whether the broker holds records of it earlier than those of its other
// partitions. group are the group's offsets the consumer starts from
// (absent: none, the log's start). A probe that fails is logged: the tasks
// then learn the ends from their fetches only.
func (w *worker) probeInputs(ctx context.Context, tasks []*task, group map[string]map[int32]int64) {
	var topics []string
	for _, t := range tasks {
		if t.align == nil {
			continue
		}
		for _, tp := range t.sources {
			if !slices.Contains(topics, tp.Topic) {
				topics = append(topics, tp.Topic)
			}
		}
	}
	if len(topics) == 0 {
		return
	}
	adm := kadm.NewClient(w.cl)
	ends, err := adm.ListCommittedOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	var starts kadm.ListedOffsets
	if err == nil {
		starts, err = adm.ListStartOffsets(ctx, topics...)
		if err == nil {
			err = starts.Error()
		}
	}
	if err != nil {
		w.log.Warn("could not list the source partitions' offsets; tasks learn them from their next fetches", "err", err)
		return
	}
	for _, t := range tasks {
		if t.align == nil {
			continue
		}
		for i, tp := range t.sources {
			end, okEnd := ends.Lookup(tp.Topic, tp.Partition)
			start, okStart := starts.Lookup(tp.Topic, tp.Partition)
			if !okEnd || !okStart {
				continue
			}
			// Where the consumer starts: the later of the group's
			// offset and the state's (adjustOffsets), or the log's
			// start when the group has none or one before it.
			from := max(start.Offset, t.skip[i])
			if g, ok := group[tp.Topic][tp.Partition]; ok {
				from = max(from, g)
			}
			t.align.fetchedTo[i], t.align.end[i] = from, end.Offset
		}
	}
}

// groupOffsets returns the offsets of a group offset fetch that name a
// position (not "the start").
func groupOffsets(offsets map[string]map[int32]kgo.Offset) map[string]map[int32]int64 {
	m := make(map[string]map[int32]int64, len(offsets))
	for topic, ps := range offsets {
		m[topic] = make(map[int32]int64, len(ps))
		for p, o := range ps {
			if at := o.EpochOffset().Offset; at >= 0 {
				m[topic][p] = at
			}
		}
	}
	return m
}

// reprobeInputs probes every aligning task's partitions again after an
// abort rewound the consumer to the group's committed offsets (the tasks
// forgot their positions when they dropped what they held).
func (w *worker) reprobeInputs() {
	w.reprobe = false
	committed := w.cl.CommittedOffsets()
	group := make(map[string]map[int32]int64, len(committed))
	for topic, ps := range committed {
		group[topic] = make(map[int32]int64, len(ps))
		for p, o := range ps {
			group[topic][p] = o.Offset
		}
	}
	ctx, cancel := context.WithTimeout(w.runCtx, w.cfg.SessionTimeout)
	defer cancel()
	w.probeInputs(ctx, w.sortedTasks(), group)
}
