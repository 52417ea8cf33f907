package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/harness/verify"
	"github.com/eddy-streams/eddy/internal/kafka"
)

// endChain is a two-sub-topology chain for bounded runs: sub-topology 0
// re-keys "in3" into a repartition topic and, at its end of input, writes
// one more record there ("end"); sub-topology 1 counts what it reads in
// store "tally" and, at its end, writes its count to "totals". The totals
// add up to the inputs plus one per upstream task only if every
// downstream task ended after every upstream task's end reached it.
func endChain(appID string, onEnd func()) Topology { return poisonedChain(appID, onEnd, "") }

// poisonedChain is endChain whose upstream fails on the record of value
// poison (none if empty), stopping the app.
func poisonedChain(appID string, onEnd func(), poison string) Topology {
	rp := appID + "-rekey-repartition"
	return Topology{
		Subtopologies: []Subtopology{
			{Sources: []string{"in3"}, NewTask: func(tc TaskContext) (TaskProcessor, error) {
				return &rekeyEnder{rekeyTask{tc: tc, topic: rp}, poison}, nil
			}},
			{Sources: []string{rp}, Stores: []Store{{Name: "tally"}}, NewTask: func(tc TaskContext) (TaskProcessor, error) {
				s, err := tc.Store("tally")
				if err != nil {
					return nil, err
				}
				return &tallyTask{tc: tc, store: s, onEnd: onEnd}, nil
			}},
		},
		Repartitions: []Repartition{{Topic: rp, Writers: []int{0}}},
		Sinks:        []string{"totals"},
	}
}

type rekeyEnder struct {
	rekeyTask
	poison string
}

func (r *rekeyEnder) Process(rec *kgo.Record) error {
	if r.poison != "" && string(rec.Value) == r.poison {
		return errors.New("poison")
	}
	return r.rekeyTask.Process(rec)
}

func (r *rekeyEnder) EndOfInput(int64) error {
	if r.tc.ID().Partition == 0 {
		// Ends later than the others: a downstream task that ended at
		// their markers alone would miss its records.
		time.Sleep(2 * time.Second)
	}
	return r.tc.Produce(r.topic, []byte("end"), []byte("end"), 0, nil)
}

type tallyTask struct {
	tc    TaskContext
	store interface {
		Get([]byte) ([]byte, bool, error)
		Put(k, v []byte)
	}
	onEnd func()
}

var tallyKey = []byte("n")

func (c *tallyTask) count() (int, error) {
	v, ok, err := c.store.Get(tallyKey)
	if err != nil || !ok {
		return 0, err
	}
	return strconv.Atoi(string(v))
}

func (c *tallyTask) Process(*kgo.Record) error {
	n, err := c.count()
	if err != nil {
		return err
	}
	c.store.Put(tallyKey, []byte(strconv.Itoa(n+1)))
	return nil
}

func (c *tallyTask) EndOfInput(int64) error {
	if c.onEnd != nil {
		c.onEnd()
	}
	n, err := c.count()
	if err != nil {
		return err
	}
	return c.tc.Produce("totals", []byte(c.tc.ID().String()), []byte(strconv.Itoa(n)), 0, nil)
}

func (c *tallyTask) Punctuate(time.Time) error { return nil }
func (c *tallyTask) Close() error              { return nil }

// runBounded runs topo bounded until Run returns by itself, and fails the
// test if it returns an error or only by the test's deadline.
func (h *harness) runBounded(cfg Config, topo Topology) {
	h.t.Helper()
	cfg.Bounded = true
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := Run(ctx, cfg, topo); err != nil {
		h.t.Fatalf("run: %v", err)
	}
	if ctx.Err() != nil {
		h.t.Fatal("the bounded run did not end by itself")
	}
}

// totals reads the "totals" topic: each downstream task's count.
func (h *harness) totals() map[string]int {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := verify.ReadAll(ctx, h.seeds, "totals")
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range recs {
		if _, dup := out[string(r.Key)]; dup {
			h.t.Fatalf("task %s ended twice", r.Key)
		}
		n, err := strconv.Atoi(string(r.Value))
		if err != nil {
			h.t.Fatal(err)
		}
		out[string(r.Key)] = n
	}
	return out
}

// checkEndedOnce checks that each of the chain's 6 tasks recorded its end
// exactly once.
func (h *harness) checkEndedOnce(appID string) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := verify.ReadAll(ctx, h.seeds, EndedTopic(appID))
	if err != nil {
		h.t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range recs {
		if seen[string(r.Key)] {
			h.t.Fatalf("task %s ended twice", r.Key)
		}
		seen[string(r.Key)] = true
	}
	if len(seen) != 6 {
		h.t.Fatalf("%d tasks ended, want 6", len(seen))
	}
}

// checkTotals checks that each of the 3 downstream tasks ended once and
// that together they counted the inputs and the 3 upstream ends.
func checkTotals(t *testing.T, totals map[string]int, inputs int) {
	t.Helper()
	sum := 0
	for _, n := range totals {
		sum += n
	}
	if len(totals) != 3 || sum != inputs+3 {
		t.Fatalf("totals %v: want 3 tasks counting %d records (the inputs and one end record per upstream task)", totals, inputs+3)
	}
}

func (h *harness) boundedSetup() Config {
	h.createTopics(kafka.TopicSpec{Name: "in3", Partitions: 3}, kafka.TopicSpec{Name: "totals", Partitions: 1})
	h.rekeyInput("in3", 0, 300, map[string]string{})
	cfg := h.config(h.t.TempDir(), io.Discard)
	cfg.MaxTaskIdle = time.Second
	cfg.Workers = 3 // the upstream tasks end in different transactions
	return cfg
}

// TestBoundedChainEndsDownstreamAfterUpstream runs the chain bounded: Run
// returns by itself, each downstream task ends once, after every upstream
// task's end marker reached it (its count holds every record and every
// upstream end record). Records produced after the run ended are past
// its bound: a second run of the app, whose tasks are ended, processes
// none of them and ends no task again.
func TestBoundedChainEndsDownstreamAfterUpstream(t *testing.T) {
	h := newHarness(t)
	cfg := h.boundedSetup()
	topo := endChain(cfg.AppID, nil)
	h.runBounded(cfg, topo)
	checkTotals(t, h.totals(), 300)

	h.rekeyInput("in3", 300, 30, map[string]string{})
	cfg.StateDir = t.TempDir() // a fresh machine: the end is restored from the changelogs
	h.runBounded(cfg, topo)
	checkTotals(t, h.totals(), 300)
	h.checkEndedOnce(cfg.AppID)
}

// TestBoundedKeepsItsBound stops a bounded run part way (a record its
// topology fails on, after transactions committed), produces more records
// and runs it again without the failure: the run ends at the bound its
// tasks recorded when they first opened, so the records produced since
// are not its input.
func TestBoundedKeepsItsBound(t *testing.T) {
	h := newHarness(t)
	cfg := h.boundedSetup()
	cfg.Bounded, cfg.CommitRecords = true, 7 // small transactions commit before the poison
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := Run(ctx, cfg, poisonedChain(cfg.AppID, nil, "250")); err == nil || ctx.Err() != nil {
		t.Fatalf("run: %v, want the poison's error", err)
	}
	h.rekeyInput("in3", 300, 30, map[string]string{})
	h.runBounded(cfg, endChain(cfg.AppID, nil))
	checkTotals(t, h.totals(), 300)
	h.checkEndedOnce(cfg.AppID)
}

// TestBoundedEndsAnEmptiedPartition runs the chain bounded after the
// records of one input partition were deleted (as retention deletes
// them): that partition, from which the consumer can get nothing, ends at
// once, and the run ends with the records of the others.
func TestBoundedEndsAnEmptiedPartition(t *testing.T) {
	h := newHarness(t)
	cfg := h.boundedSetup()
	cl := h.client()
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, "in3")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup("in3", 2)
	if end.Offset == 0 {
		t.Fatal("no record on in3/2")
	}
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: "in3", Partition: 2, At: end.Offset})
	if resp, err := adm.DeleteRecords(ctx, del); err != nil || resp.Error() != nil {
		t.Fatalf("delete records: %v %v", err, resp.Error())
	}
	h.runBounded(cfg, endChain(cfg.AppID, nil))
	checkTotals(t, h.totals(), 300-int(end.Offset))
}

const boundedKillEnv = "EDDY_TEST_BOUNDED_KILL_CHILD"

// TestBoundedKillAtTheEnd kills (SIGKILL) a child process running the
// chain bounded in the middle of a downstream task's end of input, after
// the upstream tasks committed their ends, then runs the app again in
// this process: every downstream task ends exactly once and the totals
// are exact (the end markers consumed by the killed transaction are read
// again; the upstream tasks, ended, do not end again).
func TestBoundedKillAtTheEnd(t *testing.T) {
	if addr := os.Getenv(boundedKillEnv); addr != "" {
		boundedKillChild(t, addr)
		return
	}
	h := newHarness(t)
	cfg := h.boundedSetup()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBoundedKillAtTheEnd$", "-test.count=1")
	cmd.Env = append(os.Environ(), boundedKillEnv+"="+h.seeds[0], "EDDY_TEST_STATE_DIR="+cfg.StateDir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v, want it killed at its end; output:\n%s", err, out.String())
	}
	if got := h.totals(); len(got) != 0 {
		t.Fatalf("totals %v committed before the kill", got)
	}
	h.runBounded(cfg, endChain(cfg.AppID, nil))
	checkTotals(t, h.totals(), 300)
	h.checkEndedOnce(cfg.AppID)
}

// boundedKillChild runs the chain against the parent's broker and kills
// the process at the first downstream task's end of input.
func boundedKillChild(t *testing.T, addr string) {
	h := &harness{t: t, seeds: []string{addr}}
	cfg := h.config(os.Getenv("EDDY_TEST_STATE_DIR"), io.Discard)
	cfg.MaxTaskIdle, cfg.Workers = time.Second, 3
	kill := func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	h.runBounded(cfg, endChain(cfg.AppID, kill))
	fmt.Println("the run ended without a kill")
}

// TestCheckBounded: what a bounded run cannot end is refused, naming the
// option and why.
func TestCheckBounded(t *testing.T) {
	task := func(TaskContext) (TaskProcessor, error) { return nil, nil }
	chain := endChain("app", nil)
	if err := checkBounded(chain); err != nil {
		t.Fatalf("chain: %v", err)
	}
	unknown := endChain("app", nil)
	unknown.Repartitions = []Repartition{{Topic: "app-rekey-repartition"}}
	cycle := Topology{
		Subtopologies: []Subtopology{
			{Sources: []string{"left", "responses"}, NewTask: task},
			{Sources: []string{"right", "subscriptions"}, NewTask: task},
		},
		Repartitions: []Repartition{{Topic: "subscriptions", Writers: []int{0}}, {Topic: "responses", Writers: []int{1}}},
	}
	pattern := Topology{Subtopologies: []Subtopology{{Patterns: []*regexp.Regexp{regexp.MustCompile("in.*")}, NewTask: task}}}
	// To("mid") in one sub-topology, Source("mid") in another: no markers
	// travel on mid, so its reader would stop at mid's end when it opened.
	chained := Topology{Subtopologies: []Subtopology{
		{Sources: []string{"in"}, Writes: []string{"mid"}, NewTask: task},
		{Sources: []string{"mid"}, Writes: []string{"out"}, NewTask: task},
	}}
	for name, c := range map[string]struct {
		topo Topology
		want string
	}{
		"unknown writers": {unknown, "no known writers"},
		"cycle":           {cycle, "feed each other"},
		"pattern":         {pattern, "source pattern"},
		"chained topic":   {chained, "use eddy.Repartition between them"},
	} {
		err := checkBounded(c.topo)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "eddy: Config.StopAtEndOffsets") {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}

// TestPlanEnds: a repartition source waits for one marker per task of the
// sub-topologies that write it, and writers send markers to each of its
// partitions.
func TestPlanEnds(t *testing.T) {
	topo := withEndStores(Topology{
		Subtopologies: []Subtopology{
			{Sources: []string{"a"}, NewTask: func(TaskContext) (TaskProcessor, error) { return nil, nil }},
			{Sources: []string{"b"}, NewTask: func(TaskContext) (TaskProcessor, error) { return nil, nil }},
			{Sources: []string{"r", "t"}, NewTask: func(TaskContext) (TaskProcessor, error) { return nil, nil }},
		},
		Repartitions: []Repartition{{Topic: "r", Writers: []int{0, 1}}},
	})
	p, err := newPlan("app", topo)
	if err != nil {
		t.Fatal(err)
	}
	planEnds(p, topo.Repartitions, map[string]int32{"a": 3, "b": 2, "r": 4, "t": 4})
	if got := p.subs[2].endWant; !slices.Equal(got, []int{5, 0}) {
		t.Errorf("markers awaited %v, want [5 0] (3 + 2 writer tasks; t is external)", got)
	}
	for _, w := range []int{0, 1} {
		if got := p.subs[w].markers; len(got) != 1 || got[0] != (topicCount{"r", 4}) {
			t.Errorf("sub-topology %d writes markers to %v, want r's 4 partitions", w, got)
		}
	}
	if p.taskCount != 3+2+4 {
		t.Errorf("%d tasks, want 9", p.taskCount)
	}
	if got := p.subs[0].storeNames; !slices.Equal(got, []string{"eddy-end-0"}) {
		t.Errorf("stores %v, want the end store", got)
	}
}
