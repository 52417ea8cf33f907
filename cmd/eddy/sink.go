package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/eddy-streams/eddy/kafkaclient"
	"github.com/eddy-streams/eddy/pgsink"
)

// runSink runs a sink from a topic into a database: "eddy sink postgres".
func runSink(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "postgres" {
		return errors.New("usage: eddy sink postgres [flags] (postgres is the only sink; see eddy sink postgres -h)")
	}
	return runSinkPostgres(ctx, args[1:])
}

func runSinkPostgres(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sink postgres", flag.ContinueOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "comma-separated Kafka bootstrap servers")
	topic := fs.String("topic", "", "the topic to write into the table (required)")
	group := fs.String("group", "", "the consumer group; instances of one group share the partitions (default eddy-sink-<table>)")
	dsn := fs.String("dsn", "", "the database's connection string, e.g. postgres://user@host:5432/db (required; the password may come from PGPASSWORD)")
	table := fs.String("table", "", "the table, optionally schema-qualified (required)")
	key := fs.String("key", "", "comma-separated key columns; one key column is filled by the record key (required for upsert)")
	columns := fs.String("columns", "", "comma-separated columns to write (default: every writable column of the table)")
	mode := fs.String("mode", "upsert", "upsert (by key; a tombstone deletes) or append (every record a row)")
	batchSize := fs.Int("batch-size", 5000, "most records in one transaction")
	batchWait := fs.Duration("batch-wait", 200*time.Millisecond, "longest a batch's first record waits before its transaction")
	onBad := fs.String("on-bad-record", "dlq", "dlq (write it to --dlq-topic with the reason and go on) or stop")
	dlq := fs.String("dlq-topic", "", "the dead-letter topic (default <topic>.dlq)")
	dbTimeout := fs.Duration("db-timeout", 2*time.Minute, "give up when the database has failed (down, refusing the credentials) this long; meanwhile retry with backoff")
	session := fs.Duration("session-timeout", 45*time.Second, "the consumer group's session timeout: how long a stopped instance keeps its partitions")
	security := kafkaclient.AddSecurityFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: eddy sink postgres --topic T --dsn DSN --table TABLE --key COL [flags]\n\nWrites a topic's records (read_committed) into a PostgreSQL table exactly once:\nby default each JSON value field fills the column of the same name and the record\nkey fills the key column. The next offset of each partition is stored in\neddy_sink_offsets in the same transaction as the rows. See docs/postgres.md.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: every option is a flag, see -h", fs.Arg(0))
	}
	if *topic == "" || *dsn == "" || *table == "" {
		return errors.New("--topic, --dsn and --table are required")
	}
	m, err := pgsink.ParseMode(*mode)
	if err != nil {
		return fmt.Errorf("--mode: %w", err)
	}
	var policy pgsink.BadRecordPolicy
	switch *onBad {
	case "dlq":
		policy = pgsink.DeadLetter
	case "stop":
		policy = pgsink.Stop
	default:
		return fmt.Errorf("--on-bad-record %q: want dlq or stop", *onBad)
	}
	opts, err := security.ClientOpts()
	if err != nil {
		return err
	}
	cfg := pgsink.Config{
		Brokers:         strings.Split(*brokers, ","),
		Topic:           *topic,
		Group:           *group,
		DSN:             *dsn,
		Table:           pgsink.Table{Name: *table, Key: splitList(*key), Mode: m, Columns: splitList(*columns)},
		BatchSize:       *batchSize,
		BatchWait:       *batchWait,
		OnBadRecord:     policy,
		DeadLetterTopic: *dlq,
		DBTimeout:       *dbTimeout,
		SessionTimeout:  *session,
		Logger:          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
		KafkaOpts:       opts,
	}
	return pgsink.Run(ctx, cfg)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
