package runtime

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/internal/testutil"
	"github.com/eddy-streams/eddy/metrics"
	"github.com/eddy-streams/eddy/state"
)

// merging is a task with two sources, "left" and "right", that writes each
// record it processes, in processing order, to the single partition of
// "merged": the output is the order in which the task saw its inputs. A
// store makes it stateful, as joins are.
func merging() Topology {
	return Topology{Subtopologies: []Subtopology{{
		Sources: []string{"left", "right"},
		Stores:  []Store{{Name: "merge-seen"}},
		NewTask: func(tc TaskContext) (TaskProcessor, error) {
			store, err := tc.Store("merge-seen")
			if err != nil {
				return nil, err
			}
			return &mergeTask{tc: tc, store: store}, nil
		},
	}}}
}

type mergeTask struct {
	tc    TaskContext
	store interface{ Put(k, v []byte) }
}

func (m *mergeTask) Process(r *kgo.Record) error {
	m.tc.AdvanceStreamTime(r.Timestamp.UnixMilli())
	m.store.Put(r.Value, []byte{1})
	return m.tc.Produce("merged", nil, r.Value, r.Timestamp.UnixMilli(), nil)
}

func (m *mergeTask) Punctuate(time.Time) error { return nil }
func (m *mergeTask) Close() error              { return nil }

// alignInputs returns n records of "left" at even timestamps and n of
// "right" at odd ones, and the values of both in timestamp order: what a
// task that always takes the earliest head of its inputs writes.
func alignInputs(n int) (left, right []*kgo.Record, want []string) {
	for i := 0; i < 2*n; i++ {
		r := &kgo.Record{Topic: "left", Value: []byte(fmt.Sprintf("l%d", i)), Timestamp: time.UnixMilli(int64(1000 + i))}
		if i%2 == 1 {
			r.Topic, r.Value = "right", []byte(fmt.Sprintf("r%d", i))
			right = append(right, r)
		} else {
			left = append(left, r)
		}
		want = append(want, string(r.Value))
	}
	return left, right, want
}

func (h *harness) createAlignTopics() {
	h.createTopics(
		kafka.TopicSpec{Name: "left", Partitions: 1},
		kafka.TopicSpec{Name: "right", Partitions: 1},
		kafka.TopicSpec{Name: "merged", Partitions: 1})
}

// mergedValues waits for n records in "merged" and returns their values.
func (h *harness) mergedValues(n int) []string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := h.client(kgo.ConsumeTopics("merged"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			h.t.Fatalf("only %d of %d merged records appeared: %q", len(got), n, got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// TestAlignmentWaitsForFetchedLag: both inputs are on the broker before the
// app starts, but "left" comes one record per fetch (a record per batch and
// a partition fetch limit of one byte) while all of "right" comes in one.
// The task must not run ahead on "right" while the broker holds "left"
// records it has not fetched yet: the output is the timestamp-ordered merge.
func TestAlignmentWaitsForFetchedLag(t *testing.T) {
	h := newHarness(t)
	h.createAlignTopics()
	left, right, want := alignInputs(60)
	for _, r := range left {
		h.produceRecords(r) // one batch each
	}
	h.produceRecords(right...)
	cfg := h.config(t.TempDir(), io.Discard)
	cfg.AppID = "align-lag"
	cfg.ClientOpts = []kgo.Opt{kgo.FetchMaxPartitionBytes(1)}
	stop := h.runTopo(cfg, merging())
	defer stop()
	got := h.mergedValues(len(want))
	if !slices.Equal(got, want) {
		t.Fatalf("processing order is not the timestamp order of the inputs\ngot  %q\nwant %q", got, want)
	}
}

// TestAlignmentHoldsAcrossCommitsAndRestarts: with MaxTaskIdle long, a task
// whose "right" input is empty holds its "left" records rather than run
// ahead, commits what it processed while it holds the rest, and a restart
// neither loses nor repeats the records it held: the offsets it committed
// were those of the first held record, not the consumer's position past
// them. "right" is written after the app started, in two halves around the
// restart; a last "left" record, later than all, lets the task process the
// last "right" one (it then waits for "right" again).
func TestAlignmentHoldsAcrossCommitsAndRestarts(t *testing.T) {
	for _, atLeastOnce := range []bool{false, true} {
		t.Run(fmt.Sprintf("at-least-once=%v", atLeastOnce), func(t *testing.T) {
			testAlignmentHoldsAcrossRestarts(t, atLeastOnce)
		})
	}
}

func testAlignmentHoldsAcrossRestarts(t *testing.T, atLeastOnce bool) {
	h := newHarness(t)
	h.createAlignTopics()
	const n = 40
	left, right, want := alignInputs(n)
	h.produceRecords(left...)
	cfg := h.config(t.TempDir(), io.Discard)
	cfg.AppID = "align-idle"
	cfg.AtLeastOnce = atLeastOnce
	cfg.MaxTaskIdle = time.Hour
	stop := h.runTopo(cfg, merging())
	h.produceRecords(right[:n/2]...)
	// Up to r(n-1): the task then holds l(n) onwards and waits for
	// "right".
	got := h.mergedValues(n)
	if !slices.Equal(got, want[:n]) {
		stop()
		t.Fatalf("before the restart\ngot  %q\nwant %q", got, want[:n])
	}
	stop()

	stop = h.runTopo(cfg, merging())
	defer stop()
	h.produceRecords(right[n/2:]...)
	h.produceRecords(&kgo.Record{Topic: "left", Value: []byte("last"), Timestamp: time.UnixMilli(1000 + 2*n)})
	got = h.mergedValues(2 * n)
	if !slices.Equal(got, want) {
		t.Fatalf("after the restart\ngot  %q\nwant %q", got, want)
	}
}

// TestAlignmentIdleForced: a task whose "right" input stays empty waits
// MaxTaskIdle for it, then processes "left" without it, and counts that
// forced proceed in its metric and its status.
func TestAlignmentIdleForced(t *testing.T) {
	h := newHarness(t)
	h.createAlignTopics()
	left, _, _ := alignInputs(20)
	h.produceRecords(left...)
	var want []string
	for _, r := range left {
		want = append(want, string(r.Value))
	}
	cfg := h.config(t.TempDir(), io.Discard)
	cfg.AppID = "align-forced"
	cfg.MaxTaskIdle = time.Millisecond
	cfg.Metrics = metrics.New()
	in, err := New(cfg, merging())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	if got := h.mergedValues(len(want)); !slices.Equal(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	// The outputs are committed, so the task flushed its counts before.
	if v, ok := seriesValue(t, cfg.Metrics, "eddy_task_idle_forced_total", "0_0"); !ok || v < 1 {
		t.Fatalf("eddy_task_idle_forced_total of task 0_0 = %v (present %v); want at least 1", v, ok)
	}
	var forced int64 = -1
	for _, ts := range in.Status().Tasks {
		if ts.ID == "0_0" {
			forced = ts.IdleForced
		}
	}
	if forced < 1 {
		t.Fatalf("task 0_0's status counts %d forced proceeds; want at least 1", forced)
	}
}

// TestAlignmentPausesAFullPartition: a task that waits for an empty
// "right" holds at most about alignBuffer records of "left" (the harness
// polls at most CommitRecords, 1,000, at once) and pauses its fetch; once
// "right" arrives the task drains, resumes "left" and processes every
// record of both in timestamp order.
func TestAlignmentPausesAFullPartition(t *testing.T) {
	h := newHarness(t)
	h.createAlignTopics()
	const n = 3 * alignBuffer
	left, right, want := alignInputs(n)
	h.produceRecords(left...)
	var logs testutil.LogBuffer
	cfg := h.config(t.TempDir(), io.Discard)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.AppID = "align-pause"
	cfg.MaxTaskIdle = time.Hour
	stop := h.runTopo(cfg, merging())
	defer stop()
	waitLog(t, &logs, "fetch paused", 1)
	h.produceRecords(right...)
	h.produceRecords(&kgo.Record{Topic: "left", Value: []byte("last"), Timestamp: time.UnixMilli(1000 + 2*n)})
	if got := h.mergedValues(2 * n); !slices.Equal(got, want) {
		t.Fatalf("got %d records, not the timestamp order of the inputs", len(got))
	}
}

// TestAlignmentReady: when a task may go on without a source that has
// nothing buffered, at synthetic times.
func TestAlignmentReady(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	// Default: no wait for a caught-up partition, a wait (bounded by
	// lagStall) for one the broker holds records of.
	a := newAlignment(2, 0)
	if !a.ready(1, t0) {
		t.Fatal("MaxTaskIdle 0, position unknown: the task waits")
	}
	a.fetchedTo[1], a.end[1] = 7, 7
	if !a.ready(1, t0) || a.forcedCount != 0 {
		t.Fatalf("MaxTaskIdle 0, caught up: ready %v, forced %d; want ready, none forced", a.ready(1, t0), a.forcedCount)
	}
	a.end[1] = 9
	if a.ready(1, t0) || a.ready(1, at(lagStall-time.Millisecond)) {
		t.Fatal("the broker holds records the task has not fetched: it must wait")
	}
	if !a.ready(1, at(lagStall)) || !a.ready(1, at(lagStall+time.Second)) || a.forcedCount != 1 {
		t.Fatalf("after lagStall the task goes on, counted once: forced %d", a.forcedCount)
	}
	a.arrived(1)
	a.fetchedTo[1] = 9
	if !a.ready(1, at(time.Hour)) || a.forcedCount != 1 {
		t.Fatalf("records arrived and the partition is caught up: forced %d", a.forcedCount)
	}

	// Positive: a caught-up partition is waited for that long.
	a = newAlignment(2, time.Minute)
	a.fetchedTo[0], a.end[0] = 3, 3
	if a.ready(0, t0) || a.ready(0, at(time.Minute-time.Millisecond)) {
		t.Fatal("MaxTaskIdle 1m: the task goes on before a minute")
	}
	if !a.ready(0, at(time.Minute)) || a.forcedCount != 1 {
		t.Fatalf("MaxTaskIdle 1m: after a minute the task goes on, counted: forced %d", a.forcedCount)
	}
	// A lagging partition: the wait starts anew and lasts lagStall, or
	// MaxTaskIdle when that is longer.
	a.end[0] = 5
	if a.ready(0, at(2*time.Minute)) || a.ready(0, at(2*time.Minute+lagStall)) || !a.ready(0, at(3*time.Minute)) || a.forcedCount != 2 {
		t.Fatalf("a new, lagging wait: forced %d, want 2", a.forcedCount)
	}
}

// TestProbeInputs: a task that opens learns where the consumer starts each
// source partition and where it ends, so that it waits for a partition it
// has not fetched from yet that holds records.
func TestProbeInputs(t *testing.T) {
	h := newHarness(t)
	h.createAlignTopics()
	left, _, _ := alignInputs(5)
	h.produceRecords(left...)
	cl := h.client()
	defer cl.Close()
	w := &worker{cl: cl, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	tk := &task{align: newAlignment(2, 0)}
	tk.sources = []state.TopicPartition{{Topic: "left"}, {Topic: "right"}}
	tk.skip = []int64{1, 0}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	w.probeInputs(ctx, []*task{tk}, map[string]map[int32]int64{"left": {0: 2}})
	if a := tk.align; !slices.Equal(a.fetchedTo, []int64{2, 0}) || !slices.Equal(a.end, []int64{5, 0}) {
		t.Fatalf("from %v to %v; want from [2 0] (the group's offset, later than the state's; the log's start) to [5 0]", a.fetchedTo, a.end)
	}
	if tk.align.ready(0, time.Now()) || !tk.align.ready(1, time.Now()) {
		t.Fatal("the task must wait for left (3 records on the broker) and not for right (empty)")
	}
	w.probeInputs(ctx, []*task{tk}, nil)
	if a := tk.align; !slices.Equal(a.fetchedTo, []int64{1, 0}) {
		t.Fatalf("without group offsets: from %v; want [1 0] (the state's offset; the log's start)", a.fetchedTo)
	}
}

// TestAlignedPathAllocatesNothing: once its slices have grown, a task that
// aligns two sources holds and takes records without allocating.
func TestAlignedPathAllocatesNothing(t *testing.T) {
	tk := &task{align: newAlignment(2, 0), pending: make([][]*kgo.Record, 2), pendingAt: make([]int, 2)}
	var recs [2][]*kgo.Record
	for i := range 200 {
		recs[i%2] = append(recs[i%2], &kgo.Record{Offset: int64(i / 2), Timestamp: time.UnixMilli(int64(i))})
	}
	now := time.Now()
	n := 0
	cycle := func() {
		tk.hold(0, recs[0], 100)
		tk.hold(1, recs[1], 100)
		for r := tk.nextAligned(now); r != nil; r = tk.nextAligned(now) {
			n++
		}
	}
	cycle()
	if n != 200 {
		t.Fatalf("took %d of 200 records", n)
	}
	if allocs := testing.AllocsPerRun(100, cycle); allocs != 0 {
		t.Fatalf("%v allocations per cycle of 200 records", allocs)
	}
}
