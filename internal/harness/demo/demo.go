package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	ledgerpipe "github.com/eddy-streams/eddy/examples/ledger/pipeline"
	windowed "github.com/eddy-streams/eddy/examples/windowed/pipeline"
	"github.com/eddy-streams/eddy/internal/failpoint"
	"github.com/eddy-streams/eddy/internal/harness/verify"
	"github.com/eddy-streams/eddy/serde/registry"
)

// FirstCommitMarker is the log line an app process prints once its first
// transaction committed; the demo measures recovery time with it.
const FirstCommitMarker = "first transaction committed"

// Options configure a demo run.
type Options struct {
	Brokers []string
	// LedgerCommand is the argv prefix that runs the ledger, e.g.
	// {"/path/to/eddy", "ledger"}; the demo appends the flags. Nil runs
	// no ledger.
	LedgerCommand []string
	// WindowedCommand is the argv prefix that runs examples/windowed on
	// the same payments, e.g. {"/path/to/eddy", "windowed"}; nil runs
	// none. It is killed and restarted with the ledger, and its late
	// payments go to LateTopic, which the verification checks too.
	WindowedCommand []string
	// Window and Grace are the windowed example's (default: its own,
	// 10s and 2s).
	Window, Grace time.Duration
	// EventSpeed is how much faster than the wall clock the payments'
	// event time runs when the windowed example runs (default 5: a
	// 10 s window closes every 2 s of the run).
	EventSpeed float64
	// WorkDir holds the apps' state directories and their logs.
	WorkDir    string
	Rate       int
	Accounts   int
	Partitions int
	Duration   time.Duration
	// CrashEvery is the mean time between SIGKILLs of the apps (each
	// interval drawn uniformly from half to one and a half of it); 0
	// never kills.
	CrashEvery time.Duration
	Seed       uint64
	// MidRun, when set, is called once half-way through the generation
	// (the crash tests restart the broker there).
	MidRun func() error
	// StallTimeout is how long the demo waits, once generation ended,
	// for an app that makes no progress before it verifies anyway.
	// Default 2 minutes.
	StallTimeout time.Duration
	// Out receives progress lines; nil discards them.
	Out io.Writer
	// AppArgs are flags added to every app's command line (e.g. TLS and
	// SASL flags; the SASL password goes in the environment, which the
	// apps inherit).
	AppArgs []string
	// ClientOpts are added to the demo's own Kafka clients (generator,
	// counters, verification), e.g. TLS and SASL.
	ClientOpts []kgo.Opt
	// Hostile spreads about one record of each cheap hostile kind (see
	// Hostile) over the run, and the verification checks each one's
	// outcome per app. Its records are JSON: Format must be JSON.
	Hostile bool
	// Format is the encoding of the payments, the balances and the late
	// payments (the apps' --format; default JSON). Avro and Protobuf go
	// through the schema registry at RegistryURL: the generator writes
	// with the ledger's serde, the verification decodes with its own
	// (verify.Transcoder).
	Format      ledgerpipe.Format
	RegistryURL string
	// Preloaded is the number of valid payments on the input topic
	// before the run (a test wrote them with another client); the ledger
	// owes them balances too.
	Preloaded int64
	// PostgresDSN, when set, runs the ledger with --postgres (its
	// balances also written into PostgreSQL in the commit cycle) and
	// verifies the tables (Result.Postgres).
	PostgresDSN string
	// LedgerFailpoints are failpoints (internal/failpoint's
	// EDDY_FAILPOINTS values) to crash the ledger at, in order: each
	// restart is armed with the first not yet hit, and a life that
	// SIGKILLs itself at it is restarted like a killed one (one killed
	// by the schedule first leaves it to the next life), so a run
	// crashes in chosen windows of the commit cycle too.
	LedgerFailpoints []string
}

func (o Options) format() ledgerpipe.Format {
	if o.Format == "" {
		return ledgerpipe.JSON
	}
	return o.Format
}

// formatArgs are the apps' flags of the format.
func (o Options) formatArgs() []string {
	if o.format() == ledgerpipe.JSON {
		return nil
	}
	return []string{"--format", string(o.format()), "--schema-registry", o.RegistryURL}
}

// readTopic reads one of the topics in the run's format (payments,
// balances, late payments) as verify.ReadAll does, with the values
// decoded into the JSON the verifiers read.
func (o Options) readTopic(ctx context.Context, topic string) ([]*kgo.Record, error) {
	recs, err := verify.ReadAll(ctx, o.Brokers, topic, o.ClientOpts...)
	if err != nil || o.format() == ledgerpipe.JSON {
		return recs, err
	}
	tc, err := verify.NewTranscoder(o.RegistryURL)
	if err != nil {
		return nil, err
	}
	return tc.Records(ctx, recs)
}

func (o Options) stallTimeout() time.Duration {
	if o.StallTimeout > 0 {
		return o.StallTimeout
	}
	return 2 * time.Minute
}

func (o Options) window() time.Duration {
	if o.Window > 0 {
		return o.Window
	}
	return windowed.DefaultWindow
}

func (o Options) grace() time.Duration {
	if o.Grace > 0 {
		return o.Grace
	}
	return windowed.DefaultGrace
}

func (o Options) eventSpeed() float64 {
	if o.EventSpeed > 0 {
		return o.EventSpeed
	}
	return 5
}

// Result is what a demo run measured.
type Result struct {
	// Ledger and Windowed say which apps ran.
	Ledger, Windowed bool
	Report           verify.LedgerReport
	// Windows compares the windowed example's totals (and late records)
	// with the reference.
	Windows verify.WindowReport
	// Crashes counts the SIGKILLs; each kills every app (but those of
	// FailpointCrashes, which a ledger life armed with a failpoint sent
	// itself).
	Crashes, FailpointCrashes int
	// Resumes are, per restart after a kill, the time from the restart to
	// the new ledger process's first committed transaction;
	// WindowedResumes the same for the windowed example.
	Resumes, WindowedResumes []time.Duration
	// DeadLetters are the records on the dead-letter topic; Invalid the
	// malformed payments the generator wrote. Each app sends each one
	// there once (see WantDeadLetters).
	DeadLetters int
	Invalid     int
	// Postgres compares the ledger's --postgres tables with its
	// balances (Options.PostgresDSN).
	Postgres *PostgresReport
	// Hostile checks the hostile records' dead letters (Options.Hostile);
	// Hostile.Bad of them each have one dead letter per app.
	Hostile HostileReport
	// ProduceFailures are payments the generator gave up on (the broker
	// was down); they may or may not be in the input.
	ProduceFailures int
	// CaughtUp is set when every app produced all its expected outputs
	// before the verification.
	CaughtUp bool
	// MaxStall is the longest time (at one-second resolution) the ledger
	// had payments to process and produced no balance.
	MaxStall               time.Duration
	LedgerLog, WindowedLog string
}

// WantDeadLetters is the number of dead letters an exact run has: one per
// malformed payment per app, as both apps read the same payments.
func (r Result) WantDeadLetters() int {
	apps := 0
	for _, ran := range []bool{r.Ledger, r.Windowed} {
		if ran {
			apps++
		}
	}
	return (r.Invalid + r.Hostile.Bad) * apps
}

// OK reports whether the run was exactly once.
func (r Result) OK() bool {
	return (!r.Ledger || r.Report.OK()) && (!r.Windowed || r.Windows.OK()) && r.Hostile.OK() && r.DeadLetters == r.WantDeadLetters() &&
		(r.Postgres == nil || r.Postgres.OK())
}

const (
	inputTopic    = "payments"
	outputTopic   = "balances"
	totalsTopic   = "totals"
	lateTopic     = "payments.late"
	catchUpSettle = 2 * time.Second
)

// app is one example running as a child process that the demo kills.
type app struct {
	name    string
	argv    []string
	logPath string
	logf    *os.File
	child   *Child
	marks   chan time.Time
	out     *counter
	// restartedAt is the last restart after a kill; waiting is set until
	// the restarted process committed its first transaction.
	restartedAt time.Time
	waiting     bool
	resumes     []time.Duration
	// failpoints are the failpoints still to hit
	// (Options.LedgerFailpoints); armed says the running life is armed
	// with the first, so its own SIGKILL is a crash.
	failpoints []string
	armed      bool
	// want is the number of outputs an exact run has, once known (-1
	// before); lastProgress is when the output count last moved.
	want         int64
	lastCount    int64
	lastProgress time.Time
}

func startApp(name string, argv []string, dir string, seeds []string, output string, clientOpts []kgo.Opt) (*app, error) {
	a := &app{name: name, argv: argv, logPath: filepath.Join(dir, name+".log"), marks: make(chan time.Time, 16), want: -1, lastCount: -1}
	var err error
	if a.logf, err = os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	if a.child, err = StartChild(argv, a.logf, FirstCommitMarker, a.marks); err != nil {
		a.logf.Close()
		return nil, err
	}
	a.out = newCounter(seeds, output, clientOpts)
	return a, nil
}

// kill SIGKILLs the app and starts it again at once, armed with the
// failpoints of restart n if any.
func (a *app) kill(n int) error {
	a.child.Kill()
	var env []string
	a.armed = len(a.failpoints) > 0
	if a.armed {
		env = []string{failpoint.Env + "=" + a.failpoints[0]}
	}
	c, err := StartChildEnv(a.argv, env, a.logf, FirstCommitMarker, a.marks)
	if err != nil {
		return err
	}
	a.child, a.restartedAt, a.waiting = c, time.Now(), true
	fmt.Fprintf(a.logf, "=== demo: SIGKILL #%d, restarted as pid %d %s\n", n, c.Pid(), strings.Join(env, " "))
	return nil
}

// killedItself reports whether the app's life ended at its own failpoint,
// which is then hit.
func (a *app) killedItself() bool {
	var exit *exec.ExitError
	if !a.armed || !errors.As(a.child.Err(), &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return false
	}
	a.failpoints = a.failpoints[1:]
	return true
}

// exited is the error of an app that stopped although nobody stopped it.
func (a *app) exited() error {
	if err := a.child.Err(); err != nil {
		return fmt.Errorf("demo: the %s exited on its own: %w; see %s", a.name, err, a.logPath)
	}
	return fmt.Errorf("demo: the %s exited on its own with status 0; see %s", a.name, a.logPath)
}

func (a *app) mark(at time.Time) {
	if a.waiting && at.After(a.restartedAt) {
		a.resumes = append(a.resumes, at.Sub(a.restartedAt))
		a.waiting = false
	}
}

// close kills the app if it still runs (a no-op after a clean stop).
func (a *app) close() {
	a.child.Kill()
	a.out.close()
	a.logf.Close()
}

// The select in Run takes an app's channels through these, so that an app
// that does not run (nil) is a case that never fires.
func (a *app) marksC() <-chan time.Time {
	if a == nil {
		return nil
	}
	return a.marks
}

func (a *app) doneC() <-chan struct{} {
	if a == nil {
		return nil
	}
	return a.child.Done()
}

// Run runs the demo against opts.Brokers.
func Run(ctx context.Context, opts Options) (Result, error) {
	res := Result{Ledger: opts.LedgerCommand != nil, Windowed: opts.WindowedCommand != nil}
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	if !res.Ledger && !res.Windowed {
		return res, errors.New("demo: no app to run: set LedgerCommand, WindowedCommand or both")
	}
	if opts.Hostile && opts.format() != ledgerpipe.JSON {
		return res, fmt.Errorf("demo: the hostile records are JSON: run them with the JSON format, not %s", opts.format())
	}
	if opts.format() != ledgerpipe.JSON && opts.RegistryURL == "" {
		return res, fmt.Errorf("demo: the %s format needs a schema registry (RegistryURL)", opts.format())
	}
	if err := os.MkdirAll(opts.WorkDir, 0o700); err != nil {
		return res, fmt.Errorf("demo: %w", err)
	}
	var ledger, win *app
	var apps []*app
	defer func() {
		for _, a := range apps {
			a.close()
		}
	}()
	if res.Ledger {
		argv := append(append([]string(nil), opts.LedgerCommand...),
			"--brokers", opts.Brokers[0],
			"--state-dir", filepath.Join(opts.WorkDir, "ledger-state"),
			"--partitions", strconv.Itoa(opts.Partitions),
		)
		argv = append(append(argv, opts.AppArgs...), opts.formatArgs()...)
		if opts.PostgresDSN != "" {
			argv = append(argv, "--postgres", opts.PostgresDSN)
		}
		a, err := startApp("ledger", argv, opts.WorkDir, opts.Brokers, outputTopic, opts.ClientOpts)
		if err != nil {
			return res, err
		}
		a.failpoints = slices.Clone(opts.LedgerFailpoints)
		ledger, res.LedgerLog = a, a.logPath
		apps = append(apps, a)
	}
	if res.Windowed {
		argv := append(append([]string(nil), opts.WindowedCommand...),
			"--brokers", opts.Brokers[0],
			"--state-dir", filepath.Join(opts.WorkDir, "windowed-state"),
			"--partitions", strconv.Itoa(opts.Partitions),
			"--window", opts.window().String(),
			"--grace", opts.grace().String(),
			"--late-topic", lateTopic,
		)
		argv = append(append(argv, opts.AppArgs...), opts.formatArgs()...)
		a, err := startApp("windowed", argv, opts.WorkDir, opts.Brokers, totalsTopic, opts.ClientOpts)
		if err != nil {
			return res, err
		}
		win, res.WindowedLog = a, a.logPath
		apps = append(apps, a)
	}
	for _, a := range apps {
		if err := waitTopic(ctx, opts.Brokers, a.out.topic, opts.ClientOpts); err != nil {
			return res, err
		}
	}

	gen := &Generator{Seeds: opts.Brokers, ClientOpts: opts.ClientOpts, Topic: inputTopic, Rate: opts.Rate, Accounts: opts.Accounts, InvalidEvery: 5000, Seed: opts.Seed}
	if opts.format() != ledgerpipe.JSON {
		enc, closeEnc, err := paymentEncoder(opts)
		if err != nil {
			return res, err
		}
		defer closeEnc()
		gen.Encode = enc
	}
	if opts.Hostile {
		// One round of the kinds over the run, the first a little after
		// it starts.
		records := float64(opts.Rate) * opts.Duration.Seconds()
		gen.Hostile = &Hostile{Every: max(2, int(records)/(HostileKinds(false)+1))}
	}
	if res.Windowed {
		w, g := opts.window().Milliseconds(), opts.grace().Milliseconds()
		gen.Events = &EventTime{
			Start: time.Now().UnixMilli(),
			Step:  opts.eventSpeed() * 1000 / float64(opts.Rate),
			// One payment in ten is out of order within the grace
			// period; one in two hundred is late by more than window
			// + grace, plus a second because a partition's stream time
			// trails the generator's clock by a few payments. The
			// reference, not the generator, decides what is late.
			OutOfOrder: 0.1, Disorder: g,
			Late: 0.005, LateBy: w + g + 1000,
		}
	}
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
	generating := true
	var caughtUpSince time.Time
	for _, a := range apps {
		a.lastProgress = time.Now()
	}
	for {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case err := <-genDone:
			if err != nil {
				return res, err
			}
			generating, crash = false, nil
			if err := setWants(ctx, opts, gen, ledger, win); err != nil {
				return res, err
			}
			fmt.Fprintf(out, "generator done: %d payments; waiting for the apps to catch up\n", gen.Produced())
		case <-midRun:
			if opts.MidRun != nil {
				if err := opts.MidRun(); err != nil {
					return res, fmt.Errorf("demo: mid-run step: %w", err)
				}
				fmt.Fprintf(out, "mid-run step done (%.1fs)\n", time.Since(start).Seconds())
			}
		case <-crash:
			res.Crashes++
			for _, a := range apps {
				if err := a.kill(res.Crashes); err != nil {
					return res, err
				}
			}
			crash = nextCrash()
		case at := <-ledger.marksC():
			ledger.mark(at)
		case at := <-win.marksC():
			win.mark(at)
		case <-ledger.doneC():
			if !ledger.killedItself() {
				return res, ledger.exited()
			}
			// Its failpoint crashed it: a crash like the others.
			res.Crashes++
			res.FailpointCrashes++
			if err := ledger.kill(res.Crashes); err != nil {
				return res, err
			}
		case <-win.doneC():
			return res, win.exited()
		case now := <-progress.C:
			line := fmt.Sprintf("%5.0fs  payments %8d", now.Sub(start).Seconds(), gen.Produced())
			if ledger != nil {
				n := ledger.out.count()
				want := opts.Preloaded + gen.Produced() - gen.Invalid() - gen.hostileBad()
				line += fmt.Sprintf("  balances %8d  lag %6d", n, max(want-n, 0))
				// While payments flow, a ledger that writes no balance
				// although it has payments to process is stalled.
				if n != ledger.lastCount || n >= want {
					ledger.lastProgress, ledger.lastCount = now, n
				}
				res.MaxStall = max(res.MaxStall, now.Sub(ledger.lastProgress))
			}
			if win != nil {
				n := win.out.count()
				line += fmt.Sprintf("  totals %7d", n)
				if win.want >= 0 {
					line += fmt.Sprintf(" of %d", win.want)
				}
				if n != win.lastCount {
					win.lastProgress, win.lastCount = now, n
				}
			}
			fmt.Fprintf(out, "%s  crashes %d%s\n", line, res.Crashes, lastResume(ledger, win))
			if generating {
				continue
			}
			caughtUp, stalled := true, false
			for _, a := range apps {
				if a.lastCount >= a.want {
					a.lastProgress = now
					continue
				}
				caughtUp = false
				if now.Sub(a.lastProgress) > opts.stallTimeout() {
					stalled = true
					// Verify anyway: the report says what is missing.
					fmt.Fprintf(out, "the %s made no progress for %v with %d outputs missing; verifying what is there\n", a.name, opts.stallTimeout(), a.want-a.lastCount)
				}
			}
			switch {
			case stalled:
				return finish(ctx, opts, res, apps, gen)
			case !caughtUp:
				caughtUpSince = time.Time{}
			case caughtUpSince.IsZero():
				caughtUpSince = now
			case now.Sub(caughtUpSince) >= catchUpSettle:
				// Settled: a duplicate would have had the time to show.
				res.CaughtUp = true
				return finish(ctx, opts, res, apps, gen)
			}
		}
	}
}

// setWants closes the event time (so that every window with a payment
// closes) and computes how many outputs each app owes.
func setWants(ctx context.Context, opts Options, gen *Generator, ledger, win *app) error {
	if win != nil {
		if err := gen.Close(ctx, (opts.window() + opts.grace()).Milliseconds()); err != nil {
			return err
		}
		payments, err := opts.readTopic(ctx, inputTopic)
		if err != nil {
			return err
		}
		payments = GoodFor(AppWindowed, payments, gen.hostileRecords())
		win.want = int64(verify.Windowed(payments, opts.window(), opts.grace()).ExpectedWindows())
	}
	if ledger != nil {
		ledger.want = opts.Preloaded + gen.Produced() - gen.Invalid() - gen.hostileBad()
	}
	return nil
}

func lastResume(ledger, win *app) string {
	s := ""
	for _, a := range []*app{ledger, win} {
		if a != nil && len(a.resumes) > 0 {
			s += fmt.Sprintf("  %s recovery %.1fs", a.name, a.resumes[len(a.resumes)-1].Seconds())
		}
	}
	return s
}

// finish stops the apps cleanly and verifies the topics.
func finish(ctx context.Context, opts Options, res Result, apps []*app, gen *Generator) (Result, error) {
	for _, a := range apps {
		if err := a.child.Stop(30 * time.Second); err != nil {
			return res, fmt.Errorf("demo: clean stop of the %s: %w", a.name, err)
		}
		switch a.name {
		case "ledger":
			res.Resumes = a.resumes
		case "windowed":
			res.WindowedResumes = a.resumes
		}
	}
	payments, err := opts.readTopic(ctx, inputTopic)
	if err != nil {
		return res, err
	}
	// The references take the records each app processes: a hostile
	// record the app refuses may look like a payment to them (a bad
	// time, a key that differs from its account).
	hostile := gen.hostileRecords()
	producers := map[int64]string{}
	var ran []string
	if res.Ledger {
		outputs, err := opts.readTopic(ctx, outputTopic)
		if err != nil {
			return res, err
		}
		res.Report = verify.Ledger(GoodFor(AppLedger, payments, hostile), outputs)
		if opts.PostgresDSN != "" {
			pg, err := VerifyPostgres(ctx, opts.PostgresDSN, outputs)
			if err != nil {
				return res, err
			}
			res.Postgres = &pg
		}
		Producers(producers, AppLedger, outputs)
		ran = append(ran, AppLedger)
	}
	if res.Windowed {
		totals, err := verify.ReadAll(ctx, opts.Brokers, totalsTopic, opts.ClientOpts...)
		if err != nil {
			return res, err
		}
		late, err := opts.readTopic(ctx, lateTopic)
		if err != nil {
			return res, err
		}
		res.Windows = verify.Windowed(GoodFor(AppWindowed, payments, hostile), opts.window(), opts.grace()).Compare(totals)
		res.Windows.CheckLate(late)
		Producers(producers, AppWindowed, totals)
		ran = append(ran, AppWindowed)
	}
	dead, err := verify.ReadAll(ctx, opts.Brokers, inputTopic+".dlq", opts.ClientOpts...)
	if err != nil {
		return res, err
	}
	res.Hostile = CheckHostile(inputTopic, hostile, dead, producers, ran)
	res.DeadLetters, res.Invalid = len(dead), int(gen.Invalid())
	res.ProduceFailures = int(gen.Failed())
	return res, nil
}

// paymentEncoder is the generator's encoder of opts.Format: the ledger's
// own serde of the payments, through the registry; close closes its
// registry client.
func paymentEncoder(opts Options) (encode func(ledgerpipe.Payment) ([]byte, error), close func(), err error) {
	reg, err := registry.New(registry.Config{URLs: []string{opts.RegistryURL}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, nil, fmt.Errorf("demo: %w", err)
	}
	s, err := ledgerpipe.PaymentCodec(opts.format(), reg, inputTopic)
	if err != nil {
		reg.Close()
		return nil, nil, fmt.Errorf("demo: %w", err)
	}
	return func(p ledgerpipe.Payment) ([]byte, error) { return s.Serialize(nil, p) }, func() { reg.Close() }, nil
}

// waitTopic waits until topic exists (the ledger creates its topics).
func waitTopic(ctx context.Context, seeds []string, topic string, clientOpts []kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, clientOpts...)...)
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
	topic  string
	n      atomic.Int64
	cancel context.CancelFunc
	done   chan struct{}
}

func newCounter(seeds []string, topic string, clientOpts []kgo.Opt) *counter {
	ctx, cancel := context.WithCancel(context.Background())
	c := &counter{topic: topic, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(200 * time.Millisecond)}, clientOpts...)...)
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
