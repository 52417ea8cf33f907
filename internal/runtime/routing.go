package runtime

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// plan is a Topology checked and indexed for routing: which sub-topology
// reads a topic, and each sub-topology's stores and changelogs. Workers and
// the group balancer share one.
type plan struct {
	subs []subPlan
	// subOf maps every source topic to the sub-topology that reads it.
	subOf map[string]int
	// sources are every source topic, sorted; changelogs every changelog.
	sources    []string
	changelogs []string
	// taskCount is the number of the app's tasks, set with the partition
	// counts for a bounded run (planEnds).
	taskCount int
}

type subPlan struct {
	*Subtopology
	index int
	// storeNames[i] is the name of Stores[i], changelogs[i] its changelog.
	storeNames []string
	changelogs []string
	storeIndex map[string]int
	// copartitioned is the partition count of each source when the
	// sub-topology reads more than one (set by prepareTopics once it has
	// checked they agree), or 0: the partition guard checks the keys of
	// co-partitioned sources only.
	copartitioned int32
	// In a bounded run (planEnds): endWant[i] is the number of end
	// markers source i waits for (0: an external source, which ends at
	// its bound), markers the repartition topics the sub-topology writes
	// its tasks' end markers to.
	endWant []int
	markers []topicCount
}

// newPlan checks the topology and indexes it. A topic is read by one
// sub-topology only (two processors reading one topic belong to one
// sub-topology, as in Kafka Streams), and store names are unique across
// the topology (the changelog name carries the store name only).
func newPlan(appID string, topo Topology) (*plan, error) {
	var errs []error
	if len(topo.Subtopologies) == 0 {
		errs = append(errs, errors.New("eddy: the topology has no sub-topology; add a source"))
	}
	p := &plan{subOf: make(map[string]int)}
	sources := map[string]bool{}
	for _, s := range topo.Subtopologies {
		for _, topic := range s.Sources {
			sources[topic] = true
		}
	}
	for _, g := range topo.Globals {
		if !ValidName(g.Name) || g.Topic == "" {
			errs = append(errs, fmt.Errorf("eddy: global store %q (topic %q): name it with letters, digits, '.', '_' and '-', and give it a topic", g.Name, g.Topic))
		}
		if sources[g.Topic] {
			errs = append(errs, fmt.Errorf("eddy: global store %q reads topic %s, a source of the topology too; read it once", g.Name, g.Topic))
		}
	}
	storeSub := make(map[string]int)
	for i := range topo.Subtopologies {
		s := &topo.Subtopologies[i]
		sp := subPlan{Subtopology: s, index: i, storeIndex: make(map[string]int)}
		if len(s.Sources) == 0 && len(s.Patterns) == 0 {
			errs = append(errs, fmt.Errorf("eddy: sub-topology %d has no source topic", i))
		}
		if s.NewTask == nil {
			errs = append(errs, fmt.Errorf("eddy: sub-topology %d has no NewTask", i))
		}
		for _, topic := range s.Sources {
			if j, dup := p.subOf[topic]; dup {
				errs = append(errs, fmt.Errorf("eddy: topic %s is a source of sub-topology %d and %d; a topic may feed one sub-topology only (merge them)", topic, j, i))
				continue
			}
			p.subOf[topic] = i
			p.sources = append(p.sources, topic)
		}
		for si, st := range s.Stores {
			if !ValidName(st.Name) {
				errs = append(errs, fmt.Errorf("eddy: sub-topology %d: store name %q: use letters, digits, '.', '_' and '-' (it names the changelog topic)", i, st.Name))
			}
			if j, dup := storeSub[st.Name]; dup {
				errs = append(errs, fmt.Errorf("eddy: store %q is declared by sub-topology %d and %d; store names must be unique (they name the changelog topic)", st.Name, j, i))
				continue
			}
			if st.Retention < 0 {
				errs = append(errs, fmt.Errorf("eddy: store %q: retention %v is negative; use 0 for a compacted changelog", st.Name, st.Retention))
			}
			storeSub[st.Name] = i
			cl := ChangelogTopic(appID, st.Name)
			sp.storeNames = append(sp.storeNames, st.Name)
			sp.changelogs = append(sp.changelogs, cl)
			sp.storeIndex[st.Name] = si
			p.changelogs = append(p.changelogs, cl)
		}
		p.subs = append(p.subs, sp)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.Sort(p.sources)
	return p, nil
}

// taskOf returns the task that reads partition partition of topic.
func (p *plan) taskOf(topic string, partition int32) (TaskID, bool) {
	s, ok := p.subOf[topic]
	return TaskID{Subtopology: s, Partition: partition}, ok
}

// tasksOf returns the tasks that the partitions belong to, sorted, each
// once. Partitions of topics outside the topology are ignored.
func (p *plan) tasksOf(parts map[string][]int32) []TaskID {
	var ids []TaskID
	for topic, ps := range parts {
		for _, part := range ps {
			if id, ok := p.taskOf(topic, part); ok && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	slices.SortFunc(ids, compareTaskIDs)
	return ids
}

func compareTaskIDs(a, b TaskID) int {
	if a.Subtopology != b.Subtopology {
		return a.Subtopology - b.Subtopology
	}
	return int(a.Partition) - int(b.Partition)
}

// route hands each record of a poll to its task, in offset order per
// partition, and lists the tasks that received records in w.polled. A
// partition without a task is an error: rebalances are blocked between a
// poll and its processing, so every polled partition has its task, and
// consuming a record without one would commit its offset unprocessed.
func (w *worker) route(fetches kgo.Fetches) error {
	var err error
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		if err != nil || len(fp.Records) == 0 {
			return
		}
		id, _ := w.plan.taskOf(fp.Topic, fp.Partition)
		t := w.tasks[id]
		if t == nil {
			err = fmt.Errorf("eddy: no task for %s/%d", fp.Topic, fp.Partition)
			return
		}
		src := t.sourceIndex(fp.Topic)
		if src < 0 {
			err = fmt.Errorf("eddy: task %s does not read %s", t.id, fp.Topic)
			return
		}
		records := fp.Records
		if t.end != nil {
			records = t.end.delivered(src, records)
		}
		if !t.polled {
			t.polled = true
			w.polled = append(w.polled, t)
		}
		end := t.fetched(src, fp.LastStableOffset, fp.HighWatermark)
		switch {
		case t.align != nil:
			t.hold(src, records, end)
		case w.keepControl:
			// Another task aligns its inputs, so the consumer keeps
			// control records; this one has no use for them.
			for _, r := range records {
				if !r.Attrs.IsControl() {
					t.pending[src] = append(t.pending[src], r)
				}
			}
		default:
			t.pending[src] = append(t.pending[src], records...)
		}
	})
	return err
}

// processPolled processes the routed records task by task. A task with
// one source takes its poll's records in order. A task with several
// (docs/design.md §5.2) takes the record with the smallest timestamp among
// the heads of its sources (ties go to the source listed first), across
// polls: it holds its records while a source it has nothing of may still
// bring an earlier one, and goes on with them at a later step.
func (w *worker) processPolled() error {
	now := time.Now()
	for _, t := range w.polled {
		// Timed per task and poll, not per record: see
		// metrics.LatencyObserver. txnRecords counts the records
		// processed (not those skipped as already in the state).
		start, before := time.Now(), w.txnRecords
		if t.align != nil {
			for r := t.nextAligned(now); r != nil; r = t.nextAligned(now) {
				if err := w.processRecord(t, r); err != nil {
					return err
				}
			}
		} else {
			for r := t.nextPending(); r != nil; r = t.nextPending() {
				if err := w.processRecord(t, r); err != nil {
					return err
				}
			}
		}
		t.flushMetrics(time.Since(start), w.txnRecords-before)
	}
	return nil
}

// clearPolled drops what route handed out, processed or not, except what
// aligning tasks hold: those tasks stay listed, to go on at the next step.
func (w *worker) clearPolled() {
	kept := w.polled[:0]
	for _, t := range w.polled {
		if t.align != nil && t.holding() {
			kept = append(kept, t)
			continue
		}
		t.polled = false
		for i := range t.pending {
			clear(t.pending[i])
			t.pending[i] = t.pending[i][:0]
			t.pendingAt[i] = 0
		}
	}
	clear(w.polled[len(kept):])
	w.polled = kept
}

// keepHeld keeps, of the tasks listed as holding records since the last
// step, those the worker still runs (a revoke may have closed some).
func (w *worker) keepHeld() {
	kept := w.polled[:0]
	for _, t := range w.polled {
		if w.tasks[t.id] == t {
			kept = append(kept, t)
		}
	}
	clear(w.polled[len(kept):])
	w.polled = kept
}

// dropAllHeld drops the records every task holds: the consumer was rewound
// to the committed offsets and delivers them again.
func (w *worker) dropAllHeld() {
	for _, t := range w.polled {
		t.polled = false
	}
	clear(w.polled)
	w.polled = w.polled[:0]
	for _, t := range w.tasks {
		t.dropHeld()
	}
}

// nextPending returns the task's next record of this poll in merge order,
// or nil when there is none left.
func (t *task) nextPending() *kgo.Record {
	best := -1
	for i, rs := range t.pending {
		at := t.pendingAt[i]
		if at == len(rs) {
			continue
		}
		if best < 0 || rs[at].Timestamp.Before(t.pending[best][t.pendingAt[best]].Timestamp) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	r := t.pending[best][t.pendingAt[best]]
	t.pendingAt[best]++
	return r
}
