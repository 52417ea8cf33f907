// Package chaos is eddy's chaos harness (`eddy chaos`): it runs ledger and
// windowed example processes against an `eddy broker` process, injects
// faults on a seeded schedule (SIGKILL, SIGSTOP past the session timeout,
// broker restarts clean and crashed, broker errors, slow and failing
// disks, a cut network), then verifies what Kafka's EosTestDriver verifies:
// outputs equal to the reference, final state equal to the reference, no
// hanging transaction. The embedded broker's own gaps under SIGKILL
// (docs/design.md §6) are counted apart from eddy's failures.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	windowed "github.com/eddy-streams/eddy/examples/windowed/pipeline"
	"github.com/eddy-streams/eddy/internal/harness/demo"
	"github.com/eddy-streams/eddy/internal/harness/verify"
)

// Fault kinds, as --faults names them.
const (
	KindKill         = "kill"
	KindStop         = "stop"
	KindBrokerTerm   = "broker-term"
	KindBrokerKill   = "broker-kill"
	KindBrokerErrors = "broker-errors"
	KindDisk         = "disk"
	KindNetwork      = "network"
)

// AllKinds are every fault kind, in the report's order.
var AllKinds = []string{KindKill, KindStop, KindBrokerTerm, KindBrokerKill, KindBrokerErrors, KindDisk, KindNetwork}

// ParseKinds parses a comma-separated list of fault kinds ("all": every one).
func ParseKinds(s string) ([]string, error) {
	if s == "all" {
		return slices.Clone(AllKinds), nil
	}
	var kinds []string
	for _, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		if !slices.Contains(AllKinds, k) {
			return nil, fmt.Errorf("chaos: unknown fault kind %q: choose from %s or all", k, strings.Join(AllKinds, ","))
		}
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	return kinds, nil
}

// Options configure a chaos run.
type Options struct {
	// EddyBin is the eddy binary that runs the broker and the apps.
	EddyBin string
	// WorkDir holds the broker's data, the apps' state and every log.
	WorkDir string
	Seed    uint64
	// Duration is how long payments flow and faults are injected (at
	// least until every kind was injected once); the catch-up and
	// verification come after.
	Duration time.Duration
	// Instances is the number of ledger processes (one consumer group).
	Instances int
	// Windowed also runs one windowed-totals process on the same payments.
	Windowed bool
	// Kinds are the fault kinds to inject (default: all).
	Kinds      []string
	Rate       int // payments per second (default 300)
	Accounts   int // default 200
	Partitions int // default 4
	// SessionTimeout is the apps' group session timeout (the runtime's
	// default, 10s): a frozen app stays frozen past it.
	SessionTimeout time.Duration
	// Out receives a progress line per second and the report.
	Out io.Writer
}

func (o *Options) defaults() {
	if o.Instances <= 0 {
		o.Instances = 2
	}
	if len(o.Kinds) == 0 {
		o.Kinds = slices.Clone(AllKinds)
	}
	if o.Rate <= 0 {
		o.Rate = 300
	}
	if o.Accounts <= 0 {
		o.Accounts = 200
	}
	if o.Partitions <= 0 {
		o.Partitions = 4
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 10 * time.Second
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
}

const (
	inputTopic  = "payments"
	outputTopic = "balances"
	totalsTopic = "totals"
	lateTopic   = "payments.late"
	dlqTopic    = "payments.dlq"
	changelog   = "ledger-balances-changelog"
	// windowedChangelog is the windowed app's store's changelog.
	windowedChangelog = "windowed-totals-changelog"
	// recoveryCap is how long the harness waits for the pipeline to work
	// again after a fault before it counts the fault as unrecovered and
	// goes on.
	recoveryCap = 2 * time.Minute
	// eventSpeed: the windowed example's 10 s windows close every 2 s.
	eventSpeed = 5
)

// harness is one run's moving parts.
type harness struct {
	// shownFaults and shownRecovery are what the progress line shows of
	// the report, which the fault loop alone writes.
	shownFaults, shownRecovery atomic.Int64
	opts                       Options
	rng                        *rand.Rand
	broker                     *brokerProc
	proxy                      *Proxy
	apps                       []*app
	gen                        *demo.Generator
	clOpts                     []kgo.Opt // the harness's own clients: straight to the broker
	out                        *watcher  // balances
	totals                     *watcher  // windowed totals, nil without it
	rep                        *Report
	start                      time.Time
	current                    string // the fault being injected or recovered from
}

// Run runs the chaos harness and returns its report. An error means the
// run could not be carried out (a process would not start, the broker is
// gone); a run that found exactly-once violations returns a Report whose
// OK is false.
func Run(ctx context.Context, opts Options) (*Report, error) {
	opts.defaults()
	h := &harness{opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, 0xc4a05)),
		rep: newReport(opts)}
	defer h.close()
	if err := h.setup(ctx); err != nil {
		return h.rep, err
	}
	if err := h.run(ctx); err != nil {
		return h.rep, err
	}
	if err := h.finish(ctx); err != nil {
		return h.rep, err
	}
	return h.rep, nil
}

func (h *harness) setup(ctx context.Context) error {
	o := h.opts
	if err := os.MkdirAll(o.WorkDir, 0o700); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	brokerAddr, err := freeAddr()
	if err != nil {
		return err
	}
	faultAddr, err := freeAddr()
	if err != nil {
		return err
	}
	if h.proxy, err = NewProxy("127.0.0.1:0", brokerAddr); err != nil {
		return err
	}
	// The broker advertises the proxy; the harness's own clients dial the
	// broker itself, so cutting the apps' network leaves the harness
	// seeing the broker.
	proxyAddr := h.proxy.Addr()
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	h.clOpts = []kgo.Opt{kgo.SeedBrokers(brokerAddr), kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		if host == proxyAddr {
			host = brokerAddr
		}
		return dialer.DialContext(ctx, network, host)
	})}
	blog, err := os.OpenFile(filepath.Join(o.WorkDir, "broker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	h.broker = &brokerProc{bin: o.EddyBin, addr: brokerAddr, advertise: proxyAddr, faultAPI: faultAddr,
		dir: filepath.Join(o.WorkDir, "broker-data"), log: blog}
	if err := h.broker.start(); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "chaos: seed %d, %v, %d ledger instance(s)%s, faults %s; broker %s behind proxy %s; work dir %s\n",
		o.Seed, o.Duration, o.Instances, map[bool]string{true: " + 1 windowed", false: ""}[o.Windowed],
		strings.Join(o.Kinds, ","), brokerAddr, proxyAddr, o.WorkDir)
	for i := 1; i <= o.Instances; i++ {
		name := fmt.Sprintf("ledger-%d", i)
		argv := []string{o.EddyBin, "ledger", "--brokers", proxyAddr, "--state-dir", filepath.Join(o.WorkDir, name),
			"--partitions", strconv.Itoa(o.Partitions), "--instance-id", name}
		a, err := newApp(name, "ledger", argv, o.WorkDir)
		if err != nil {
			return err
		}
		h.apps = append(h.apps, a)
	}
	if o.Windowed {
		argv := []string{o.EddyBin, "windowed", "--brokers", proxyAddr, "--state-dir", filepath.Join(o.WorkDir, "windowed-1"),
			"--partitions", strconv.Itoa(o.Partitions), "--late-topic", lateTopic}
		a, err := newApp("windowed-1", "windowed", argv, o.WorkDir)
		if err != nil {
			return err
		}
		h.apps = append(h.apps, a)
	}
	for _, topic := range h.outputTopics() {
		if err := waitTopic(ctx, h.clOpts, topic); err != nil {
			return err
		}
	}
	h.out = newWatcher(h.clOpts, outputTopic)
	if o.Windowed {
		h.totals = newWatcher(h.clOpts, totalsTopic)
	}
	h.gen = &demo.Generator{ClientOpts: h.clOpts, Topic: inputTopic, Rate: o.Rate, Accounts: o.Accounts,
		InvalidEvery: 1000, Seed: o.Seed}
	if o.Windowed {
		w, g := windowed.DefaultWindow.Milliseconds(), windowed.DefaultGrace.Milliseconds()
		h.gen.Events = &demo.EventTime{Start: time.Now().UnixMilli(), Step: eventSpeed * 1000 / float64(o.Rate),
			OutOfOrder: 0.1, Disorder: g, Late: 0.005, LateBy: w + g + 1000}
	}
	return nil
}

func (h *harness) outputTopics() []string {
	t := []string{outputTopic}
	if h.opts.Windowed {
		t = append(t, totalsTopic)
	}
	return t
}

// run generates payments for Duration while it injects one fault at a
// time: inject, end it, wait until the pipeline works again (recovery),
// pause, next.
func (h *harness) run(ctx context.Context) error {
	genCtx, stopGen := context.WithCancel(ctx)
	defer stopGen()
	genDone := make(chan error, 1)
	go func() { genDone <- h.gen.Run(genCtx) }()
	h.start = time.Now()
	progress := make(chan struct{})
	defer close(progress)
	go h.progress(progress)

	// Let the apps start and process before the first fault.
	if err := h.supervise(ctx, 5*time.Second); err != nil {
		return err
	}
	// Kinds are dealt from a shuffled deck, so that every kind comes once
	// before any comes twice; the run goes on past Duration until the
	// first deck is dealt, so a short run still injects every kind.
	var deck []string
	dealt := 0
	for time.Since(h.start) < h.opts.Duration || dealt < len(h.opts.Kinds) {
		if len(deck) == 0 {
			deck = slices.Clone(h.opts.Kinds)
			h.rng.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
		}
		kind := deck[0]
		deck, dealt = deck[1:], dealt+1
		h.current = kind
		ev, err := h.inject(ctx, kind)
		if err != nil {
			return fmt.Errorf("chaos: injecting %s: %w", kind, err)
		}
		if err := h.recover(ctx, &ev); err != nil {
			return err
		}
		h.rep.add(ev)
		h.shownFaults.Store(int64(h.rep.faultCount()))
		h.shownRecovery.Store(int64(h.rep.LongestRecovery))
		fmt.Fprintf(h.opts.Out, "%6.0fs  fault %-14s %-40s recovered in %s\n", time.Since(h.start).Seconds(), ev.Kind, ev.Detail, ev.recoveryString())
		h.current = ""
		if err := h.supervise(ctx, time.Duration(1000+h.rng.IntN(2000))*time.Millisecond); err != nil {
			return err
		}
	}
	stopGen()
	if err := <-genDone; err != nil {
		return err
	}
	h.rep.LongestOutage = h.out.longestGap()
	return nil
}

// supervise restarts apps that exit on their own, for d. An app may exit
// on a fault (a disk error makes Pebble fail, an unexpected broker answer
// may be fatal); that is counted, not hidden, and it is restarted as an
// operator's supervisor would.
func (h *harness) supervise(ctx context.Context, d time.Duration) error {
	end := time.Now().Add(d)
	for {
		for _, a := range h.apps {
			if a.stopped || !a.exited() {
				continue
			}
			a.exits++
			cause := h.current
			if cause == "" {
				cause = "none"
			}
			h.rep.AppExits[cause]++
			fmt.Fprintf(h.opts.Out, "%6.0fs  %s exited on its own (%v) during fault %q; restarting (log %s)\n",
				time.Since(h.start).Seconds(), a.name, a.child.Err(), cause, a.logPath)
			fmt.Fprintf(a.log, "=== chaos: exited on its own (%v); restarting\n", a.child.Err())
			if err := a.start(); err != nil {
				return err
			}
		}
		if h.broker.child != nil {
			select {
			case <-h.broker.child.Done():
				return fmt.Errorf("chaos: the broker exited on its own: %v (see %s)", h.broker.child.Err(), h.broker.log.Name())
			default:
			}
		}
		if !time.Now().Before(end) {
			return nil
		}
		if err := sleepCtx(ctx, min(200*time.Millisecond, time.Until(end))); err != nil {
			return err
		}
	}
}

// recover waits until the pipeline works again after a fault: every app
// (the ledger's group and the windowed app's) has committed offsets past
// every payment written before the fault ended, and every balances
// partition holds a record written after it. Each app's own time is kept:
// an app's output alone does not show that it works (the windowed app
// writes only when windows close, and a partition's output may come from a
// transaction that committed just before the other app stalled).
func (h *harness) recover(ctx context.Context, ev *Event) error {
	deadline := ev.End.Add(recoveryCap)
	// The records written after the fault ended are those past the high
	// watermarks of its end; a transaction committed just before the end
	// and fetched after it does not count.
	ends, err := h.endOffsets(ctx, outputTopic)
	if err != nil {
		return err
	}
	inputs, err := h.endOffsets(ctx, inputTopic)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(h.clOpts...)
	if err != nil {
		return fmt.Errorf("chaos: client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ev.AppRecovery = map[string]time.Duration{}
	for {
		for _, g := range h.groups() {
			if _, ok := ev.AppRecovery[g]; !ok && committedPast(ctx, adm, g, inputs) {
				ev.AppRecovery[g] = time.Since(ev.End)
			}
		}
		if len(ev.AppRecovery) == len(h.groups()) && h.out.allPast(ends) {
			ev.Recovery = time.Since(ev.End)
			return nil
		}
		if time.Now().After(deadline) {
			ev.Unrecovered = true
			return nil
		}
		if err := h.supervise(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// groups are the apps' consumer groups (their app ids).
func (h *harness) groups() []string {
	if h.totals != nil {
		return []string{"ledger", "windowed"}
	}
	return []string{"ledger"}
}

// committedPast reports whether group has committed, on every partition of
// ends, an offset at or past it: it processed every record written before.
// An error (the coordinator moving, a transaction's offsets not yet stable)
// reads as not yet.
func committedPast(ctx context.Context, adm *kadm.Client, group string, ends map[int32]int64) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	offsets, err := adm.FetchOffsets(ctx, group)
	if err != nil || offsets.Error() != nil {
		return false
	}
	for p, end := range ends {
		o, ok := offsets.Lookup(inputTopic, p)
		if !ok || o.Err != nil || o.At < end {
			return false
		}
	}
	return true
}

// endOffsets returns the high watermark of each partition of topic.
func (h *harness) endOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	cl, err := kgo.NewClient(h.clOpts...)
	if err != nil {
		return nil, fmt.Errorf("chaos: client: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			out := map[int32]int64{}
			ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
			return out, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("chaos: high watermarks of %s: %w", topic, err)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

func (h *harness) progress(done chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			line := fmt.Sprintf("%6.0fs  payments %8d  balances %8d", now.Sub(h.start).Seconds(), h.gen.Produced(), h.out.count())
			if h.totals != nil {
				line += fmt.Sprintf("  totals %6d", h.totals.count())
			}
			fmt.Fprintf(h.opts.Out, "%s  faults %d  longest recovery %.1fs\n", line, h.shownFaults.Load(), time.Duration(h.shownRecovery.Load()).Seconds())
		}
	}
}

// finish lets the apps catch up, stops them cleanly and verifies.
func (h *harness) finish(ctx context.Context) error {
	o := h.opts
	if o.Windowed {
		if err := h.gen.Close(ctx, (windowed.DefaultWindow + windowed.DefaultGrace).Milliseconds()); err != nil {
			return err
		}
	}
	payments, err := verify.ReadAll(ctx, nil, inputTopic, h.clOpts...)
	if err != nil {
		return err
	}
	wantBalances := int64(0)
	for _, r := range payments {
		if validPayment(r.Value) {
			wantBalances++
		}
	}
	var wantTotals int64
	if o.Windowed {
		wantTotals = int64(verify.Windowed(payments, windowed.DefaultWindow, windowed.DefaultGrace).ExpectedWindows())
	}
	fmt.Fprintf(o.Out, "chaos: generation over (%d payments); waiting for the apps to catch up (%d balances, %d totals)\n",
		len(payments), wantBalances, wantTotals)
	h.current = "catch-up"
	lastN, lastMove := int64(-1), time.Now()
	for {
		n := h.out.count()
		var t int64
		if h.totals != nil {
			t = h.totals.count()
		}
		if n+t != lastN {
			lastN, lastMove = n+t, time.Now()
		}
		if n >= wantBalances && t >= wantTotals {
			break
		}
		if time.Since(lastMove) > 3*time.Minute {
			fmt.Fprintf(o.Out, "chaos: no progress for 3 minutes (%d/%d balances, %d/%d totals); verifying what is there\n", n, wantBalances, t, wantTotals)
			h.rep.Stalled = true
			break
		}
		if err := h.supervise(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	// Settle, so that a late duplicate has the time to show.
	if err := h.supervise(ctx, 3*time.Second); err != nil {
		return err
	}
	for _, a := range h.apps {
		if err := a.child.Stop(30 * time.Second); err != nil {
			h.rep.UncleanStops = append(h.rep.UncleanStops, fmt.Sprintf("%s: %v", a.name, err))
		}
	}
	h.rep.ProduceFailures = int(h.gen.Failed())
	h.rep.Invalid = int(h.gen.Invalid())
	return h.verify(ctx)
}

func (h *harness) close() {
	for _, a := range h.apps {
		if a.child != nil {
			if a.stopped {
				_ = a.child.Signal(syscall.SIGCONT)
			}
			a.child.Kill()
		}
		a.log.Close()
	}
	if h.out != nil {
		h.out.close()
	}
	if h.totals != nil {
		h.totals.close()
	}
	if h.broker != nil && h.broker.child != nil {
		_ = h.broker.child.Stop(30 * time.Second)
		h.broker.log.Close()
	}
	if h.proxy != nil {
		h.proxy.Close()
	}
}

// waitTopic waits until topic exists (the apps create their topics).
func waitTopic(ctx context.Context, opts []kgo.Opt, topic string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		recs, err := verify.ReadAll(ctx, nil, topic, opts...)
		_ = recs
		if err == nil {
			return nil
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("chaos: topic %s was not created within 2 minutes: %w", topic, err)
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}
