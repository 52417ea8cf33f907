package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/eddy-streams/eddy/internal/harness/bench"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/nexmark/queries"
)

// runNexmark is `eddy bench nexmark`: one Nexmark query, or several, each in
// a process of its own (re-running this binary with one --query), so that
// every query's CPU time and peak RSS are its own.
func runNexmark(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eddy bench nexmark", flag.ContinueOnError)
	query := fs.String("query", "all", "the query to run: "+strings.Join(queryNames(), ", ")+", a comma-separated list, all, or generator (the generator alone: the ceiling)")
	events := fs.Int64("events", 10_000_000, "events to generate and process")
	source := fs.String("source", "generator", "where events come from: generator (in-process, replayed by index) or kafka")
	seed := fs.Uint64("seed", 0, "the generator's seed")
	eventRate := fs.Float64("event-rate", 0, "events per second of event time (default the suite's 10000000); lower spreads events, and state, over more windows")
	commitInterval := fs.Duration("commit-interval", time.Second, "time between commits")
	workers := fs.Int("workers", 1, "generator source: worker goroutines, and partitions per topic (each worker generates every N-th event and owns a partition's tasks, as on Kafka)")
	stateDir := fs.String("state-dir", "", "directory for the state (default: a temporary directory, removed after)")
	stateMemory := fs.Int64("state-memory", 0, "state memory budget in bytes, split as an app splits Config.StateMemory (default eddy's: a quarter of the memory available)")
	cacheSize := fs.Int64("cache-size", 0, "Pebble block cache in bytes (default: half of --state-memory)")
	memtableSize := fs.Uint64("memtable-size", 0, "Pebble memtable size in bytes (default eddy's: a 32nd of the cache, 1-16 MiB)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file (one query only); the result's cpu_share says where the time went")
	profileDir := fs.String("profile-dir", "", "write a CPU profile of each query's run to DIR/<query>.pprof; each result's cpu_share says where the time went")
	results := fs.String("results", "", "write each query's final result rows to DIR/<query>.jsonl (a JSON object per row, columns named as in the suite's SQL; an updating result's last rows); writing adds to the measured run")
	tableCache := fs.Int64("table-cache-bytes", 0, "the table cache in bytes (Config.TableCacheBytes; default eddy's, 10 MiB; negative: off, every table update forwarded)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *events < 1 {
		return errors.New("--events must be at least 1")
	}
	if *eventRate < 0 {
		return fmt.Errorf("--event-rate %v: want a positive rate, or 0 for the default", *eventRate)
	}
	if *commitInterval <= 0 {
		return errors.New("--commit-interval must be positive, e.g. 1s")
	}
	if *source != "generator" && *source != "kafka" {
		return fmt.Errorf("--source %q: want generator or kafka", *source)
	}
	if *workers < 1 {
		return fmt.Errorf("--workers %d: want at least 1", *workers)
	}
	if *workers > 1 && *source == "kafka" {
		return errors.New("--workers is for --source generator; with --source kafka, the app's parallelism is its topics' partitions")
	}
	if *workers > 1 && *query == "generator" {
		return errors.New("--workers is for the queries; --query generator measures the generator alone, on one goroutine")
	}
	if *query == "generator" {
		res, err := bench.NexmarkGenerator(bench.NexmarkOptions{Events: *events, Seed: *seed, EventRate: *eventRate})
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	var qs []queries.Query
	names := strings.Split(*query, ",")
	if *query == "all" {
		names = queryNames()
	}
	for _, name := range names {
		q, ok := queries.Lookup(strings.TrimSpace(name))
		if !ok {
			return fmt.Errorf("--query %q: no such query; want one of %s, or all", name, strings.Join(queryNames(), ", "))
		}
		qs = append(qs, q)
	}
	if len(qs) > 1 {
		if *cpuprofile != "" {
			return errors.New("--cpuprofile profiles one query: pass a single --query")
		}
		return runNexmarkEach(ctx, qs, args)
	}
	if *profileDir != "" {
		if *cpuprofile != "" {
			return errors.New("--cpuprofile and --profile-dir: pass one")
		}
		if err := os.MkdirAll(*profileDir, 0o755); err != nil {
			return fmt.Errorf("--profile-dir: %w", err)
		}
		*cpuprofile = filepath.Join(*profileDir, qs[0].Name+".pprof")
	}
	opts := bench.NexmarkOptions{
		Query: qs[0], Events: *events, Seed: *seed, EventRate: *eventRate, CommitInterval: *commitInterval, Workers: *workers, Dir: *stateDir,
		StateMemory: *stateMemory, CacheSize: *cacheSize, MemTableSize: *memtableSize, TableCacheBytes: *tableCache, Progress: os.Stderr, CPUProfile: *cpuprofile,
		Results: *results,
	}
	var res bench.NexmarkResult
	var err error
	if *source == "kafka" {
		self, serr := os.Executable()
		if serr != nil {
			return serr
		}
		res, err = bench.NexmarkKafka(ctx, opts, self)
	} else {
		res, err = bench.Nexmark(ctx, opts)
	}
	if err != nil {
		return err
	}
	if *cpuprofile != "" {
		if res.CPUShare, err = bench.CPUShares(*cpuprofile); err != nil {
			return err
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return err
	}
	if !res.Verified {
		return fmt.Errorf("%s: the output does not match the reference: %s", res.Query, res.VerifyError)
	}
	return nil
}

// runNexmarkEach runs each query in a child process with the same flags,
// passing its JSON line through, and fails if any query failed.
func runNexmarkEach(ctx context.Context, qs []queries.Query, args []string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var rest []string // args without --query
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--query" || a == "-query" {
			i++
			continue
		}
		if strings.HasPrefix(a, "--query=") || strings.HasPrefix(a, "-query=") {
			continue
		}
		rest = append(rest, a)
	}
	var failed []string
	for _, q := range qs {
		cmd := exec.CommandContext(ctx, self, append([]string{"bench", "nexmark", "--query", q.Name}, rest...)...)
		cmd.Stderr = os.Stderr
		// An interrupted run interrupts the child, which then removes its
		// temporary state and stops its broker, rather than killing it.
		cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
		cmd.WaitDelay = 30 * time.Second
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			fmt.Println(lines.Text())
		}
		if err := cmd.Wait(); err != nil {
			failed = append(failed, q.Name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("nexmark: %s failed (see above)", strings.Join(failed, ", "))
	}
	return nil
}

// runNexmarkCommand is `eddy nexmark`: tools around the Nexmark model.
func runNexmarkCommand(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "generate" {
		return errors.New("usage: eddy nexmark generate --events N --format jsonl|csv --out DIR [--seed S] [--event-rate R]")
	}
	return runNexmarkGenerate(args[1:])
}

// runNexmarkGenerate is `eddy nexmark generate`: the events of a run, as
// files another engine can load (nexmark.Generator.Export).
func runNexmarkGenerate(args []string) error {
	fs := flag.NewFlagSet("eddy nexmark generate", flag.ContinueOnError)
	events := fs.Int64("events", 1_000_000, "events to generate")
	format := fs.String("format", "jsonl", "jsonl or csv")
	out := fs.String("out", "", "directory to write person.<format>, auction.<format>, bid.<format> and side_input.csv (q13's, as the suite writes it) into (required)")
	seed := fs.Uint64("seed", 0, "the generator's seed (as eddy bench nexmark --seed)")
	eventRate := fs.Float64("event-rate", 0, "events per second of event time (as eddy bench nexmark --event-rate; default the suite's 10000000)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("--out is required: the directory to write the events into")
	}
	if *events < 1 {
		return errors.New("--events must be at least 1")
	}
	if *format != "jsonl" && *format != "csv" {
		return fmt.Errorf("--format %q: want jsonl or csv", *format)
	}
	if *eventRate < 0 {
		return fmt.Errorf("--event-rate %v: want a positive rate, or 0 for the default", *eventRate)
	}
	g, err := nexmark.New(nexmark.Config{Seed: *seed, EventsPerSecond: *eventRate})
	if err != nil {
		return err
	}
	if err := g.Export(*out, *events, *format); err != nil {
		return err
	}
	if err := nexmark.ExportSideInput(*out); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %d events to %s (person, auction and bid .%s) and q13's side input (side_input.csv)\n", *events, *out, *format)
	return nil
}

func queryNames() []string {
	var names []string
	for _, q := range queries.All() {
		names = append(names, q.Name)
	}
	return names
}
