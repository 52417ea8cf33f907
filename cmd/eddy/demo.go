package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	ledger "github.com/eddy-streams/eddy/examples/ledger/pipeline"
	windowed "github.com/eddy-streams/eddy/examples/windowed/pipeline"
	"github.com/eddy-streams/eddy/internal/harness/demo"
	"github.com/eddy-streams/eddy/internal/harness/inspect"
	"github.com/eddy-streams/eddy/internal/kafka"
)

// runDemo starts the embedded broker, the payment generator and the ledger
// and windowed examples as child processes that it kills and restarts, then
// verifies their outputs. A temporary data directory is removed after a
// verified run; it is kept, for its logs, after a failed one, and so is a
// --data-dir, and the demo says where and how big.
func runDemo(ctx context.Context, args []string) (err error) {
	fs := flag.NewFlagSet("eddy demo", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "directory for the broker's data, the apps' state and logs, kept at the end (default: a new temporary directory, removed at the end unless the verification fails)")
	rate := fs.Int("rate", 2000, "payments per second")
	accounts := fs.Int("accounts", 1000, "number of accounts")
	partitions := fs.Int("partitions", 4, "partitions of the payments topic")
	duration := fs.Duration("duration", 30*time.Second, "how long to generate payments")
	crashEvery := fs.Duration("crash-every", 3*time.Second, "mean time between SIGKILLs of the apps (0 = never)")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "random seed of the workload and the crash schedule")
	withWindowed := fs.Bool("windowed", true, "also run examples/windowed on the same payments, killed with the ledger, and verify its windows")
	window := fs.Duration("window", windowed.DefaultWindow, "window size of the windowed example")
	grace := fs.Duration("grace", windowed.DefaultGrace, "grace period of the windowed example")
	hostile := fs.Bool("hostile", true, "spread one hostile record of each kind over the run (bad keys, garbage, bad times, forged headers, an overflow...) and check that each app dead-letters each bad one exactly once and processes the odd good ones (JSON only: off with another --format)")
	formatName := fs.String("format", string(ledger.JSON), "encoding of the payments, balances and late payments: json, avro or protobuf (avro and protobuf through a schema registry the demo serves beside its broker; the malformed payments are then plain JSON, which the apps dead-letter)")
	sink := fs.String("sink", "", "also write the ledger's balances to an external system exactly once, in the commit cycle, and verify it: postgres (with --dsn)")
	dsn := fs.String("dsn", "", "the database of --sink postgres (postgres://user:pass@host:5432/db); its server needs max_prepared_transactions > 0")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var errs []error
	switch {
	case *sink == "" && *dsn != "":
		errs = append(errs, errors.New("--dsn is for --sink postgres: add --sink postgres"))
	case *sink == "postgres" && *dsn == "":
		errs = append(errs, errors.New("--sink postgres needs --dsn: the database to write to, e.g. postgres://postgres@127.0.0.1:5432/postgres"))
	case *sink != "" && *sink != "postgres":
		errs = append(errs, fmt.Errorf("--sink %q: the only sink is postgres", *sink))
	}
	format, err := ledger.ParseFormat(*formatName)
	if err != nil {
		errs = append(errs, fmt.Errorf("--format: %w", err))
	}
	if err == nil && format != ledger.JSON && *hostile {
		hostileSet := false
		fs.Visit(func(f *flag.Flag) { hostileSet = hostileSet || f.Name == "hostile" })
		if hostileSet {
			errs = append(errs, fmt.Errorf("--hostile with --format %s: the hostile records are JSON; drop --hostile or use --format json", format))
		}
		*hostile = false
	}
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
	if *window < time.Millisecond || *window%time.Millisecond != 0 {
		errs = append(errs, fmt.Errorf("--window %v: must be a whole number of milliseconds, at least 1ms, e.g. 10s", *window))
	}
	if *grace <= 0 || *grace%time.Millisecond != 0 {
		// Zero grace is valid for the example but the demo's out-of-order
		// payments are drawn within the grace period, so it needs one.
		errs = append(errs, fmt.Errorf("--grace %v: must be a positive whole number of milliseconds, e.g. 2s", *grace))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	dir := *dataDir
	temporary := dir == ""
	if temporary {
		tmp, err := os.MkdirTemp("", "eddy-demo-")
		if err != nil {
			return err
		}
		dir = tmp
	}
	// Deferred first, so it runs after the broker and the apps are gone.
	defer func() { finishDataDir(os.Stdout, dir, temporary, err == nil) }()
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
	var registryURL string
	if format != ledger.JSON {
		reg, url, err := startRegistry("127.0.0.1:0", dir+"/broker", nil, nil, io.Discard, os.Stderr)
		if err != nil {
			return err
		}
		defer reg.Close()
		registryURL = url
		fmt.Printf("eddy demo: payments and balances in %s, schema registry %s\n", format, registryURL)
	}
	apps := "ledger"
	var windowedCommand []string
	if *withWindowed {
		apps = "ledger and windowed totals"
		windowedCommand = []string{self, "windowed"}
	}
	fmt.Printf("eddy demo: %s as child processes, SIGKILLed about every %v, %d payments/s for %v\n", apps, *crashEvery, *rate, *duration)
	res, err := demo.Run(ctx, demo.Options{
		Brokers:         []string{broker.Addr()},
		LedgerCommand:   []string{self, "ledger"},
		WindowedCommand: windowedCommand,
		Window:          *window,
		Grace:           *grace,
		WorkDir:         dir,
		Rate:            *rate,
		Accounts:        *accounts,
		Partitions:      *partitions,
		Duration:        *duration,
		CrashEvery:      *crashEvery,
		Seed:            *seed,
		Out:             os.Stdout,
		Hostile:         *hostile,
		Format:          format,
		RegistryURL:     registryURL,
		PostgresDSN:     *dsn,
	})
	if err != nil {
		return err
	}
	fmt.Printf("\nverification (read_committed):\n")
	fmt.Printf("  payments      %d (+%d malformed)\n", res.Report.Payments, res.Invalid)
	fmt.Printf("  balances      %d\n", res.Report.Outputs)
	fmt.Printf("  duplicates    %d\n", res.Report.Duplicates)
	fmt.Printf("  missing       %d\n", res.Report.Missing)
	fmt.Printf("  wrong         %d\n", res.Report.Wrong)
	fmt.Printf("  dead letters  %d (malformed payments sent: %d, bad hostile records: %d; one dead letter each per app)\n", res.DeadLetters, res.Invalid, res.Hostile.Bad)
	if *hostile {
		h := res.Hostile
		fmt.Printf("  hostile       %d records, %d bad (each in the dead-letter topic once per app at its stage: problems %d), %d good and processed\n",
			h.Records, h.Bad, h.Problems, h.Records-h.Bad)
		fmt.Printf("                %s\n", h.KindList())
		for _, e := range h.Examples {
			fmt.Printf("  e.g. %s\n", e)
		}
	}
	if pg := res.Postgres; pg != nil {
		fmt.Printf("  postgres      %s: %d rows for %d accounts (%d wrong); %s: %d rows for %d balances (%d twice, %d wrong, %d missing); %d prepared transactions left\n",
			ledger.BalancesTable, pg.AccountRows, pg.Accounts, pg.WrongAccounts, ledger.PaymentsTable, pg.PaymentRows, pg.Payments, pg.Duplicates, pg.Wrong, pg.Missing, pg.Prepared)
		for _, e := range pg.Examples {
			fmt.Printf("  e.g. %s\n", e)
		}
	}
	fmt.Printf("  crashes       %d SIGKILLs; slowest ledger recovery to first commit %.2fs\n", res.Crashes, slowest(res.Resumes).Seconds())
	fmt.Printf("  ledger log    %s\n", res.LedgerLog)
	for _, e := range res.Report.Examples {
		fmt.Printf("  e.g. %s\n", e)
	}
	if res.Windowed {
		w := res.Windows
		fmt.Printf("\nwindows (%v tumbling, grace %v; read_committed):\n", *window, *grace)
		fmt.Printf("  expected      %d closed windows (%d payments, %d out of order within grace)\n", w.Expected, w.Payments, w.OutOfOrder)
		fmt.Printf("  emitted       %d\n", w.Outputs)
		fmt.Printf("  duplicates    %d\n", w.Duplicates)
		fmt.Printf("  missing       %d\n", w.Missing)
		fmt.Printf("  early         %d (windows still open: %d)\n", w.Early, w.Open)
		fmt.Printf("  wrong         %d\n", w.Wrong)
		fmt.Printf("  late dropped  %d (on the late topic: %d; missing %d, extra %d)\n", w.Late, w.LateOutputs, w.LateMissing, w.LateExtra)
		fmt.Printf("  crashes       %d SIGKILLs; slowest windowed recovery to first commit %.2fs\n", res.Crashes, slowest(res.WindowedResumes).Seconds())
		fmt.Printf("  windowed log  %s\n", res.WindowedLog)
		for _, e := range w.Examples {
			fmt.Printf("  e.g. %s\n", e)
		}
	}
	if !res.OK() {
		return errors.New("exactly-once violated: see the counts above")
	}
	fmt.Println("\nexactly once: every payment has exactly one correct balance record")
	if res.Postgres != nil {
		fmt.Println("exactly once: PostgreSQL holds each account's last balance and every balance record once, nothing left prepared")
	}
	if res.Windowed {
		fmt.Println("exactly once: every closed window has exactly one correct total, no open window was emitted")
	}
	return nil
}

// finishDataDir removes the demo's temporary data directory after a
// verified run, or says where the data is and how big: a failed run keeps
// it for its logs, and a --data-dir is the user's.
func finishDataDir(w io.Writer, dir string, temporary, ok bool) {
	size := inspect.BytesText(inspect.DirSize(dir))
	if temporary && ok {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(w, "eddy demo: could not remove the data directory %s (%s): %v\n", dir, size, err)
			return
		}
		fmt.Fprintf(w, "eddy demo: removed the data directory %s (%s); pass --data-dir DIR to keep it\n", dir, size)
		return
	}
	fmt.Fprintf(w, "eddy demo: the broker's data, the apps' state and the logs are in %s (%s)", dir, size)
	if temporary {
		fmt.Fprintf(w, "; remove it with: rm -r %s", dir)
	}
	fmt.Fprintln(w)
}

func slowest(rs []time.Duration) time.Duration {
	var m time.Duration
	for _, r := range rs {
		m = max(m, r)
	}
	return m
}
