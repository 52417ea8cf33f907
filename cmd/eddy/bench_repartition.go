package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/harness/bench"
)

// runRepartition is `eddy bench repartition`: the size of an app's
// repartition topic over a steady run, with eddy's purge of consumed
// repartition records and without it.
func runRepartition(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eddy bench repartition", flag.ContinueOnError)
	rate := fs.Int("rate", 2000, "payments produced per second")
	duration := fs.Duration("duration", 5*time.Minute, "length of each run")
	sample := fs.Duration("sample", 15*time.Second, "interval between samples")
	partitions := fs.Int("partitions", 4, "partitions of the payments topic")
	accounts := fs.Int("accounts", 10_000, "distinct accounts")
	interval := fs.Duration("purge-interval", eddy.DefaultRepartitionPurgeInterval, "the app's RepartitionPurgeInterval in the run with the purge on")
	purge := fs.String("purge", "both", "on, off, or both (a run with the purge on, then one with it off)")
	tableCache := fs.Int64("table-cache-bytes", 0, "the app's table cache in bytes (Config.TableCacheBytes; default eddy's, 10 MiB; negative: off, every count update written to the output); the samples' output offsets show what it saves")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: eddy bench repartition [flags]

Runs an exactly-once app that re-keys payments by amount bucket (GroupBy,
through its repartition topic) and counts them, on the embedded broker, with
payments produced at --rate for --duration. Every --sample it prints (stderr)
the payments produced and committed, the repartition topic's retained
records (high watermarks - log start offsets), log start and end offsets,
the group's committed offsets on it, its size in bytes (DescribeLogDirs) and
the output's offsets; at the end (stdout) a Markdown table of the runs side
by side. With the purge on, the retained records stay bounded; off, they
grow with every payment.

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	var intervals []time.Duration
	switch *purge {
	case "both":
		intervals = []time.Duration{*interval, -1}
	case "on":
		intervals = []time.Duration{*interval}
	case "off":
		intervals = []time.Duration{-1}
	default:
		return fmt.Errorf("--purge %q: pass on, off or both", *purge)
	}
	if *rate < 1 || *partitions < 1 || *accounts < 1 || *duration <= 0 || *sample <= 0 || *interval <= 0 {
		return errors.New("--rate, --partitions and --accounts must be at least 1, --duration, --sample and --purge-interval positive")
	}
	fmt.Fprintf(os.Stderr, "CPU: %s; %d payments/s over %d accounts in %d partitions, %v per run, a sample every %v, table cache %d bytes\n",
		bench.CPUModel(), *rate, *accounts, *partitions, *duration, *sample, *tableCache)
	var runs []bench.RepartitionResult
	for _, pi := range intervals {
		res, err := bench.Repartition(ctx, bench.RepartitionOptions{
			Rate: *rate, Duration: *duration, Sample: *sample, Partitions: *partitions, Accounts: *accounts,
			PurgeInterval: pi, TableCacheBytes: *tableCache, Out: os.Stderr,
		})
		if err != nil {
			return err
		}
		runs = append(runs, res)
	}
	bench.WriteRepartitionTable(os.Stdout, runs)
	return nil
}
