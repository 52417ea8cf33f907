package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/eddy-streams/eddy/internal/harness/chaos"
)

// runChaos is `eddy chaos`: the chaos harness (internal/harness/chaos). It exits
// non-zero when eddy violated exactly-once.
func runChaos(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eddy chaos", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "directory for the broker's data, the apps' state and every log (default: a new temporary directory, kept)")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "random seed of the workload and of the fault schedule")
	duration := fs.Duration("duration", 2*time.Minute, "how long payments flow and faults are injected (the catch-up and verification follow)")
	instances := fs.Int("instances", 2, "ledger processes (one consumer group)")
	withWindowed := fs.Bool("windowed", true, "also run one windowed-totals process on the same payments and verify its windows")
	faults := fs.String("faults", "all", "comma-separated fault `kinds`: "+strings.Join(chaos.AllKinds, ",")+" (or all)")
	rate := fs.Int("rate", 300, "payments per second")
	accounts := fs.Int("accounts", 200, "number of accounts")
	partitions := fs.Int("partitions", 4, "partitions of the payments topic")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected argument %q: eddy chaos takes only flags", fs.Arg(0)))
	}
	kinds, err := chaos.ParseKinds(*faults)
	if err != nil {
		errs = append(errs, fmt.Errorf("--faults: %w", err))
	}
	if *duration <= 0 {
		errs = append(errs, fmt.Errorf("--duration %v: must be positive, e.g. 10m", *duration))
	}
	if *instances < 1 {
		errs = append(errs, fmt.Errorf("--instances %d: must be at least 1", *instances))
	}
	if *rate < 1 || *accounts < 1 || *partitions < 1 {
		errs = append(errs, fmt.Errorf("--rate, --accounts and --partitions must be at least 1 (got %d, %d, %d)", *rate, *accounts, *partitions))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	dir := *dataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "eddy-chaos-"); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable to run the broker and the apps: %w", err)
	}
	rep, err := chaos.Run(ctx, chaos.Options{
		EddyBin: self, WorkDir: dir, Seed: *seed, Duration: *duration, Instances: *instances,
		Windowed: *withWindowed, Kinds: kinds, Rate: *rate, Accounts: *accounts, Partitions: *partitions,
		Out: os.Stdout,
	})
	if err != nil {
		return fmt.Errorf("%w (logs in %s)", err, dir)
	}
	rep.Print(os.Stdout)
	fmt.Printf("\nreproduce: eddy chaos --seed %d --duration %v --instances %d --faults %s --rate %d --accounts %d --partitions %d --windowed=%v\nlogs: %s\n",
		*seed, *duration, *instances, strings.Join(kinds, ","), *rate, *accounts, *partitions, *withWindowed, dir)
	if !rep.OK() {
		return errors.New("exactly-once violated (see the report above)")
	}
	return nil
}
