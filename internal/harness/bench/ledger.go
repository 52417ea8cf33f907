// Package bench measures eddy against the same data in the same process:
// the ledger and the windowed totals exactly-once, at-least-once, and the
// embedded broker's raw consume+produce rate on that data as the ceiling;
// and the size of a window store over a long run.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/ledger/pipeline"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/state"
)

// LedgerOptions configure the ledger benchmark.
type LedgerOptions struct {
	Records    int
	Partitions int
	Accounts   int
	// Rounds is how many times each of the three runs is repeated.
	Rounds int
	// CommitInterval, CommitRecords and Workers are passed to the app
	// (0 = defaults).
	CommitInterval time.Duration
	CommitRecords  int
	Workers        int
	// StateMemory is the app's Config.StateMemory (0 = its default).
	StateMemory int64
	// CPUProfile, when set, receives a CPU profile of the exactly-once run.
	CPUProfile string
	// StateReport, when set, receives a line of the state's figures
	// (caches, LSM shape, peak RSS) at the end of each app run.
	StateReport bool
	Out         io.Writer
}

// Result is one measured run.
type Result struct {
	Name          string  `json:"name"`
	Round         int     `json:"round"`
	Records       int     `json:"records"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_second"`
	CPUSeconds    float64 `json:"cpu_seconds"`
}

const inputTopic = "payments"

// workload is what a benchmark feeds and runs: its input, written before
// each run, and the topology under test, writing to output.
type workload struct {
	produce  func(ctx context.Context, cl *kgo.Client) error
	topology func(output string) *eddy.Topology
	// backend, when set, stores the app's state instead of eddy's
	// default Pebble backend (the state-size measurement wraps it).
	backend state.Backend
}

// Ledger runs the three measurements, each on a fresh in-memory broker
// loaded with the same payments (the same seed), so that no run inherits
// the heap and log growth of the runs before it.
func Ledger(ctx context.Context, opts LedgerOptions) ([]Result, error) {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	fmt.Fprintf(out, "each run: %d payments over %d accounts in %d partitions, on a fresh embedded broker\n", opts.Records, opts.Accounts, opts.Partitions)
	return compare(ctx, opts, workload{
		produce: func(ctx context.Context, cl *kgo.Client) error {
			return producePayments(ctx, cl, opts.Records, opts.Accounts, nil)
		},
		topology: func(output string) *eddy.Topology { return pipeline.Topology(inputTopic, output) },
	})
}

// compare measures w three ways, opts.Rounds times: the ceiling, at least
// once and exactly once.
func compare(ctx context.Context, opts LedgerOptions, w workload) ([]Result, error) {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	// Rounds alternate the order of the three runs; the summary takes each
	// one's median.
	var results []Result
	for round := 1; round <= opts.Rounds; round++ {
		runs := []func(seeds []string) (Result, error){
			func(seeds []string) (Result, error) {
				return measure("ceiling", opts.Records, func() error {
					return copyTopic(ctx, seeds, inputTopic, "ceiling-out", opts.Records)
				})
			},
			func(seeds []string) (Result, error) {
				return runApp(ctx, seeds, eddy.AtLeastOnce, w, opts, round, "")
			},
			func(seeds []string) (Result, error) {
				return runApp(ctx, seeds, eddy.ExactlyOnce, w, opts, round, opts.CPUProfile)
			},
		}
		if round%2 == 0 {
			runs[0], runs[2] = runs[2], runs[0]
		}
		for _, run := range runs {
			r, err := withLoadedBroker(ctx, opts, w, run)
			if err != nil {
				return nil, err
			}
			r.Round = round
			results = append(results, r)
			fmt.Fprintf(out, "round %d  %-24s %9.0f records/s  (%.2f CPU-s)\n", round, r.Name, r.RecordsPerSec, r.CPUSeconds)
		}
	}
	return results, nil
}

// withLoadedBroker starts a broker, writes w's input, runs fn against it
// and stops it.
func withLoadedBroker(ctx context.Context, opts LedgerOptions, w workload, fn func(seeds []string) (Result, error)) (Result, error) {
	broker, cl, err := startBroker(opts.Partitions)
	if err != nil {
		return Result{}, err
	}
	defer broker.Close()
	defer cl.Close()
	seeds := []string{broker.Addr()}
	if err := kafka.CreateTopics(ctx, cl, kafka.TopicSpec{Name: inputTopic, Partitions: int32(opts.Partitions)}); err != nil {
		return Result{}, err
	}
	if err := w.produce(ctx, cl); err != nil {
		return Result{}, err
	}
	runtime.GC()
	return fn(seeds)
}

// startBroker starts an in-memory broker and a client of it that
// produces to the input topic. Close both.
func startBroker(partitions int) (*kafka.Broker, *kgo.Client, error) {
	broker, err := kafka.StartBroker(kafka.BrokerConfig{Addr: "127.0.0.1:0", DefaultPartitions: int32(partitions)})
	if err != nil {
		return nil, nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr()), kgo.DefaultProduceTopic(inputTopic), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		broker.Close()
		return nil, nil, err
	}
	return broker, cl, nil
}

// committedInput sums the offsets group appID has committed on the input
// topic: the records it has processed.
func committedInput(ctx context.Context, adm *kadm.Client, appID string) (int64, error) {
	offs, err := adm.FetchOffsets(ctx, appID)
	if err != nil {
		return 0, err
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == inputTopic && o.Err == nil {
			sum += o.At
		}
	})
	return sum, nil
}

// producePayments writes n payments over accounts accounts. With stamp
// nil their record timestamps are the producer's clock; otherwise stamp
// gives payment i its event time (its "ts" and record timestamp), drawing
// from rng after the payment's own draws.
func producePayments(ctx context.Context, cl *kgo.Client, n, accounts int, stamp func(i int, account string, rng *rand.Rand) int64) error {
	rng := rand.New(rand.NewPCG(1, 2))
	errc := make(chan error, 1)
	for i := 0; i < n; i++ {
		account := fmt.Sprintf("acct-%05d", rng.IntN(accounts))
		p := pipeline.Payment{ID: fmt.Sprintf("p%d", i), Account: account, Amount: rng.Int64N(1501) - 500}
		r := &kgo.Record{Key: []byte(account)}
		if stamp != nil {
			p.TS = stamp(i, account, rng)
			r.Timestamp = time.UnixMilli(p.TS)
		}
		r.Value, _ = json.Marshal(p)
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return fmt.Errorf("bench: produce payments: %w", err)
	default:
		return nil
	}
}

// measure times fn and the process CPU it used.
func measure(name string, records int, fn func() error) (Result, error) {
	cpu0 := cpuSeconds()
	start := time.Now()
	if err := fn(); err != nil {
		return Result{}, fmt.Errorf("bench: %s: %w", name, err)
	}
	secs := time.Since(start).Seconds()
	return Result{Name: name, Records: records, Seconds: secs, RecordsPerSec: float64(records) / secs, CPUSeconds: cpuSeconds() - cpu0}, nil
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// copyTopic is the ceiling: read every record of from (read_committed) and
// produce it unchanged to to, with an idempotent producer, no processing and
// no transactions.
func copyTopic(ctx context.Context, seeds []string, from, to string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(from),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DefaultProduceTopic(to), kgo.AllowAutoTopicCreation(),
		// The same producer settings as eddy's, so the ceiling is comparable.
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return err
	}
	defer cl.Close()
	var failed error
	promise := func(_ *kgo.Record, err error) {
		if err != nil && failed == nil {
			failed = err
		}
	}
	for seen := 0; seen < n; {
		f := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		f.EachRecord(func(r *kgo.Record) {
			seen++
			cl.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, promise)
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return failed
}

// runApp runs w's topology until its group has committed every input
// offset. The clock starts at the group's first commit, so the group join
// and topic creation are not counted; the records are those committed
// after it.
func runApp(ctx context.Context, seeds []string, g eddy.Guarantee, w workload, opts LedgerOptions, round int, profile string) (Result, error) {
	n := opts.Records
	appID := fmt.Sprintf("bench-%s-%d", g, round)
	dir, err := os.MkdirTemp("", "eddy-bench-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	output := "out-" + appID
	admCl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return Result{}, err
	}
	defer admCl.Close()
	// Before the app starts: it checks that its outputs exist.
	if err := kafka.CreateTopics(ctx, admCl, kafka.TopicSpec{Name: output, Partitions: 4}); err != nil {
		return Result{}, err
	}
	app, err := eddy.New(w.topology(output), eddy.Config{
		AppID: appID, Brokers: seeds, StateDir: dir, Guarantee: g,
		CommitInterval: opts.CommitInterval, CommitRecords: opts.CommitRecords, Workers: opts.Workers, Backend: w.backend,
		StateMemory: opts.StateMemory,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return Result{}, err
	}
	go func() { done <- app.Run(runCtx) }()
	adm := kadm.NewClient(admCl)
	committed := func() (int64, error) { return committedInput(ctx, adm, appID) }
	var first int64
	var start time.Time
	var cpu0 float64
	for {
		select {
		case err := <-done:
			return Result{}, fmt.Errorf("bench: app %s stopped: %w", g, err)
		case <-time.After(20 * time.Millisecond):
		}
		c, err := committed()
		if err != nil {
			continue
		}
		if start.IsZero() && c > 0 {
			first, start, cpu0 = c, time.Now(), cpuSeconds()
			if profile != "" && round == 1 {
				f, err := os.Create(profile)
				if err != nil {
					return Result{}, err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return Result{}, err
				}
				defer pprof.StopCPUProfile()
			}
		}
		if c >= int64(n) {
			secs := time.Since(start).Seconds()
			cpu := cpuSeconds() - cpu0
			if opts.StateReport && opts.Out != nil {
				fmt.Fprintf(opts.Out, "  %s state: %s\n", g, stateReport(app.Registry()))
			}
			cancel()
			if err := <-done; err != nil {
				return Result{}, fmt.Errorf("bench: app %s: %w", g, err)
			}
			recs := int(int64(n) - first)
			return Result{Name: g.String(), Records: recs, Seconds: secs, RecordsPerSec: float64(recs) / secs, CPUSeconds: cpu}, nil
		}
	}
}

// Median returns the median records/s of the results named name.
func Median(results []Result, name string) float64 {
	var v []float64
	for _, r := range results {
		if r.Name == name {
			v = append(v, r.RecordsPerSec)
		}
	}
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
