package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/eddy-streams/eddy/internal/demo"
	"github.com/eddy-streams/eddy/internal/kafka"
)

// runDemo starts the embedded broker, the payment generator and the ledger
// as a child process that it kills and restarts, then verifies the output.
func runDemo(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eddy demo", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "directory for the broker's data, the ledger's state and logs (default: a new temporary directory)")
	rate := fs.Int("rate", 2000, "payments per second")
	accounts := fs.Int("accounts", 1000, "number of accounts")
	partitions := fs.Int("partitions", 4, "partitions of the payments topic")
	duration := fs.Duration("duration", 30*time.Second, "how long to generate payments")
	crashEvery := fs.Duration("crash-every", 3*time.Second, "mean time between SIGKILLs of the ledger (0 = never)")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "random seed of the workload and the crash schedule")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected argument %q: eddy demo takes only flags", fs.Arg(0)))
	}
	if *rate < 1 {
		errs = append(errs, fmt.Errorf("--rate %d: must be at least 1", *rate))
	}
	if *accounts < 1 {
		errs = append(errs, fmt.Errorf("--accounts %d: must be at least 1", *accounts))
	}
	if *partitions < 1 {
		errs = append(errs, fmt.Errorf("--partitions %d: must be at least 1", *partitions))
	}
	if *duration <= 0 {
		errs = append(errs, fmt.Errorf("--duration %v: must be positive, e.g. 30s", *duration))
	}
	if *crashEvery < 0 {
		errs = append(errs, fmt.Errorf("--crash-every %v: must be 0 (never) or positive", *crashEvery))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	dir := *dataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "eddy-demo-")
		if err != nil {
			return err
		}
		dir = tmp
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable to run the ledger: %w", err)
	}
	broker, err := kafka.StartBroker(kafka.BrokerConfig{Addr: "127.0.0.1:0", DataDir: dir + "/broker", DefaultPartitions: int32(*partitions)})
	if err != nil {
		return err
	}
	defer broker.Close()
	fmt.Printf("eddy demo: broker %s, data in %s, seed %d\n", broker.Addr(), dir, *seed)
	fmt.Printf("eddy demo: ledger as a child process, SIGKILLed about every %v, %d payments/s for %v\n", *crashEvery, *rate, *duration)
	res, err := demo.Run(ctx, demo.Options{
		Brokers:       []string{broker.Addr()},
		LedgerCommand: []string{self, "ledger"},
		WorkDir:       dir,
		Rate:          *rate,
		Accounts:      *accounts,
		Partitions:    *partitions,
		Duration:      *duration,
		CrashEvery:    *crashEvery,
		Seed:          *seed,
		Out:           os.Stdout,
	})
	if err != nil {
		return err
	}
	var slowest time.Duration
	for _, r := range res.Resumes {
		slowest = max(slowest, r)
	}
	fmt.Printf("\nverification (read_committed):\n")
	fmt.Printf("  payments      %d (+%d malformed)\n", res.Report.Payments, res.Invalid)
	fmt.Printf("  balances      %d\n", res.Report.Outputs)
	fmt.Printf("  duplicates    %d\n", res.Report.Duplicates)
	fmt.Printf("  missing       %d\n", res.Report.Missing)
	fmt.Printf("  wrong         %d\n", res.Report.Wrong)
	fmt.Printf("  dead letters  %d (malformed payments sent: %d)\n", res.DeadLetters, res.Invalid)
	fmt.Printf("  crashes       %d SIGKILLs; slowest recovery to first commit %.2fs\n", res.Crashes, slowest.Seconds())
	fmt.Printf("  ledger log    %s\n", res.LedgerLog)
	for _, e := range res.Report.Examples {
		fmt.Printf("  e.g. %s\n", e)
	}
	if !res.OK() {
		return errors.New("exactly-once violated: see the counts above")
	}
	fmt.Println("\nexactly once: every payment has exactly one correct balance record")
	return nil
}
