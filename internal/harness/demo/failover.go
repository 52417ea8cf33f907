package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	ledger "github.com/eddy-streams/eddy/examples/ledger/pipeline"
	"github.com/eddy-streams/eddy/internal/harness/verify"
)

// FailoverOptions configure a failover measurement: ledger instances share
// the payments, one is SIGKILLed under load, and the measurement is how
// long its tasks take to write committed balances again elsewhere.
type FailoverOptions struct {
	Brokers []string
	// LedgerCommand is the argv prefix that runs the ledger, e.g.
	// {"/path/to/eddy", "ledger"}.
	LedgerCommand []string
	// WorkDir holds the instances' state directories and logs.
	WorkDir string
	// Instances is the number of ledger processes (at least 2).
	Instances  int
	Partitions int
	// StandbyReplicas is passed to every instance.
	StandbyReplicas int
	// Preload payments over Accounts accounts are written and processed
	// before the live load starts: they make the state (and the
	// changelog) that a takeover without a standby replays.
	Preload, Accounts int
	// Rate is the live load in payments per second; it runs for Before
	// before the kill and for After once the killed tasks are back.
	Rate          int
	Before, After time.Duration
	Seed          uint64
	Out           io.Writer
}

// FailoverResult is what a failover measurement saw. Durations count from
// the SIGKILL.
type FailoverResult struct {
	// Victim is the killed instance, Tasks the partitions it ran.
	Victim string
	Tasks  []int32
	// Assigned is when the last survivor that gained one of the tasks
	// logged the assignment: failure detection (the group session
	// timeout, then the survivors' next heartbeat) and the rebalance.
	Assigned time.Duration
	// Restored is when the last of the tasks was restored and running.
	Restored time.Duration
	// FirstOutput is when every task had written its first committed
	// balance elsewhere (read_committed); PerTask holds each task's.
	FirstOutput time.Duration
	PerTask     map[int32]time.Duration
	// Replayed is how many changelog offsets the survivors' restores of
	// the tasks covered; Changelog the tasks' changelog size at the kill.
	Replayed, Changelog int64
	Report              verify.LedgerReport
	Logs                []string
}

// String is the result in one line.
func (r FailoverResult) String() string {
	return fmt.Sprintf("killed %s (tasks on partitions %v): assigned elsewhere after %.2fs, restored after %.2fs (replayed %d of %d changelog offsets), first committed outputs after %.2fs (%.2fs beyond the assignment); %v",
		r.Victim, r.Tasks, r.Assigned.Seconds(), r.Restored.Seconds(), r.Replayed, r.Changelog, r.FirstOutput.Seconds(),
		(r.FirstOutput - r.Assigned).Seconds(), r.Report)
}

const ledgerGroup = "ledger"

// Failover runs the measurement against opts.Brokers, which must be empty
// of the ledger's topics.
func Failover(ctx context.Context, opts FailoverOptions) (FailoverResult, error) {
	var res FailoverResult
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	if opts.Instances < 2 {
		return res, errors.New("demo: a failover needs at least 2 instances")
	}
	if err := os.MkdirAll(opts.WorkDir, 0o700); err != nil {
		return res, fmt.Errorf("demo: %w", err)
	}
	insts := make([]*failoverInstance, opts.Instances)
	defer func() {
		for _, in := range insts {
			if in != nil {
				in.close()
			}
		}
	}()
	for i := range insts {
		name := fmt.Sprintf("ledger-%d", i)
		in := &failoverInstance{name: name, logPath: filepath.Join(opts.WorkDir, name+".log")}
		argv := append(append([]string(nil), opts.LedgerCommand...),
			"--brokers", opts.Brokers[0], "--state-dir", filepath.Join(opts.WorkDir, name), "--instance-id", name,
			"--partitions", strconv.Itoa(opts.Partitions), "--standby-replicas", strconv.Itoa(opts.StandbyReplicas))
		var err error
		if in.log, err = os.Create(in.logPath); err != nil {
			return res, fmt.Errorf("demo: %w", err)
		}
		if in.child, err = StartChild(argv, in.log, "", nil); err != nil {
			return res, err
		}
		insts[i] = in
		res.Logs = append(res.Logs, in.logPath)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(opts.Brokers...))
	if err != nil {
		return res, fmt.Errorf("demo: client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := waitTopic(ctx, opts.Brokers, outputTopic, nil); err != nil {
		return res, err
	}
	if _, err := waitGroup(ctx, adm, opts.Instances); err != nil {
		return res, err
	}

	fmt.Fprintf(out, "preloading %d payments over %d accounts\n", opts.Preload, opts.Accounts)
	if err := preload(ctx, cl, opts.Preload, opts.Accounts, opts.Seed); err != nil {
		return res, err
	}
	if err := waitOutputs(ctx, opts.Brokers, int64(opts.Preload), insts); err != nil {
		return res, err
	}
	assigned, err := waitGroup(ctx, adm, opts.Instances)
	if err != nil {
		return res, err
	}
	victim := insts[0]
	res.Victim, res.Tasks = victim.name, assigned[victim.name]
	if len(res.Tasks) == 0 {
		return res, fmt.Errorf("demo: %s runs no task: %v", victim.name, assigned)
	}
	if opts.StandbyReplicas > 0 {
		fmt.Fprintf(out, "waiting for standbys of %s's tasks %v to catch up\n", victim.name, res.Tasks)
		if err := waitStandbys(ctx, res.Tasks, insts[1:]); err != nil {
			return res, err
		}
	}

	gen := &Generator{Seeds: opts.Brokers, Topic: inputTopic, Rate: opts.Rate, Accounts: opts.Accounts, Seed: opts.Seed + 1}
	genCtx, stopGen := context.WithCancel(ctx)
	defer stopGen()
	genDone := make(chan error, 1)
	go func() { genDone <- gen.Run(genCtx) }()
	watch, err := watchOutputs(ctx, opts.Brokers, res.Tasks)
	if err != nil {
		return res, err
	}
	defer watch.close()
	select {
	case <-time.After(opts.Before):
	case <-ctx.Done():
		return res, ctx.Err()
	}

	changelog := ledgerGroup + "-" + ledger.StoreName + "-changelog"
	ends, err := adm.ListEndOffsets(ctx, changelog)
	if err != nil {
		return res, fmt.Errorf("demo: changelog ends: %w", err)
	}
	for _, p := range res.Tasks {
		if o, ok := ends.Lookup(changelog, p); ok {
			res.Changelog += o.Offset
		}
	}
	killed := time.Now()
	watch.killed(killed)
	victim.child.Kill()
	fmt.Fprintf(out, "SIGKILLed %s (tasks %v, %d changelog offsets)\n", victim.name, res.Tasks, res.Changelog)

	res.PerTask, err = watch.wait(ctx, 3*time.Minute)
	if err != nil {
		return res, err
	}
	for _, d := range res.PerTask {
		res.FirstOutput = max(res.FirstOutput, d)
	}
	select {
	case <-time.After(opts.After):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	stopGen()
	if err := <-genDone; err != nil {
		return res, err
	}
	if err := waitOutputs(ctx, opts.Brokers, int64(opts.Preload)+gen.Produced(), insts[1:]); err != nil {
		return res, err
	}
	for _, in := range insts[1:] {
		if err := in.child.Stop(30 * time.Second); err != nil {
			return res, fmt.Errorf("demo: clean stop of %s: %w", in.name, err)
		}
	}
	for _, in := range insts[1:] {
		a, r, replayed, err := takeover(in.logPath, res.Tasks, killed)
		if err != nil {
			return res, err
		}
		res.Assigned, res.Restored = max(res.Assigned, a), max(res.Restored, r)
		res.Replayed += replayed
	}
	payments, err := verify.ReadAll(ctx, opts.Brokers, inputTopic)
	if err != nil {
		return res, err
	}
	balances, err := verify.ReadAll(ctx, opts.Brokers, outputTopic)
	if err != nil {
		return res, err
	}
	res.Report = verify.Ledger(payments, balances)
	return res, nil
}

type failoverInstance struct {
	name    string
	logPath string
	log     *os.File
	child   *Child
}

func (in *failoverInstance) close() {
	if in.child != nil {
		in.child.Kill()
	}
	in.log.Close()
}

// waitGroup waits until the ledger's group is stable with n members, each
// running tasks, and returns each member's input partitions by instance id.
func waitGroup(ctx context.Context, adm *kadm.Client, n int) (map[string][]int32, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		groups, err := adm.DescribeGroups(ctx, ledgerGroup)
		if err == nil {
			g := groups[ledgerGroup]
			got := map[string][]int32{}
			for _, m := range g.Members {
				c, ok := m.Assigned.AsConsumer()
				if !ok || m.InstanceID == nil {
					continue
				}
				for _, t := range c.Topics {
					if t.Topic == inputTopic && len(t.Partitions) > 0 {
						got[*m.InstanceID] = slices.Sorted(slices.Values(t.Partitions))
					}
				}
			}
			if g.State == "Stable" && len(got) == n {
				return got, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("demo: the ledger group never became stable with %d members running tasks: %w", n, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// preload writes n payments "pre<i>" over accounts accounts, as fast as
// the broker takes them.
func preload(ctx context.Context, cl *kgo.Client, n, accounts int, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x9e10ad))
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	for i := 0; i < n; i++ {
		account := fmt.Sprintf("acct-%04d", rng.IntN(accounts))
		v, _ := json.Marshal(ledger.Payment{ID: fmt.Sprintf("pre%d", i), Account: account, Amount: rng.Int64N(1501) - 500})
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: inputTopic, Key: []byte(account), Value: v}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				firstErr = errors.Join(firstErr, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return fmt.Errorf("demo: preload: %w", firstErr)
	}
	return nil
}

// waitOutputs waits until the balances hold want records, failing if an
// instance exits or nothing moves for two minutes.
func waitOutputs(ctx context.Context, seeds []string, want int64, insts []*failoverInstance) error {
	c := newCounter(seeds, outputTopic, nil)
	defer c.close()
	last, lastMove := int64(-1), time.Now()
	for {
		n := c.count()
		if n >= want {
			return nil
		}
		if n != last {
			last, lastMove = n, time.Now()
		}
		if time.Since(lastMove) > 2*time.Minute {
			return fmt.Errorf("demo: %d of %d balances, none for two minutes", n, want)
		}
		for _, in := range insts {
			select {
			case <-in.child.Done():
				return fmt.Errorf("demo: %s exited on its own: %v; see %s", in.name, in.child.Err(), in.logPath)
			default:
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitStandbys waits until, for every task, one of insts logged that its
// standby of the task caught up with the changelog.
func waitStandbys(ctx context.Context, parts []int32, insts []*failoverInstance) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for {
		caughtUp := map[string]bool{}
		for _, in := range insts {
			b, _ := os.ReadFile(in.logPath)
			for _, line := range strings.Split(string(b), "\n") {
				if m := logCaughtUp.FindStringSubmatch(line); m != nil {
					caughtUp[m[1]] = true
				}
			}
		}
		missing := 0
		for _, p := range parts {
			if !caughtUp[fmt.Sprintf("0_%d", p)] {
				missing++
			}
		}
		if missing == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo: %d standbys never caught up: %w", missing, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// outputWatch reads the balances of some partitions (read_committed) and
// notes, after the kill, the first record of each that another producer
// than the one before the kill wrote: the new owner's first committed
// output.
type outputWatch struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	at     time.Time // the kill; zero before
	before map[int32]int64
	first  map[int32]time.Duration
	parts  []int32
}

func watchOutputs(ctx context.Context, seeds []string, parts []int32) (*outputWatch, error) {
	offsets := map[int32]kgo.Offset{}
	for _, p := range parts {
		offsets[p] = kgo.NewOffset().AtEnd()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{outputTopic: offsets}), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("demo: output watch: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &outputWatch{cl: cl, cancel: cancel, done: make(chan struct{}), before: map[int32]int64{}, first: map[int32]time.Duration{}, parts: parts}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			f := cl.PollFetches(ctx)
			now := time.Now()
			w.mu.Lock()
			f.EachRecord(func(r *kgo.Record) {
				switch {
				case w.at.IsZero():
					w.before[r.Partition] = r.ProducerID
				case r.ProducerID != w.before[r.Partition]:
					if _, ok := w.first[r.Partition]; !ok {
						w.first[r.Partition] = now.Sub(w.at)
					}
				}
			})
			w.mu.Unlock()
		}
	}()
	return w, nil
}

func (w *outputWatch) killed(at time.Time) {
	w.mu.Lock()
	w.at = at
	w.mu.Unlock()
}

// wait returns each partition's first new output once all have one.
func (w *outputWatch) wait(ctx context.Context, limit time.Duration) (map[int32]time.Duration, error) {
	deadline := time.Now().Add(limit)
	for {
		w.mu.Lock()
		n := len(w.first)
		got := make(map[int32]time.Duration, n)
		for p, d := range w.first {
			got[p] = d
		}
		w.mu.Unlock()
		if n == len(w.parts) {
			return got, nil
		}
		if time.Now().After(deadline) {
			return got, fmt.Errorf("demo: after %v only partitions %v of %v had a committed balance from a new owner", limit, got, w.parts)
		}
		select {
		case <-ctx.Done():
			return got, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (w *outputWatch) close() {
	w.cancel()
	<-w.done
	w.cl.Close()
}

var (
	logTime      = regexp.MustCompile(`^time=(\S+) `)
	logAssigned  = regexp.MustCompile(`msg="tasks newly assigned".* tasks="?\[([^\]]*)\]`)
	logRestoring = regexp.MustCompile(`msg="restoring state".* task=(\S+) source=changelog offsets=(\d+)`)
	logRunning   = regexp.MustCompile(`msg="task assigned".* task=(\S+) input_offsets`)
	logCaughtUp  = regexp.MustCompile(`msg="standby task caught up".* task=(\S+) `)
)

// takeover reads a survivor's log for what it did with the victim's tasks
// after the kill: when it was assigned one (the last time), when the last
// one was restored, and how many changelog offsets its restores covered.
func takeover(path string, parts []int32, killed time.Time) (assigned, restored time.Duration, replayed int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("demo: %w", err)
	}
	defer f.Close()
	ours := map[string]bool{}
	for _, p := range parts {
		ours[fmt.Sprintf("0_%d", p)] = true
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		m := logTime.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, perr := time.Parse(time.RFC3339Nano, m[1])
		if perr != nil || at.Before(killed.Truncate(time.Millisecond)) {
			continue
		}
		if m := logAssigned.FindStringSubmatch(line); m != nil {
			for _, id := range strings.Fields(m[1]) {
				if ours[id] {
					assigned = max(assigned, at.Sub(killed))
				}
			}
		}
		if m := logRestoring.FindStringSubmatch(line); m != nil && ours[m[1]] {
			n, _ := strconv.ParseInt(m[2], 10, 64)
			replayed += n
		}
		if m := logRunning.FindStringSubmatch(line); m != nil && ours[m[1]] {
			restored = max(restored, at.Sub(killed))
		}
	}
	return assigned, restored, replayed, sc.Err()
}
