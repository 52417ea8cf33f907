package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/eddy-streams/eddy/internal/harness/demo"
	"github.com/eddy-streams/eddy/internal/kafka"
)

// runFailover is `eddy bench failover`: ledger processes with standby
// replicas against a fresh embedded broker, one SIGKILLed under load, and
// the time until its tasks write committed balances elsewhere; then the
// same without standbys, for comparison.
func runFailover(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eddy bench failover", flag.ContinueOnError)
	instances := fs.Int("instances", 3, "ledger processes")
	partitions := fs.Int("partitions", 4, "partitions of the payments topic")
	standbys := fs.Int("standby-replicas", 1, "standby replicas of the measured run")
	compare := fs.Bool("compare", true, "also measure the same failover with no standby (a full changelog restore)")
	preload := fs.Int("preload", 1_000_000, "payments processed before the measurement: they make the state a takeover restores")
	accounts := fs.Int("accounts", 500_000, "distinct accounts")
	rate := fs.Int("rate", 2000, "payments per second during the measurement")
	before := fs.Duration("before", 5*time.Second, "load before the SIGKILL")
	after := fs.Duration("after", 3*time.Second, "load after the killed tasks are back")
	rounds := fs.Int("rounds", 1, "repetitions of each run")
	dataDir := fs.String("data-dir", "", "directory for the apps' state and logs (default: a new temporary directory)")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "random seed of the payments")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected argument %q: eddy bench failover takes only flags", fs.Arg(0)))
	}
	if *instances < 2 {
		errs = append(errs, fmt.Errorf("--instances %d: a failover needs at least 2", *instances))
	}
	if *standbys < 1 {
		errs = append(errs, fmt.Errorf("--standby-replicas %d: the measured run needs at least 1 (--compare measures 0)", *standbys))
	}
	if *partitions < *instances {
		errs = append(errs, fmt.Errorf("--partitions %d: give every one of the %d instances a task", *partitions, *instances))
	}
	if *preload < 1 || *accounts < 1 || *rate < 1 || *rounds < 1 {
		errs = append(errs, errors.New("--preload, --accounts, --rate and --rounds must be at least 1"))
	}
	if *before <= 0 || *after < 0 {
		errs = append(errs, errors.New("--before must be positive and --after zero or more"))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable to run the ledger: %w", err)
	}
	dir := *dataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "eddy-failover-"); err != nil {
			return err
		}
	}
	configs := []int{*standbys}
	if *compare {
		configs = append(configs, 0)
	}
	fmt.Fprintf(os.Stderr, "eddy bench failover: %d ledger processes, %d partitions, %d payments over %d accounts preloaded, %d payments/s; data in %s\n",
		*instances, *partitions, *preload, *accounts, *rate, dir)
	var failed []string
	for round := 1; round <= *rounds; round++ {
		for _, n := range configs {
			name := fmt.Sprintf("round%d-standby%d", round, n)
			// A fresh broker per run: no run inherits another's topics,
			// group or heap.
			broker, err := kafka.StartBroker(kafka.BrokerConfig{DefaultPartitions: int32(*partitions)})
			if err != nil {
				return err
			}
			res, err := demo.Failover(ctx, demo.FailoverOptions{
				Brokers: []string{broker.Addr()}, LedgerCommand: []string{self, "ledger"},
				WorkDir: filepath.Join(dir, name), Instances: *instances, Partitions: *partitions,
				StandbyReplicas: n, Preload: *preload, Accounts: *accounts, Rate: *rate,
				Before: *before, After: *after, Seed: *seed + uint64(round), Out: os.Stderr,
			})
			broker.Close()
			if err != nil {
				return fmt.Errorf("%s: %w (logs in %s)", name, err, filepath.Join(dir, name))
			}
			fmt.Printf("standby-replicas %d, round %d: %v\n", n, round, res)
			for p, d := range res.PerTask {
				fmt.Printf("  task 0_%d: first committed output %.2fs after the SIGKILL\n", p, d.Seconds())
			}
			if !res.Report.OK() {
				failed = append(failed, name)
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("exactly-once violated in %v", failed)
	}
	return nil
}
