package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/kafkaclient"
)

// runLag prints an application's consumer lag per partition.
func runLag(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("lag", flag.ContinueOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "comma-separated Kafka bootstrap servers")
	appID := fs.String("app-id", "", "the application id (its consumer group; required)")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	brokerTimeout := fs.Duration("broker-timeout", kafkaclient.DefaultBrokerTimeout, "give up when no broker of --brokers answered within this long (unreachable brokers are logged meanwhile)")
	security := kafkaclient.AddSecurityFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: eddy lag --app-id ID [--brokers HOST:PORT,...] [--json]\n\nPrints, per input partition of the application (repartition topics included), the\ngroup's committed offset, the partition's last stable offset, the lag between them\nand the instance that owns it, then the total.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: every option is a flag, see -h", fs.Arg(0))
	}
	if *appID == "" {
		return errors.New("--app-id is required: the application id the app runs with (its consumer group)")
	}
	if *brokerTimeout <= 0 {
		return fmt.Errorf("--broker-timeout %v: must be positive, e.g. 30s", *brokerTimeout)
	}
	opts, err := security.ClientOpts()
	if err != nil {
		return err
	}
	seeds := strings.Split(*brokers, ",")
	var lags []kafka.PartitionLag
	err = kafkaclient.WatchBrokers(ctx, seeds, *brokerTimeout, stderrLogger(), func(ctx context.Context, watch kgo.Opt) error {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), watch}, opts...)...)
		if err != nil {
			return fmt.Errorf("--brokers %s: %w", *brokers, err)
		}
		defer cl.Close()
		lags, err = kafka.GroupLag(ctx, cl, *appID)
		return err
	})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(lags)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tEND\tLAG\tOWNER\t")
	var total int64
	for _, l := range lags {
		committed := "-"
		if l.Committed >= 0 {
			committed = fmt.Sprint(l.Committed)
		}
		owner := l.Member
		if owner == "" {
			owner = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t\n", l.Topic, l.Partition, committed, l.End, l.Lag, owner)
		total += l.Lag
	}
	fmt.Fprintf(tw, "total\t\t\t\t%d\t\t\n", total)
	return tw.Flush()
}

// stderrLogger is where the operator commands log what they wait for (an
// unreachable broker): standard error, so that their output stays clean.
func stderrLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
