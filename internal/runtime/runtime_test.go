package runtime

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddy-streams/eddy/internal/harness/verify"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/internal/testutil"
	"github.com/eddy-streams/eddy/state/pebble"
)

// counting is the smallest stateful topology: it counts records per key in
// store "counts" and writes "<count>:<value>" to topic "out" for each one.
// A sequential run over the input gives exact expected outputs.
func counting() Topology {
	return Topology{Subtopologies: []Subtopology{{
		Sources: []string{"in"},
		Stores:  []Store{{Name: "counts"}},
		NewTask: func(tc TaskContext) (TaskProcessor, error) {
			store, err := tc.Store("counts")
			if err != nil {
				return nil, err
			}
			return &countTask{tc: tc, store: store}, nil
		},
	}}}
}

type countTask struct {
	tc    TaskContext
	store interface {
		Get([]byte) ([]byte, bool, error)
		Put(k, v []byte)
	}
}

func (c *countTask) Process(r *kgo.Record) error {
	c.tc.AdvanceStreamTime(r.Timestamp.UnixMilli())
	v, ok, err := c.store.Get(r.Key)
	if err != nil {
		return err
	}
	var n uint64
	if ok {
		n = binary.BigEndian.Uint64(v)
	}
	n++
	c.store.Put(r.Key, binary.BigEndian.AppendUint64(nil, n))
	return c.tc.Produce("out", r.Key, []byte(fmt.Sprintf("%d:%s", n, r.Value)), 0, nil)
}

func (c *countTask) Punctuate(time.Time) error { return nil }
func (c *countTask) Close() error              { return nil }

type harness struct {
	t      *testing.T
	broker *kafka.Broker
	seeds  []string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	b, err := kafka.StartBroker(kafka.BrokerConfig{Addr: "127.0.0.1:0", DefaultPartitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	h := &harness{t: t, broker: b, seeds: []string{b.Addr()}}
	cl := h.client()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kafka.CreateTopics(ctx, cl, kafka.TopicSpec{Name: "in", Partitions: 2}, kafka.TopicSpec{Name: "out", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) client(opts ...kgo.Opt) *kgo.Client {
	h.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(h.seeds...)}, opts...)...)
	if err != nil {
		h.t.Fatal(err)
	}
	return cl
}

func (h *harness) config(dir string, log io.Writer) Config {
	return Config{
		AppID: "count", Brokers: h.seeds, StateDir: dir, InstanceID: "i1", Workers: 1,
		CommitInterval: 50 * time.Millisecond, CommitRecords: 1000,
		SessionTimeout: time.Second, TransactionTimeout: 10 * time.Second,
		Backend: pebble.New(pebble.Options{}),
		Logger:  slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
}

// run starts the runtime and returns a function that stops it cleanly.
func (h *harness) run(cfg Config) (stop func()) {
	h.t.Helper()
	return h.runTopo(cfg, counting())
}

// runTopo runs topo and returns a function that stops it cleanly.
func (h *harness) runTopo(cfg Config, topo Topology) (stop func()) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, topo) }()
	return func() {
		h.t.Helper()
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("run: %v", err)
		}
	}
}

// createTopics creates topics with the given partition counts.
func (h *harness) createTopics(specs ...kafka.TopicSpec) {
	h.t.Helper()
	cl := h.client()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kafka.CreateTopics(ctx, cl, specs...); err != nil {
		h.t.Fatal(err)
	}
}

// produceRecords writes recs (each naming its topic) and returns them with
// their partitions and offsets set.
func (h *harness) produceRecords(recs ...*kgo.Record) []*kgo.Record {
	h.t.Helper()
	cl := h.client()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
	return recs
}

// produce writes n records with keys k0..k4 and values "<from+i>".
func (h *harness) produce(from, n int) {
	h.t.Helper()
	cl := h.client(kgo.DefaultProduceTopic("in"))
	defer cl.Close()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i%5)), Value: []byte(strconv.Itoa(i))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
}

// waitOutputs waits until "out" holds at least n committed records and
// returns them all.
func (h *harness) waitOutputs(n int) []*kgo.Record {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		recs, err := verify.ReadAll(ctx, h.seeds, "out")
		if err != nil {
			h.t.Fatal(err)
		}
		if len(recs) >= n {
			return recs
		}
		select {
		case <-ctx.Done():
			h.t.Fatalf("only %d of %d outputs appeared", len(recs), n)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkPermuted is the exactness check for topologies whose order of
// processing across partitions a run does not fix (several sources per
// task, a repartition topic fed by several partitions): every input value
// has exactly one output "<count>:<value>", and the counts of each output
// key are 1..n, each once: no record was processed twice or lost.
func checkPermuted(t *testing.T, outs []*kgo.Record, keyOf map[string]string) {
	t.Helper()
	seen := map[string]int{}
	counts := map[string][]int{}
	for _, r := range outs {
		n, v, ok := strings.Cut(string(r.Value), ":")
		c, err := strconv.Atoi(n)
		if !ok || err != nil {
			t.Fatalf("output %q is not <count>:<value>", r.Value)
		}
		seen[v]++
		if want, ok := keyOf[v]; !ok || want != string(r.Key) {
			t.Fatalf("output %q under key %q: want key %q", r.Value, r.Key, want)
		}
		counts[string(r.Key)] = append(counts[string(r.Key)], c)
	}
	var dups, missing int
	for v := range keyOf {
		switch seen[v] {
		case 0:
			missing++
		case 1:
		default:
			dups++
		}
	}
	if dups > 0 || missing > 0 {
		t.Fatalf("%d outputs for %d inputs: %d inputs duplicated, %d missing", len(outs), len(keyOf), dups, missing)
	}
	for k, cs := range counts {
		slices.Sort(cs)
		for i, c := range cs {
			if c != i+1 {
				t.Fatalf("key %s: counts %v, want 1..%d each once (state updated twice or lost)", k, cs, len(cs))
			}
		}
	}
}

// exactness compares outputs with a sequential run over inputs 0..n-1: per
// key, counts 1, 2, ... with values in input order.
type exactness struct{ duplicates, wrong, missing int }

func (e exactness) ok() bool { return e == exactness{} }

func check(outs []*kgo.Record, n int) exactness {
	want := map[string]string{} // value -> "count:value"
	counts := map[string]int{}
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("k%d", i%5)
		counts[k]++
		want[strconv.Itoa(i)] = fmt.Sprintf("%d:%d", counts[k], i)
	}
	var e exactness
	seen := map[string]int{}
	for _, r := range outs {
		_, v, _ := strings.Cut(string(r.Value), ":")
		seen[v]++
		switch {
		case seen[v] > 1:
			e.duplicates++
		case want[v] != string(r.Value):
			e.wrong++
		}
	}
	e.missing = n - len(seen)
	return e
}

// rewindGroup commits offset 0 for every input partition, as if the broker
// had lost the group's offsets. It waits for the group to be empty first.
func (h *harness) rewindGroup() {
	h.t.Helper()
	cl := h.client()
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		groups, err := adm.DescribeGroups(ctx, "count")
		if err == nil && len(groups["count"].Members) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			h.t.Fatal("group never became empty")
		case <-time.After(200 * time.Millisecond):
		}
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "in", Partition: 0, At: 0, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "in", Partition: 1, At: 0, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctx, "count", offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		h.t.Fatalf("rewind group offsets: %v", err)
	}
}

// TestLostGroupOffsetsDoNotDuplicate is docs/design.md §6's defence: the
// embedded broker can commit a transaction's outputs and lose its group
// offsets. A task resumes from the later of the group's offset and the one
// its state carries, so nothing is processed twice. The same scenario with
// IgnoreStateOffsets (what Kafka Streams does) duplicates, which shows the
// test can tell.
func TestLostGroupOffsetsDoNotDuplicate(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignore_state_offsets=%v", ignore), func(t *testing.T) {
			h := newHarness(t)
			cfg := h.config(t.TempDir(), io.Discard)
			cfg.IgnoreStateOffsets = ignore
			stop := h.run(cfg)
			h.produce(0, 200)
			h.waitOutputs(200)
			stop()

			h.rewindGroup()
			stop = h.run(cfg)
			h.produce(200, 10)
			h.waitOutputs(210)
			stop()
			outs, err := verify.ReadAll(context.Background(), h.seeds, "out")
			if err != nil {
				t.Fatal(err)
			}
			e := check(outs, 210)
			t.Logf("%d outputs: %+v", len(outs), e)
			if !ignore && !e.ok() {
				t.Fatalf("after the group lost its offsets: %+v", e)
			}
			if ignore && e.duplicates == 0 {
				t.Fatal("with the state's offsets ignored, the rewound group should have reprocessed records; the scenario did not happen")
			}
		})
	}
}

// TestRestoreWithoutLocalState deletes the state directory between runs:
// the task replays its whole changelog and the counts go on.
func TestRestoreWithoutLocalState(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	var log testutil.LogBuffer
	cfg := h.config(dir, &log)
	stop := h.run(cfg)
	h.produce(0, 100)
	h.waitOutputs(100)
	stop()
	if err := os.RemoveAll(filepath.Join(dir, "count")); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var progress []RestoreProgress
	cfg.OnRestoreProgress = func(p RestoreProgress) {
		mu.Lock()
		progress = append(progress, p)
		mu.Unlock()
	}
	stop = h.run(cfg)
	h.produce(100, 50)
	outs := h.waitOutputs(150)
	stop()
	if e := check(outs, 150); !e.ok() {
		t.Fatalf("after a restore from the changelog: %+v", e)
	}
	if !strings.Contains(log.String(), "restored state") {
		t.Fatalf("no restore was logged:\n%s", log.String())
	}
	// Progress, per task: a start with nothing done, an end with every
	// offset passed; over all tasks the 5 keys' records were applied.
	mu.Lock()
	defer mu.Unlock()
	started, records := map[TaskID]bool{}, int64(0)
	for _, p := range progress {
		switch {
		case !started[p.Task]:
			started[p.Task] = true
			if p.Done || p.OffsetsDone != 0 || p.Offsets == 0 || p.Source != "changelog" {
				t.Errorf("first progress report of %s: %+v", p.Task, p)
			}
		case p.Done:
			records += p.Records
			if p.OffsetsDone != p.Offsets || p.Percent() != 100 || p.Bytes == 0 {
				t.Errorf("last progress report of %s: %+v", p.Task, p)
			}
		}
	}
	if len(started) == 0 || records < 5 {
		t.Errorf("restore progress of %d tasks, %d records applied: %+v", len(started), records, progress)
	}
}

// TestProduceErrorAbortsTransaction fails one produce to the output topic
// with a non-retriable error: the transaction must abort (its changelog
// records and other outputs with it) and the records be processed again,
// so the output is still exact.
func TestProduceErrorAbortsTransaction(t *testing.T) {
	h := newHarness(t)
	var log testutil.LogBuffer
	cfg := h.config(t.TempDir(), &log)
	h.produce(0, 50)
	fault := h.broker.Cluster().Fault(kfake.Fault{
		Keys:  []kmsg.Key{kmsg.Produce},
		Topic: "out",
		Err:   kerr.InvalidRecord,
		Count: 1,
	})
	stop := h.run(cfg)
	h.waitOutputs(50)
	h.produce(50, 50)
	outs := h.waitOutputs(100)
	stop()
	if fault.Hits() == 0 {
		t.Fatal("the produce fault never fired")
	}
	if e := check(outs, 100); !e.ok() {
		t.Fatalf("after a failed produce: %+v", e)
	}
	if !strings.Contains(log.String(), "transaction aborted") {
		t.Fatalf("the failed produce did not abort a transaction:\n%s", log.String())
	}
}

// TestRecordCapCommits sets a commit interval that never elapses: only the
// cap on records per transaction can make the outputs visible.
func TestRecordCapCommits(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t.TempDir(), io.Discard)
	cfg.CommitInterval = time.Hour
	cfg.CommitRecords = 10
	stop := h.run(cfg)
	defer stop()
	h.produce(0, 100)
	if e := check(h.waitOutputs(100), 100); !e.ok() {
		t.Fatalf("%+v", e)
	}
}

// waitLog polls l until it holds n occurrences of s.
func waitLog(t *testing.T, l *testutil.LogBuffer, s string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for strings.Count(l.String(), s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %d x %q; log:\n%s", n, s, l.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTasksMoveBetweenInstances moves a task away from an idle instance,
// back, and away and back again while records flow. franz-go's transact
// session hides a second revoke that comes before the next End, so an
// instance once kept a task it had lost and resumed on its stale state when
// the partition came back; the output must stay exact.
func TestTasksMoveBetweenInstances(t *testing.T) {
	h := newHarness(t)
	var la, lb, lc testutil.LogBuffer
	ca := h.config(t.TempDir(), &la)
	ca.InstanceID = "a"
	stopA := h.run(ca)
	defer stopA()
	waitLog(t, &la, "task assigned", 2)
	h.produce(0, 20)
	h.waitOutputs(20)

	cb := h.config(t.TempDir(), &lb)
	cb.InstanceID = "b"
	stopB := h.run(cb)
	waitLog(t, &la, "task revoked", 1)
	waitLog(t, &lb, "task assigned", 1)
	stopB()
	waitLog(t, &la, "task assigned", 3) // a has its partition back

	cc := h.config(t.TempDir(), &lc)
	cc.InstanceID = "c"
	stopC := h.run(cc)
	waitLog(t, &lc, "task assigned", 1)
	h.produce(20, 100)
	h.waitOutputs(120)
	stopC()
	waitLog(t, &la, "task assigned", 4) // and back again
	h.produce(120, 50)
	h.waitOutputs(170)
	outs, err := verify.ReadAll(context.Background(), h.seeds, "out")
	if err != nil {
		t.Fatal(err)
	}
	if e := check(outs, 170); !e.ok() {
		t.Fatalf("%d outputs: %+v\nlog of a:\n%s", len(outs), e, la.String())
	}
}

// TestAtLeastOnceLosesNothingThroughRebalances: at least once may
// duplicate, never lose. Instances join while records flow; every input
// must have an output. (A revoke once made the at-least-once worker drop a
// poll's records while its consumer moved past them.)
func TestAtLeastOnceLosesNothingThroughRebalances(t *testing.T) {
	h := newHarness(t)
	var stops []func()
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	n := 0
	for i, id := range []string{"a", "b", "c"} {
		cfg := h.config(t.TempDir(), io.Discard)
		cfg.InstanceID, cfg.AtLeastOnce = id, true
		stops = append(stops, h.run(cfg))
		for j := 0; j < 20; j++ {
			h.produce(n, 25)
			n += 25
		}
		t.Logf("instance %d joined; %d records produced", i+1, n)
	}
	// Counting outputs is not enough: duplicates can reach n while some
	// inputs still wait. Wait until every input has one, or time out.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		outs := h.waitOutputs(n)
		e := check(outs, n)
		if e.missing == 0 {
			t.Logf("%d outputs, %d duplicates", len(outs), e.duplicates)
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d inputs have no output: %+v", e.missing, n, e)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
