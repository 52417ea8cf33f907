package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/state"
)

// Bounded runs (Config.Bounded, docs/design.md §5.3): each external source
// partition is read up to the end offset it had when its task first
// opened, the end travels to downstream sub-topologies in-band, as end
// markers on the repartition topics (as Flink's EndOfPartition events do),
// and a task whose inputs have all ended runs its operators' end of input
// (TaskInputEnder) inside its transaction.
//
// What a task knows of its end is state, kept in a store of the runtime's
// own (endStore) that every sub-topology gets in a bounded run, so it is
// logged to a changelog, committed with the transaction that made it and
// restored with the task wherever it moves:
//
//   - endBoundKey: the end offsets of its external source partitions,
//     written with its first transaction, so a restart keeps the bound;
//   - endSeenKey(topic, task): the end marker of an upstream task seen on
//     a repartition source (markers are counted per upstream task, so
//     one read twice counts once);
//   - endEndedKey: the task ended. It is written in the transaction that
//     ran the end of input and produced the task's end markers, so an end
//     is neither lost (an abort drops the markers too, and the next owner
//     ends again) nor doubled (a task that reads it ended does nothing).
const (
	// EndOfInputTime is the stream time the end of a bounded input moves
	// a task to; eddy.EndOfInputTime is this.
	EndOfInputTime int64 = 1 << 62

	// endMarkerHeader names the header of an end marker: an empty record
	// whose header value is the id of the task that ended ("0_3").
	endMarkerHeader = "eddy.end"

	endBoundKey = "bound"
	endEndedKey = "ended"
	endSeenPfx  = "seen\x00"
)

// endStore is the name of sub-topology i's end store in a bounded run.
func endStore(i int) string { return "eddy-end-" + strconv.Itoa(i) }

// EndedTopic is the topic a bounded run's tasks record their end in (one
// record per task, keyed by its id, produced in the transaction that ended
// it): every instance reads it to know when the whole run has ended.
func EndedTopic(appID string) string { return appID + "-ended" }

// IsEndMarker reports whether r is a bounded run's end marker, not a
// record of the topology (a check that counts the records of a
// repartition topic skips it).
func IsEndMarker(r *kgo.Record) bool {
	for _, h := range r.Headers {
		if h.Key == endMarkerHeader {
			return true
		}
	}
	return false
}

// withEndStores returns topo with an end store added to every
// sub-topology, for a bounded run. The stores are the runtime's: no
// processor uses them.
func withEndStores(topo Topology) Topology {
	subs := slices.Clone(topo.Subtopologies)
	for i := range subs {
		subs[i].Stores = append(slices.Clone(subs[i].Stores), Store{Name: endStore(i)})
	}
	topo.Subtopologies = subs
	return topo
}

// checkBounded refuses what a bounded run cannot end: source patterns (the
// set of sources changes), a repartition topic whose writers are unknown
// (its readers could not count the markers they wait for), sub-topologies
// that feed each other (a foreign-key join's subscription and response
// topics: each would wait for the other's end), and a topic the topology
// writes with To and reads back with Source (no end markers travel on it:
// its readers would stop at the end offset it had when they opened, and
// drop what the writer wrote later).
func checkBounded(topo Topology) error {
	if topo.hasPatterns() {
		return errors.New("eddy: Config.StopAtEndOffsets: the topology reads a source pattern, whose topics can change; bounded runs need named sources")
	}
	order := topo.EndOrder()
	pos := make([]int, len(order))
	for i, s := range order {
		pos[s] = i
	}
	var errs []error
	for _, r := range topo.Repartitions {
		if len(r.Writers) == 0 {
			errs = append(errs, fmt.Errorf("eddy: Config.StopAtEndOffsets: repartition topic %s has no known writers, so its readers cannot count the end markers they wait for", r.Topic))
		}
		for i, s := range topo.Subtopologies {
			if !slices.Contains(s.Sources, r.Topic) {
				continue
			}
			for _, w := range r.Writers {
				if pos[w] >= pos[i] {
					errs = append(errs, fmt.Errorf("eddy: Config.StopAtEndOffsets: sub-topologies %d and %d feed each other through %s (a foreign-key join, or a sub-topology that reads a repartition topic it writes); bounded runs do not end such a topology yet, run it unbounded", w, i, r.Topic))
				}
			}
		}
	}
	for w, s := range topo.Subtopologies {
		for _, topic := range s.Writes {
			if slices.ContainsFunc(topo.Repartitions, func(r Repartition) bool { return r.Topic == topic }) {
				continue
			}
			for i, reader := range topo.Subtopologies {
				if slices.Contains(reader.Sources, topic) {
					errs = append(errs, fmt.Errorf("eddy: Config.StopAtEndOffsets: topic %s is written by sub-topology %d (To) and read back by sub-topology %d (Source); no end marker travels on it, so a bounded run could not tell when it ends: use eddy.Repartition between them, or run unbounded", topic, w, i))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// planEnds records, for a bounded run, how many end markers each
// repartition source waits for (one per task of the sub-topologies that
// write it) and which topics each sub-topology writes markers to, given
// every source's partition count; and the number of tasks of the app.
func planEnds(p *plan, repartitions []Repartition, parts map[string]int32) {
	tasks := func(sub int) int {
		if len(p.subs[sub].Sources) == 0 {
			return 0
		}
		return int(parts[p.subs[sub].Sources[0]])
	}
	p.taskCount = 0
	for i := range p.subs {
		p.taskCount += tasks(i)
		p.subs[i].endWant = make([]int, len(p.subs[i].Sources))
		p.subs[i].markers = nil
	}
	for _, r := range repartitions {
		want := 0
		for _, w := range r.Writers {
			want += tasks(w)
			p.subs[w].markers = append(p.subs[w].markers, topicCount{r.Topic, parts[r.Topic]})
		}
		for i := range p.subs {
			if src := slices.Index(p.subs[i].Sources, r.Topic); src >= 0 {
				p.subs[i].endWant[src] = want
			}
		}
	}
}

// topicCount is a topic and its partition count.
type topicCount struct {
	topic      string
	partitions int32
}

// taskEnd is what a task of a bounded run knows of its end. The stored
// part (bound, seen, ended) mirrors the end store as of the open
// transaction; an abort reloads it (load).
type taskEnd struct {
	store *state.StoreBuffer
	// bound[i] is the end offset of external source i (nil until known);
	// want[i] > 0 marks a repartition source and is the number of end
	// markers it waits for, seen[i] the upstream tasks whose marker it
	// has processed.
	bound      []int64
	boundSaved bool
	want       []int
	seen       []map[string]bool
	// fetched[i] is the offset after the last record of source i the
	// consumer delivered (commit markers included), up to the bound, or
	// the log's start when the bound was listed (nothing before it can
	// be delivered: a partition emptied by retention ends at once).
	fetched []int64
	start   []int64
	ended   bool
}

// openEnd loads t's end from its end store.
func (t *task) openEnd() error {
	t.end = &taskEnd{
		store:   t.buf.Store(endStore(t.id.Subtopology)),
		want:    t.sub.endWant,
		seen:    make([]map[string]bool, len(t.sources)),
		fetched: make([]int64, len(t.sources)),
		start:   make([]int64, len(t.sources)),
	}
	return t.end.load(t)
}

// load reads the stored end (the committed one after a rollback) and
// starts the consumed positions at the state's.
func (e *taskEnd) load(t *task) error {
	for i := range e.fetched {
		e.fetched[i] = max(t.skip[i], e.start[i])
	}
	v, ok, err := e.store.Get([]byte(endEndedKey))
	if err != nil {
		return err
	}
	e.ended = ok && len(v) > 0
	v, ok, err = e.store.Get([]byte(endBoundKey))
	if err != nil {
		return err
	}
	e.boundSaved = ok
	if ok {
		bounds, _, err := decodeOffsetsRecord(v)
		if err != nil {
			return fmt.Errorf("eddy: task %s: end bound: %w", t.id, err)
		}
		e.bound = make([]int64, len(t.sources))
		for i, tp := range t.sources {
			e.bound[i] = bounds[tp]
		}
	}
	for i := range e.seen {
		clear(e.seen[i])
	}
	return e.store.PrefixScan([]byte(endSeenPfx), func(key, _ []byte) error {
		topic, id, ok := splitSeenKey(key)
		if i := t.sourceIndex(topic); ok && i >= 0 {
			if e.seen[i] == nil {
				e.seen[i] = make(map[string]bool)
			}
			e.seen[i][id] = true
		}
		return nil
	})
}

func seenKey(topic, id string) []byte { return []byte(endSeenPfx + topic + "\x00" + id) }

func splitSeenKey(key []byte) (topic, id string, ok bool) {
	rest := string(key[len(endSeenPfx):])
	for i := range len(rest) {
		if rest[i] == 0 {
			return rest[:i], rest[i+1:], true
		}
	}
	return "", "", false
}

// delivered notes a poll's records rs of source src and returns those
// before the source's bound: records past it are not the run's input.
func (e *taskEnd) delivered(src int, rs []*kgo.Record) []*kgo.Record {
	if e.want[src] > 0 || e.bound == nil || len(rs) == 0 {
		return rs
	}
	b := e.bound[src]
	e.fetched[src] = max(e.fetched[src], min(rs[len(rs)-1].Offset+1, b))
	n := len(rs)
	for n > 0 && rs[n-1].Offset >= b {
		n--
	}
	return rs[:n]
}

// inputEnded reports whether source i has ended for t: every record
// before its bound was delivered, or every upstream task's end marker
// seen; and processed.
func (t *task) inputEnded(i int) bool {
	e := t.end
	if t.held(i) > 0 {
		return false
	}
	if e.want[i] > 0 {
		return len(e.seen[i]) >= e.want[i]
	}
	return e.bound != nil && max(e.fetched[i], t.next[i]) >= e.bound[i]
}

// takeEndMarker processes r if it is an end marker: the upstream task it
// names has ended on this partition. It reports whether r was one.
func (t *task) takeEndMarker(src int, r *kgo.Record) bool {
	if t.end.want[src] == 0 || !IsEndMarker(r) {
		return false
	}
	var id string
	for _, h := range r.Headers {
		if h.Key == endMarkerHeader {
			id = string(h.Value)
		}
	}
	if !t.end.seen[src][id] {
		if t.end.seen[src] == nil {
			t.end.seen[src] = make(map[string]bool)
		}
		t.end.seen[src][id] = true
		t.end.store.Put(seenKey(r.Topic, id), []byte{})
	}
	return true
}

// listBounds sets the bound of the tasks that have none stored: the last
// stable offset of each external source partition now. It is written with
// the task's next transaction (endTasks): a task whose first transaction
// aborts committed nothing, and its next open lists the bound anew.
func (w *worker) listBounds(ctx context.Context, tasks []*task) error {
	var topics []string
	for _, t := range tasks {
		if t.end == nil || t.end.bound != nil {
			continue
		}
		for i, tp := range t.sources {
			if t.end.want[i] == 0 && !slices.Contains(topics, tp.Topic) {
				topics = append(topics, tp.Topic)
			}
		}
	}
	adm := kadm.NewClient(w.cl)
	var ends, starts kadm.ListedOffsets
	if len(topics) > 0 {
		var err error
		ends, err = adm.ListCommittedOffsets(ctx, topics...)
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			starts, err = adm.ListStartOffsets(ctx, topics...)
			if err == nil {
				err = starts.Error()
			}
		}
		if err != nil {
			return fmt.Errorf("eddy: the end offsets of the sources of a bounded run: %w", err)
		}
	}
	for _, t := range tasks {
		if t.end == nil || t.end.bound != nil {
			continue
		}
		t.end.bound = make([]int64, len(t.sources))
		for i, tp := range t.sources {
			if t.end.want[i] > 0 {
				continue
			}
			end, okEnd := ends.Lookup(tp.Topic, tp.Partition)
			start, okStart := starts.Lookup(tp.Topic, tp.Partition)
			if !okEnd || !okStart {
				return fmt.Errorf("eddy: the offsets of %s/%d, a source of a bounded run, were not listed", tp.Topic, tp.Partition)
			}
			t.end.bound[i], t.end.start[i] = end.Offset, min(start.Offset, end.Offset)
			t.end.fetched[i] = max(t.end.fetched[i], t.end.start[i])
		}
		t.log.Info("bounded run: the task reads its sources up to these offsets", "bound", fmt.Sprint(t.end.bound))
	}
	return nil
}

// endTasks runs, for each task of a bounded run, what its end needs in
// the open transaction (begun here if none is): the bound written with
// the first one; the consumed position of an external source that ended
// moved to its bound (so a restart, which the group's offset may place
// past records the bound excluded, finds it ended); and, once every input
// has ended, the end itself.
func (w *worker) endTasks() error {
	for _, t := range w.sortedTasks() {
		e := t.end
		if e == nil || e.ended || e.bound == nil {
			continue
		}
		if !e.boundSaved {
			if err := w.begin(); err != nil {
				return err
			}
			input := make(map[state.TopicPartition]int64, len(t.sources))
			for i, tp := range t.sources {
				if e.want[i] == 0 {
					input[tp] = e.bound[i]
				}
			}
			e.store.Put([]byte(endBoundKey), appendOffsetsRecord(nil, input, 0))
			e.boundSaved, t.dirty = true, true
		}
		ended := true
		for i := range t.sources {
			if !t.inputEnded(i) {
				ended = false
				continue
			}
			if e.want[i] == 0 && t.next[i] < e.bound[i] {
				if err := w.begin(); err != nil {
					return err
				}
				t.next[i], t.dirty = e.bound[i], true
			}
		}
		if ended {
			if err := w.begin(); err != nil {
				return err
			}
			if err := w.endTask(t); err != nil {
				return err
			}
		}
	}
	return nil
}

// endTask ends t's input in the open transaction: its operators act at
// EndOfInputTime (windows emit their finals), what they hold back is
// forwarded, then the task writes its end markers, after everything it
// produced, to every partition of the repartition topics its
// sub-topology writes, and records its end in its end store and in the
// ended topic.
func (w *worker) endTask(t *task) error {
	if ender, ok := t.proc.(TaskInputEnder); ok {
		if err := t.endOfInput(ender); err != nil {
			return w.taskError(t, "end of input", err)
		}
	}
	if f, ok := t.proc.(TaskFlusher); ok {
		if err := t.flush(f); err != nil {
			return w.taskError(t, "end of input", err)
		}
	}
	id := []byte(t.id.String())
	headers := []kgo.RecordHeader{{Key: endMarkerHeader, Value: id}}
	for _, m := range t.sub.markers {
		for p := range m.partitions {
			if _, err := w.produceRecord(m.topic, p, nil, nil, -1, headers); err != nil {
				return err
			}
		}
	}
	if _, err := w.produceRecord(EndedTopic(w.cfg.AppID), 0, id, []byte{}, -1, nil); err != nil {
		return err
	}
	t.end.store.Put([]byte(endEndedKey), []byte{1})
	t.end.ended, t.dirty = true, true
	t.flushMetrics(0, 0)
	t.log.Info("bounded run: the task's input ended")
	return nil
}

// endOfInput runs the task's end of input, turning a panic into an error
// as process does.
func (t *task) endOfInput(e TaskInputEnder) (err error) {
	defer recoverPanic(&err)
	return e.EndOfInput(EndOfInputTime)
}

// taskError is the worker's error for a task's processors failing in
// what: a corrupt database ends the session, a held update or a fenced
// sink too (processed again), anything else stops the app.
func (w *worker) taskError(t *task, what string, err error) error {
	if errors.Is(err, state.ErrCorrupt) {
		return t.corrupted(err)
	}
	err = fmt.Errorf("eddy: task %s: %s: %w", t.id, what, err)
	if errors.Is(err, ErrHeldUpdate) || errors.Is(err, ErrTaskFenced) {
		return err
	}
	return permanent(err)
}

// watchEnded reads the ended topic until every one of the app's tasks
// has recorded its end, and reports true then; false when ctx ends first.
// A failed read is logged and retried.
func (in *Instance) watchEnded(ctx context.Context, tasks int) bool {
	opts := append([]kgo.Opt{kgo.SeedBrokers(in.cfg.Brokers...),
		kgo.ConsumeTopics(EndedTopic(in.cfg.AppID)),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, kafka.RetryOptions()...)
	cl, err := kgo.NewClient(append(opts, in.cfg.ClientOpts...)...)
	if err != nil {
		in.cfg.Logger.Error("bounded run: cannot read the ended topic", "err", err)
		return false
	}
	defer cl.Close()
	ended := make(map[string]bool)
	for len(ended) < tasks {
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return false
		}
		if errs := f.Errors(); len(errs) > 0 {
			in.cfg.Logger.Warn("bounded run: reading the ended topic; retrying", "err", errs[0].Err)
			select {
			case <-ctx.Done():
				return false
			case <-time.After(time.Second):
			}
		}
		f.EachRecord(func(r *kgo.Record) { ended[string(r.Key)] = true })
	}
	return true
}
