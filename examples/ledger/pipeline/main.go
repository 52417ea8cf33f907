package pipeline

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/checkpoint"
	"github.com/eddy-streams/eddy/kafkaclient"
)

// A ConfigOption adjusts the eddy.Config that Main built from the flags,
// just before the app is created, for a program that runs the example
// with settings the flags do not reach (eddy's test harness gives it a
// state backend on a faulty disk). It returns a function that Main calls
// once the app has stopped, to release what the option opened, or nil.
type ConfigOption func(cfg *eddy.Config) (release func())

// Main parses the ledger's flags and runs it until ctx is cancelled. The
// options, if any, adjust the app's config after the flags.
func Main(ctx context.Context, args []string, stderr io.Writer, opts ...ConfigOption) error {
	fs := flag.NewFlagSet("ledger", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("brokers", "127.0.0.1:9092", "comma-separated Kafka bootstrap servers")
	input := fs.String("input", "payments", "input topic (key = account id, value = payment in --format)")
	output := fs.String("output", "balances", "output topic (one balance record per payment)")
	stateDir := fs.String("state-dir", "", "directory of the task databases (required)")
	appID := fs.String("app-id", "ledger", "application id: consumer group and topic prefix")
	commitInterval := fs.Duration("commit-interval", 100*time.Millisecond, "how often the transaction commits")
	partitions := fs.Int("partitions", 4, "partitions of the input topic when the ledger creates it")
	guarantee := fs.String("guarantee", "exactly-once", "processing guarantee: exactly-once or at-least-once (for comparison)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	logFormat := fs.String("log-format", "text", "log format: text (key=value) or json (one object per line)")
	instanceID := fs.String("instance-id", "", "static group membership id: a restarted instance with the same id gets its tasks back at once (default: derived from --state-dir)")
	workers := fs.Int("workers", 1, "workers (group members, each with its own transactional producer) in this process")
	standbys := fs.Int("standby-replicas", 0, "standby copies of each task kept warm on other instances, so a failed instance's tasks resume elsewhere after a short replay (give every instance the same value)")
	checkpointURL := fs.String("checkpoint-url", "", "remote checkpoints of the state: file:///absolute/path or s3://bucket/prefix (S3 endpoint, credentials and region from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION); default none")
	checkpointInterval := fs.Duration("checkpoint-interval", eddy.DefaultCheckpointInterval, "how often each task is checkpointed with --checkpoint-url; 0: only at a clean stop")
	brokerTimeout := fs.Duration("broker-timeout", eddy.DefaultBrokerTimeout, "give up when no broker of --brokers answered within this long (unreachable brokers are logged meanwhile)")
	postgres := fs.String("postgres", "", "also write the balances to PostgreSQL exactly once, in the commit cycle (two-phase commit): a connection string (postgres://user:pass@host:5432/db); tables "+BalancesTable+" (each account's latest seq and balance) and "+PaymentsTable+" (every balance record), created if missing; the server needs max_prepared_transactions > 0")
	formatFlags := AddFormatFlags(fs)
	security := kafkaclient.AddSecurityFlags(fs)
	httpFlags := AddHTTPFlags(fs, "127.0.0.1:8080")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: every option is a flag, see -h", fs.Arg(0))
	}
	if *stateDir == "" {
		return errors.New("--state-dir is required: the directory that keeps the ledger's state")
	}
	if *partitions < 1 {
		return fmt.Errorf("--partitions %d: must be at least 1", *partitions)
	}
	if *workers < 1 {
		return fmt.Errorf("--workers %d: must be at least 1", *workers)
	}
	if *standbys < 0 {
		return fmt.Errorf("--standby-replicas %d: must be 0 (none) or more", *standbys)
	}
	if *brokerTimeout <= 0 {
		return fmt.Errorf("--broker-timeout %v: must be positive, e.g. 2m", *brokerTimeout)
	}
	if *checkpointInterval < 0 {
		return fmt.Errorf("--checkpoint-interval %v: use 0 (checkpoint only at a clean stop) or a positive duration, e.g. 1m", *checkpointInterval)
	}
	if *checkpointInterval == 0 {
		*checkpointInterval = -1 // eddy.Config: negative is "only at a clean stop"
	}
	log, err := NewLogger(stderr, *logLevel, *logFormat)
	if err != nil {
		return err
	}
	g, err := eddy.ParseGuarantee(*guarantee)
	if err != nil {
		return fmt.Errorf("--guarantee: %w", err)
	}
	format, reg, releaseRegistry, err := formatFlags.Parse(ctx, log, *brokerTimeout)
	if err != nil {
		return err
	}
	defer releaseRegistry()
	// Opened before anything else, so a bad URL or an unreachable bucket
	// is reported before any topic is created.
	var store checkpoint.Store
	if *checkpointURL != "" {
		if store, err = checkpoint.Open(ctx, *checkpointURL); err != nil {
			return fmt.Errorf("--checkpoint-url: %w", err)
		}
	}
	kafkaOpts, err := security.ClientOpts()
	if err != nil {
		return err
	}
	web, err := httpFlags.Open()
	if err != nil {
		return err
	}
	defer web.Close() // a no-op once served; closes it on an early return
	seeds := strings.Split(*brokers, ",")
	if err := CreateTopics(ctx, seeds, kafkaOpts, *brokerTimeout, log, *input, int32(*partitions), *output); err != nil {
		return err
	}
	codecs, err := NewCodecs(ctx, format, reg, *input, *output)
	if err != nil {
		return err
	}
	cfg := eddy.Config{
		AppID:              *appID,
		Brokers:            seeds,
		StateDir:           *stateDir,
		InstanceID:         *instanceID,
		Workers:            *workers,
		StandbyReplicas:    *standbys,
		CommitInterval:     *commitInterval,
		BrokerTimeout:      *brokerTimeout,
		Guarantee:          g,
		CheckpointStore:    store,
		CheckpointInterval: *checkpointInterval,
		Endpoint:           web.Endpoint,
		HTTPToken:          web.Token,
		HTTPPeerTLS:        web.PeerTLS,
		Logger:             log,
		KafkaOptions:       kafkaOpts,
	}
	SetErrorPolicies(&cfg)
	defer Adjust(&cfg, opts)()
	var sinks func(eddy.Stream[string, Balance])
	if *postgres != "" {
		if err := CreateTables(ctx, *postgres, *brokerTimeout, log); err != nil {
			return err
		}
		sinks = func(b eddy.Stream[string, Balance]) { toPostgres(b, *postgres, *brokerTimeout) }
	}
	app, err := eddy.New(topology(*input, *output, codecs, sinks), cfg)
	if err != nil {
		return err
	}
	return RunApp(ctx, app, web.Listener)
}

// SetErrorPolicies sets the examples' error policies: every payment that
// cannot go through goes to the dead-letter topic with the reason, rather
// than stopping the app on every restart. Decode errors (malformed
// payments, bad keys) are dead-lettered by default; process errors (a
// payment whose account differs from its key, or that would overflow a
// balance or a window's sum) and produce errors (an output larger than
// MaxRecordBytes: a huge id) are set to be. examples/windowed uses it
// too, and the tests run the topologies with it.
func SetErrorPolicies(cfg *eddy.Config) {
	cfg.OnProcessError = eddy.DeadLetter
	cfg.OnProduceError = eddy.DeadLetter
}

// Adjust applies opts to cfg in order and returns a function that
// releases what they opened, in reverse order. examples/windowed uses it
// too.
func Adjust(cfg *eddy.Config, opts []ConfigOption) (release func()) {
	var releases []func()
	for _, o := range opts {
		if r := o(cfg); r != nil {
			releases = append(releases, r)
		}
	}
	return func() {
		for i := len(releases) - 1; i >= 0; i-- {
			releases[i]()
		}
	}
}

// CreateTopics creates, with a client built with opts (security), the
// input (if missing, with partitions partitions) and the outputs with the
// input's partition count, so that an output partition holds the keys of
// the input partition of the same number. While no broker answers it logs
// warnings to log, and it gives up after brokerTimeout (--broker-timeout).
// examples/windowed uses it too.
func CreateTopics(ctx context.Context, seeds []string, opts []kgo.Opt, brokerTimeout time.Duration, log *slog.Logger, input string, partitions int32, outputs ...string) error {
	return kafkaclient.WatchBrokers(ctx, seeds, brokerTimeout, log, func(ctx context.Context, watch kgo.Opt) error {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), watch}, opts...)...)
		if err != nil {
			return fmt.Errorf("client: %w", err)
		}
		defer cl.Close()
		if err := kafkaclient.CreateTopics(ctx, cl, partitions, input); err != nil {
			return err
		}
		return kafkaclient.CreateTopicsLike(ctx, cl, input, outputs...)
	})
}
