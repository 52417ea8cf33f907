package demo

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/verify"
)

// FirstCommitMarker is the log line a ledger process prints once its first
// transaction committed; the demo measures recovery time with it.
const FirstCommitMarker = "first transaction committed"

// Options configure a demo run.
type Options struct {
	Brokers []string
	// LedgerCommand is the argv prefix that runs the ledger, e.g.
	// {"/path/to/eddy", "ledger"}; the demo appends the flags.
	LedgerCommand []string
	// WorkDir holds the ledger's state directory and its log.
	WorkDir    string
	Rate       int
	Accounts   int
	Partitions int
	Duration   time.Duration
	// CrashEvery is the mean time between SIGKILLs of the ledger (each
	// interval drawn uniformly from half to one and a half of it); 0
	// never kills.
	CrashEvery time.Duration
	Seed       uint64
	// MidRun, when set, is called once half-way through the generation
	// (the crash tests restart the broker there).
	MidRun func() error
	// StallTimeout is how long the demo waits, once generation ended,
	// for a ledger that makes no progress before it verifies anyway.
	// Default 2 minutes.
	StallTimeout time.Duration
	// Out receives progress lines; nil discards them.
	Out io.Writer
}

func (o Options) stallTimeout() time.Duration {
	if o.StallTimeout > 0 {
		return o.StallTimeout
	}
	return 2 * time.Minute
}

// Result is what a demo run measured.
type Result struct {
	Report  verify.LedgerReport
	Crashes int
	// Resumes are, per restart after a kill, the time from the restart to
	// the new process's first committed transaction.
	Resumes []time.Duration
	// DeadLetters are the records on the dead-letter topic; Invalid the
	// malformed payments the generator wrote. They must be equal.
	DeadLetters int
	Invalid     int
	// ProduceFailures are payments the generator gave up on (the broker
	// was down); they may or may not be in the input.
	ProduceFailures int
	// CaughtUp is set when the ledger produced a balance for every payment
	// before the verification.
	CaughtUp bool
	// MaxStall is the longest time (at one-second resolution) the ledger
	// had payments to process and produced no balance.
	MaxStall  time.Duration
	LedgerLog string
}

// OK reports whether the run was exactly once.
func (r Result) OK() bool { return r.Report.OK() && r.DeadLetters == r.Invalid }

const (
	inputTopic  = "payments"
	outputTopic = "balances"
)

// Run runs the demo against opts.Brokers.
func Run(ctx context.Context, opts Options) (Result, error) {
	var res Result
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	if err := os.MkdirAll(opts.WorkDir, 0o700); err != nil {
		return res, fmt.Errorf("demo: %w", err)
	}
	res.LedgerLog = filepath.Join(opts.WorkDir, "ledger.log")
	logf, err := os.OpenFile(res.LedgerLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return res, fmt.Errorf("demo: %w", err)
	}
	defer logf.Close()
	argv := append(append([]string(nil), opts.LedgerCommand...),
		"--brokers", opts.Brokers[0],
		"--state-dir", filepath.Join(opts.WorkDir, "ledger-state"),
		"--partitions", strconv.Itoa(opts.Partitions),
	)
	marks := make(chan time.Time, 16)
	child, err := StartChild(argv, logf, FirstCommitMarker, marks)
	if err != nil {
		return res, err
	}
	defer func() { child.Kill() }() // a no-op once the ledger stopped cleanly
	if err := waitTopic(ctx, opts.Brokers, outputTopic); err != nil {
		return res, err
	}

	balances := newCounter(opts.Brokers, outputTopic)
	defer balances.close()
	gen := &Generator{Seeds: opts.Brokers, Topic: inputTopic, Rate: opts.Rate, Accounts: opts.Accounts, InvalidEvery: 5000, Seed: opts.Seed}
	genCtx, stopGen := context.WithTimeout(ctx, opts.Duration)
	defer stopGen()
	genDone := make(chan error, 1)
	go func() { genDone <- gen.Run(genCtx) }()

	rng := rand.New(rand.NewPCG(opts.Seed, 0xc4a5))
	nextCrash := func() <-chan time.Time {
		if opts.CrashEvery <= 0 {
			return nil
		}
		d := time.Duration(float64(opts.CrashEvery) * (0.5 + rng.Float64()))
		return time.After(d)
	}
	crash := nextCrash()
	progress := time.NewTicker(time.Second)
	defer progress.Stop()
	start := time.Now()
	midRun := time.After(opts.Duration / 2)
	var restartedAt time.Time
	waitingResume := false
	generating := true
	var caughtUpSince time.Time
	lastProgress, lastCount := time.Now(), int64(-1)
	for {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case err := <-genDone:
			if err != nil {
				return res, err
			}
			generating, crash = false, nil
			fmt.Fprintf(out, "generator done: %d payments; waiting for the ledger to catch up\n", gen.Produced())
		case <-midRun:
			if opts.MidRun != nil {
				if err := opts.MidRun(); err != nil {
					return res, fmt.Errorf("demo: mid-run step: %w", err)
				}
				fmt.Fprintf(out, "mid-run step done (%.1fs)\n", time.Since(start).Seconds())
			}
		case <-crash:
			child.Kill()
			res.Crashes++
			child, err = StartChild(argv, logf, FirstCommitMarker, marks)
			if err != nil {
				return res, err
			}
			restartedAt, waitingResume = time.Now(), true
			fmt.Fprintf(logf, "=== demo: SIGKILL #%d, restarted as pid %d\n", res.Crashes, child.Pid())
			crash = nextCrash()
		case at := <-marks:
			if waitingResume && at.After(restartedAt) {
				res.Resumes = append(res.Resumes, at.Sub(restartedAt))
				waitingResume = false
			}
		case <-child.Done():
			return res, fmt.Errorf("demo: the ledger exited on its own (%v); see %s", child.Err(), res.LedgerLog)
		case now := <-progress.C:
			n := balances.count()
			want := gen.Produced() - gen.Invalid()
			fmt.Fprintf(out, "%5.0fs  payments %8d  balances %8d  lag %6d  crashes %d%s\n",
				now.Sub(start).Seconds(), gen.Produced(), n, max(want-n, 0), res.Crashes, lastResume(res.Resumes))
			if n != lastCount || n >= want {
				lastProgress, lastCount = now, n
			}
			res.MaxStall = max(res.MaxStall, now.Sub(lastProgress))
			if generating {
				continue
			}
			if n >= want {
				if caughtUpSince.IsZero() {
					caughtUpSince = now
				} else if now.Sub(caughtUpSince) >= 2*time.Second {
					res.CaughtUp = true
					return finish(ctx, opts, res, child, gen)
				}
			} else if now.Sub(lastProgress) > opts.stallTimeout() {
				// Verify anyway: the report says what is missing.
				fmt.Fprintf(out, "the ledger made no progress for %v with %d balances missing; verifying what is there\n", opts.stallTimeout(), want-n)
				return finish(ctx, opts, res, child, gen)
			}
		}
	}
}

func lastResume(rs []time.Duration) string {
	if len(rs) == 0 {
		return ""
	}
	return fmt.Sprintf("  last recovery %.1fs", rs[len(rs)-1].Seconds())
}

// finish stops the ledger cleanly and verifies the topics.
func finish(ctx context.Context, opts Options, res Result, child *Child, gen *Generator) (Result, error) {
	if err := child.Stop(30 * time.Second); err != nil {
		return res, fmt.Errorf("demo: clean stop of the ledger: %w", err)
	}
	payments, err := verify.ReadAll(ctx, opts.Brokers, inputTopic)
	if err != nil {
		return res, err
	}
	outputs, err := verify.ReadAll(ctx, opts.Brokers, outputTopic)
	if err != nil {
		return res, err
	}
	dead, err := verify.ReadAll(ctx, opts.Brokers, inputTopic+".dlq")
	if err != nil {
		return res, err
	}
	res.Report = verify.Ledger(payments, outputs)
	res.DeadLetters, res.Invalid = len(dead), int(gen.Invalid())
	res.ProduceFailures = int(gen.Failed())
	return res, nil
}

// waitTopic waits until topic exists (the ledger creates its topics).
func waitTopic(ctx context.Context, seeds []string, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return fmt.Errorf("demo: client: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if ok, err := topicExists(ctx, cl, topic); err == nil && ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo: topic %s was not created within a minute: %w", topic, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// counter counts the committed records of a topic as they arrive.
type counter struct {
	n      atomic.Int64
	cancel context.CancelFunc
	done   chan struct{}
}

func newCounter(seeds []string, topic string) *counter {
	ctx, cancel := context.WithCancel(context.Background())
	c := &counter{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			return
		}
		defer cl.Close()
		for ctx.Err() == nil {
			f := cl.PollFetches(ctx)
			c.n.Add(int64(f.NumRecords()))
		}
	}()
	return c
}

func (c *counter) count() int64 { return c.n.Load() }
func (c *counter) close()       { c.cancel(); <-c.done }
