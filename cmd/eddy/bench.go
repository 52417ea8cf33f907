package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/eddy-streams/eddy"
	windowed "github.com/eddy-streams/eddy/examples/windowed/pipeline"
	"github.com/eddy-streams/eddy/internal/harness/bench"
	"github.com/eddy-streams/eddy/internal/harness/versitygw"
)

const benchUsage = `usage: eddy bench ledger|windowed|window-state|restore|failover|nexmark|state-memory|repartition [flags]

  ledger        the ledger exactly-once vs at-least-once vs the broker's raw rate
  windowed      the same for the windowed totals (examples/windowed)
  window-state  the windowed example's store size over a run of many retentions
  restore       the ledger's resume with 1M accounts of state: from the changelog,
                from a remote checkpoint (directory, S3) + tail, from local state
  failover      time from SIGKILL of a ledger instance to its tasks' first committed
                output elsewhere, with and without standbys
  nexmark       the Nexmark queries (q0–q22): events per CPU-second,
                peak RSS, state size, and whether the output matched the reference
  state-memory  the ledger's RSS, in a process of its own, while its state grows to
                10× its state memory budget (it re-executes eddy with
                ` + bench.StateMemoryChildEnv + ` set to run the ledger)
  repartition   an app's repartition topic size over a steady run (5 minutes),
                with eddy's purge of consumed repartition records and without

Run 'eddy bench <name> -h' for the flags.`

// runBench runs a benchmark.
func runBench(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New(benchUsage)
	}
	switch args[0] {
	case "ledger", "windowed":
		return runThroughput(ctx, args[0], args[1:])
	case "window-state":
		return runWindowState(ctx, args[1:])
	case "restore":
		return runRestore(ctx, args[1:])
	case "failover":
		return runFailover(ctx, args[1:])
	case "nexmark":
		return runNexmark(ctx, args[1:])
	case "state-memory":
		return runStateMemory(ctx, args[1:])
	case "repartition":
		return runRepartition(ctx, args[1:])
	}
	return fmt.Errorf("unknown benchmark %q\n%s", args[0], benchUsage)
}

// runThroughput is `eddy bench ledger` and `eddy bench windowed`: the same
// three runs on the same kind of input, for either example.
func runThroughput(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("eddy bench "+name, flag.ContinueOnError)
	records := fs.Int("records", 1_000_000, "payments to process")
	rounds := fs.Int("rounds", 3, "repetitions of each run; the summary is the median")
	partitions := fs.Int("partitions", 4, "partitions of the payments topic")
	accounts := fs.Int("accounts", 10_000, "distinct accounts")
	commitInterval := fs.Duration("commit-interval", 0, "commit interval of the app (default: eddy's, 100ms)")
	workers := fs.Int("workers", 0, "workers of the app (default 1)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the exactly-once run to this file")
	stateMemory := fs.Int64("state-memory", 0, "the app's state memory budget in bytes (Config.StateMemory; default: a quarter of the memory available)")
	stateReport := fs.Bool("state-report", false, "print the state's figures (caches, LSM shape, peak RSS) after each app run")
	var window, grace *time.Duration
	var perWindow *int
	if name == "windowed" {
		window = fs.Duration("window", windowed.DefaultWindow, "window size")
		grace = fs.Duration("grace", windowed.DefaultGrace, "grace period")
		perWindow = fs.Int("per-window", 10, "mean payments per account and window (sets the event-time span)")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *records < 1 || *partitions < 1 || *accounts < 1 || *rounds < 1 {
		return errors.New("--records, --rounds, --partitions and --accounts must be at least 1")
	}
	opts := bench.LedgerOptions{
		Records: *records, Rounds: *rounds, Partitions: *partitions, Accounts: *accounts, CPUProfile: *cpuprofile, Out: os.Stderr,
		CommitInterval: *commitInterval, Workers: *workers, StateMemory: *stateMemory, StateReport: *stateReport,
	}
	var results []bench.Result
	var err error
	if name == "windowed" {
		if *window < time.Millisecond || *window%time.Millisecond != 0 || *grace < 0 || *grace%time.Millisecond != 0 || *perWindow < 1 {
			return errors.New("--window must be a whole number of milliseconds ≥ 1ms, --grace zero or whole milliseconds, --per-window at least 1")
		}
		results, err = bench.Windowed(ctx, bench.WindowedOptions{LedgerOptions: opts, Window: *window, Grace: *grace, PerWindow: *perWindow})
	} else {
		results, err = bench.Ledger(ctx, opts)
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	ceiling := bench.Median(results, "ceiling")
	alos := bench.Median(results, "at-least-once")
	eos := bench.Median(results, "exactly-once")
	fmt.Fprintf(os.Stderr, "medians over %d rounds: ceiling %.0f, at-least-once %.0f, exactly-once %.0f records/s\n", *rounds, ceiling, alos, eos)
	fmt.Fprintf(os.Stderr, "exactly-once / at-least-once = %.2f, exactly-once / ceiling = %.2f\n", eos/alos, eos/ceiling)
	return nil
}

// runWindowState is `eddy bench window-state`: the windowed example's
// store, sampled once per retention of stream time over a long run.
func runWindowState(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eddy bench window-state", flag.ContinueOnError)
	records := fs.Int("records", 6_000_000, "payments to process")
	accounts := fs.Int("accounts", 1000, "distinct accounts")
	partitions := fs.Int("partitions", 4, "partitions of the payments topic")
	window := fs.Duration("window", time.Second, "window size")
	grace := fs.Duration("grace", 500*time.Millisecond, "grace period")
	retentions := fs.Int("retentions", 120, "retentions (window + grace) of event time that the input spans")
	every := fs.Int("every", 6, "print every n-th sample (one per retention), and the last")
	memtable := fs.Uint64("memtable", 1<<20, "Pebble memtable size in bytes per task (0: eddy's default, 16 MiB); small, so the run spans many flushes and compactions")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var errs []error
	if *records < 1 || *accounts < 1 || *partitions < 1 {
		errs = append(errs, errors.New("--records, --accounts and --partitions must be at least 1"))
	}
	if *window < time.Millisecond || *window%time.Millisecond != 0 {
		errs = append(errs, fmt.Errorf("--window %v: pass a whole number of milliseconds, at least 1ms", *window))
	}
	if *grace < 0 || *grace%time.Millisecond != 0 {
		errs = append(errs, fmt.Errorf("--grace %v: pass zero or a whole number of milliseconds", *grace))
	}
	if *retentions < 10 {
		errs = append(errs, fmt.Errorf("--retentions %d: pass at least 10, the point is a run over many retentions", *retentions))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	res, err := bench.WindowState(ctx, bench.WindowStateOptions{
		Records: *records, Accounts: *accounts, Partitions: *partitions,
		Window: *window, Grace: *grace, Retentions: *retentions, MemTableSize: *memtable, Out: os.Stderr,
	})
	if err != nil {
		return err
	}
	fmt.Printf("%10s  %10s  %9s  %12s  %10s  %10s  %10s  %6s\n", "retentions", "processed", "live keys", "live windows", "disk bytes", "sstables", "WAL", "tables")
	for i, s := range res.Samples {
		if s.Retentions%max(*every, 1) != 0 && i != len(res.Samples)-1 {
			continue
		}
		fmt.Printf("%10d  %10d  %9d  %12d  %10d  %10d  %10d  %6d\n", s.Retentions, s.Processed, s.Keys, s.Windows, s.DiskBytes, s.TableBytes, s.WALBytes, s.Tables)
	}
	fmt.Printf("%d distinct (account, window) pairs in the input: what the store would hold without expiry; %.1f s\n", res.InputWindows, res.Seconds)
	return nil
}

// runRestore is `eddy bench restore`.
func runRestore(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eddy bench restore", flag.ContinueOnError)
	keys := fs.Int("keys", 1_000_000, "distinct accounts: the keys of state")
	tail := fs.Int("tail", 10_000, "payments processed after the checkpoint, which a restore from it replays from the changelog")
	partitions := fs.Int("partitions", 4, "partitions of the payments topic (tasks)")
	rounds := fs.Int("rounds", 3, "repetitions of each resume; the summary is the median")
	s3 := fs.Bool("s3", true, "measure an S3 store too: a local versitygw ("+versitygw.InstallCommand+")")
	dir := fs.String("dir", "", "directory for the state and the stores (default: a temporary one, removed)")
	details := fs.Bool("details", false, "print each task's restore (download, open, replay) as the app logs it")
	steady := fs.Int("steady", 200_000, "payments processed at the end with periodic checkpoints, to measure what each uploads (0: skip)")
	every := fs.Duration("checkpoint-every", 2*time.Second, "the checkpoint interval of that last phase")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *keys < 1 || *partitions < 1 || *rounds < 1 || *tail < 0 || *steady < 0 || *every <= 0 {
		return errors.New("--keys, --partitions and --rounds must be at least 1, --tail and --steady at least 0, --checkpoint-every positive")
	}
	if *s3 {
		if _, err := versitygw.Binary(); err != nil {
			return fmt.Errorf("%w; or pass --s3=false", err)
		}
	}
	results, err := bench.Restore(ctx, bench.RestoreOptions{
		Keys: *keys, Tail: *tail, Partitions: *partitions, Rounds: *rounds, S3: *s3, Dir: *dir, Details: *details, Steady: *steady, CheckpointEvery: *every, Out: os.Stderr,
	})
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	full, fullRestore := bench.MedianRestore(results, "changelog")
	fmt.Fprintf(os.Stderr, "medians over %d rounds (resume = start to first commit of new input; restore = assignment to every task restored and open):\n", *rounds)
	for _, name := range []string{"changelog", "checkpoint-dir", "checkpoint-s3", "local"} {
		secs, restore := bench.MedianRestore(results, name)
		if secs == 0 {
			continue
		}
		fmt.Fprintf(os.Stderr, "  %-15s resume %6.2fs (%5.1f× faster than the changelog)  restore %6.2fs (%5.1f×)\n",
			name, secs, full/secs, restore, fullRestore/max(restore, 1e-9))
	}
	return nil
}

// runStateMemory is `eddy bench state-memory`, and its child process when
// bench.StateMemoryChildEnv is set.
func runStateMemory(ctx context.Context, args []string) error {
	if config := os.Getenv(bench.StateMemoryChildEnv); config != "" {
		return bench.StateMemoryChild(ctx, config)
	}
	fs := flag.NewFlagSet("eddy bench state-memory", flag.ContinueOnError)
	budget := fs.Int64("state-memory", 64<<20, "the ledger's state memory budget in bytes (Config.StateMemory)")
	keys := fs.Int("keys", 0, "distinct accounts; payment i goes to account i while i < keys, then to a random one "+
		"(default: 12× the budget at 140 bytes an account, about what one costs in the write buffers)")
	records := fs.Int("records", 0, "payments (default: --keys, so that the state grows for the whole run)")
	partitions := fs.Int("partitions", 4, "partitions of the payments topic (the ledger's tasks)")
	sample := fs.Duration("sample", time.Second, "interval between samples")
	heapProfile := fs.String("heap-profile", "", "write a heap profile of the ledger's process at the end of the run to this file")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: eddy bench state-memory [flags]

Runs the embedded broker in this process and the ledger, alone, in a child
process (this binary re-executed with `+bench.StateMemoryChildEnv+` set), and
produces payments to ever-new accounts in batches at the ledger's pace. Every
--sample it prints a row (stderr) and a JSON line (stdout): payments committed,
accounts in the state, the state on disk, the write buffers', block cache's and
memtables' use and the Go heap (the child's /metrics), and the child's RSS and
peak RSS (/proc). The last JSON line is the summary.

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *budget < eddy.MinStateMemory {
		return fmt.Errorf("--state-memory %d: must be at least %d (16 MiB)", *budget, eddy.MinStateMemory)
	}
	if *keys == 0 {
		*keys = int(12 * *budget / 140)
	}
	if *records == 0 {
		*records = *keys
	}
	if *keys < 1 || *records < 1 || *partitions < 1 || *sample <= 0 {
		return errors.New("--keys, --records and --partitions must be at least 1, --sample positive")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	res, err := bench.StateMemory(ctx, bench.StateMemoryOptions{
		StateMemory: *budget, Keys: *keys, Records: *records, Partitions: *partitions, Sample: *sample,
		Child: []string{self, "bench", "state-memory"}, HeapProfile: *heapProfile, Out: os.Stderr, JSON: os.Stdout,
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, res.Summary())
	return nil
}
