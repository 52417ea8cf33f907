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
	"github.com/eddy-streams/eddy/serde/registry"
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
	dbTimeout := fs.Duration("db-timeout", 2*time.Minute, "give up when the database or the schema registry has failed (down, refusing the credentials) this long; meanwhile retry with backoff")
	format := fs.String("format", "json", "how the values are encoded: json, avro or protobuf (avro and protobuf in the Confluent wire format, their writer schemas read from --schema-registry)")
	registryURL := fs.String("schema-registry", "", "`URL` of a Confluent-compatible schema registry for --format avro or protobuf, e.g. http://127.0.0.1:8081 (eddy broker --schema-registry 127.0.0.1:8081 serves one); user:password@ in the URL is sent as basic auth")
	valueSchema := fs.String("value-schema", "", "with --format avro: a `file` holding the values' Avro schema; each of its fields must then be a column written, checked at start")
	session := fs.Duration("session-timeout", 45*time.Second, "the consumer group's session timeout: how long a stopped instance keeps its partitions")
	security := kafkaclient.AddSecurityFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: eddy sink postgres --topic T --dsn DSN --table TABLE --key COL [flags]\n\nWrites a topic's records (read_committed) into a PostgreSQL table exactly once:\neach field of the value fills the column of the same name and the record key\nfills the key column. Values are JSON objects, or with --format avro|protobuf\nand --schema-registry URL, Avro records or Protobuf messages of any schema in\nthe Confluent wire format (nested values go as JSON text into json/jsonb\ncolumns). The next offset of each partition is stored in eddy_sink_offsets in\nthe same transaction as the rows. See docs/postgres.md.\n\nflags:")
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
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	keyColumn := ""
	if k := splitList(*key); len(k) == 1 {
		keyColumn = k[0]
	}
	vf := valueFormat{format: *format, registry: *registryURL, valueSchema: *valueSchema}
	mapper, fields, release, err := vf.mapper(ctx, keyColumn, logger, *dbTimeout)
	if err != nil {
		return err
	}
	defer release()
	cfg := pgsink.Config{
		Brokers:         strings.Split(*brokers, ","),
		Topic:           *topic,
		Group:           *group,
		DSN:             *dsn,
		Table:           pgsink.Table{Name: *table, Key: splitList(*key), Mode: m, Columns: splitList(*columns)},
		Mapper:          mapper,
		ValueFields:     fields,
		BatchSize:       *batchSize,
		BatchWait:       *batchWait,
		OnBadRecord:     policy,
		DeadLetterTopic: *dlq,
		DBTimeout:       *dbTimeout,
		SessionTimeout:  *session,
		Logger:          logger,
		KafkaOpts:       opts,
	}
	return pgsink.Run(ctx, cfg)
}

// valueFormat is the flags that say how the values are encoded:
// --format, --schema-registry and --value-schema.
type valueFormat struct {
	format, registry, valueSchema string
}

// mapper checks the flags and returns the sink's Mapper, the value's
// fields when --value-schema gives them, and release, which the caller
// defers. The registry's client retries an unreachable registry for up to
// timeout (then the sink stops, blaming no record) and is closed when ctx
// ends (SIGTERM): a record waiting for the registry must not hold the
// stop; it is written at the next start.
func (f valueFormat) mapper(ctx context.Context, keyColumn string, log *slog.Logger, timeout time.Duration) (pgsink.Mapper, []string, func(), error) {
	none := func() {}
	switch f.format {
	case "json":
		if f.registry != "" {
			return nil, nil, none, errors.New("--schema-registry is for --format avro or protobuf: JSON needs no registry")
		}
		if f.valueSchema != "" {
			return nil, nil, none, errors.New("--value-schema is for --format avro")
		}
		return pgsink.JSONMapper(keyColumn), nil, none, nil
	case "avro", "protobuf":
	default:
		return nil, nil, none, fmt.Errorf("--format %q: want json, avro or protobuf", f.format)
	}
	if f.registry == "" {
		return nil, nil, none, fmt.Errorf("--format %s needs --schema-registry URL, e.g. http://127.0.0.1:8081 (`eddy broker --schema-registry 127.0.0.1:8081` serves one)", f.format)
	}
	var fields []string
	if f.valueSchema != "" {
		if f.format != "avro" {
			return nil, nil, none, errors.New("--value-schema is for --format avro")
		}
		text, err := os.ReadFile(f.valueSchema)
		if err != nil {
			return nil, nil, none, fmt.Errorf("--value-schema: %w", err)
		}
		if fields, err = pgsink.AvroFields(string(text)); err != nil {
			return nil, nil, none, fmt.Errorf("--value-schema %s: %w", f.valueSchema, err)
		}
	}
	cfg, err := registry.ConfigFromURL(f.registry)
	if err != nil {
		return nil, nil, none, fmt.Errorf("--schema-registry %q: %w", f.registry, err)
	}
	cfg.Logger, cfg.Timeout = log, timeout
	reg, err := registry.New(cfg)
	if err != nil {
		return nil, nil, none, fmt.Errorf("--schema-registry: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { reg.Close() })
	release := func() { stop(); reg.Close() }
	if f.format == "avro" {
		return pgsink.AvroMapper(keyColumn, reg), fields, release, nil
	}
	return pgsink.ProtobufMapper(keyColumn, reg), nil, release, nil
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
