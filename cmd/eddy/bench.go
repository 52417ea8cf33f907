package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/eddy-streams/eddy/internal/bench"
)

// runBench runs a benchmark; `eddy bench ledger` is the first.
func runBench(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "ledger" {
		return errors.New("usage: eddy bench ledger [--records N] [--partitions N] [--accounts N] [--cpuprofile FILE]")
	}
	fs := flag.NewFlagSet("eddy bench ledger", flag.ContinueOnError)
	records := fs.Int("records", 1_000_000, "payments to process")
	rounds := fs.Int("rounds", 3, "repetitions of each run; the summary is the median")
	partitions := fs.Int("partitions", 4, "partitions of the payments topic")
	accounts := fs.Int("accounts", 10_000, "distinct accounts")
	commitInterval := fs.Duration("commit-interval", 0, "commit interval of the ledger (default: eddy's, 100ms)")
	workers := fs.Int("workers", 0, "workers of the ledger (default 1)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the exactly-once run to this file")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *records < 1 || *partitions < 1 || *accounts < 1 || *rounds < 1 {
		return errors.New("--records, --rounds, --partitions and --accounts must be at least 1")
	}
	results, err := bench.Ledger(ctx, bench.LedgerOptions{
		Records: *records, Rounds: *rounds, Partitions: *partitions, Accounts: *accounts, CPUProfile: *cpuprofile, Out: os.Stderr,
		CommitInterval: *commitInterval, Workers: *workers,
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
	ceiling := bench.Median(results, "ceiling")
	alos := bench.Median(results, "at-least-once")
	eos := bench.Median(results, "exactly-once")
	fmt.Fprintf(os.Stderr, "medians over %d rounds: ceiling %.0f, at-least-once %.0f, exactly-once %.0f records/s\n", *rounds, ceiling, alos, eos)
	fmt.Fprintf(os.Stderr, "exactly-once / at-least-once = %.2f, exactly-once / ceiling = %.2f\n", eos/alos, eos/ceiling)
	return nil
}
