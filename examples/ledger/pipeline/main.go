package pipeline

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/checkpoint"
	"github.com/eddy-streams/eddy/internal/harness/chaos/diskfault"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/internal/logging"
)

// Main parses the ledger's flags and runs it until ctx is cancelled.
func Main(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("ledger", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("brokers", "127.0.0.1:9092", "comma-separated Kafka bootstrap servers")
	input := fs.String("input", "payments", "input topic (key = account id, value = payment JSON)")
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
	security := AddSecurityFlags(fs)
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
	if *checkpointInterval < 0 {
		return fmt.Errorf("--checkpoint-interval %v: use 0 (checkpoint only at a clean stop) or a positive duration, e.g. 1m", *checkpointInterval)
	}
	if *checkpointInterval == 0 {
		*checkpointInterval = -1 // eddy.Config: negative is "only at a clean stop"
	}
	log, err := logging.New(stderr, *logLevel, *logFormat)
	if err != nil {
		return err
	}
	g, err := eddy.ParseGuarantee(*guarantee)
	if err != nil {
		return fmt.Errorf("--guarantee: %w", err)
	}
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
	if err := CreateTopics(ctx, seeds, kafkaOpts, *input, int32(*partitions), *output); err != nil {
		return err
	}
	// nil (the default backend) unless eddy chaos faults the disk.
	backend, closeBackend := diskfault.Backend(log)
	defer closeBackend()
	app, err := eddy.New(Topology(*input, *output), eddy.Config{
		Backend:            backend,
		AppID:              *appID,
		Brokers:            seeds,
		StateDir:           *stateDir,
		InstanceID:         *instanceID,
		Workers:            *workers,
		StandbyReplicas:    *standbys,
		CommitInterval:     *commitInterval,
		Guarantee:          g,
		CheckpointStore:    store,
		CheckpointInterval: *checkpointInterval,
		Endpoint:           web.Endpoint,
		HTTPToken:          web.Token,
		HTTPPeerTLS:        web.PeerTLS,
		// Only the broker-kill stress run sets this, to measure what the
		// offsets in the changelog protect against.
		IgnoreStateOffsets: os.Getenv("EDDY_IGNORE_STATE_OFFSETS") == "1",
		Logger:             log,
		KafkaOptions:       kafkaOpts,
	})
	if err != nil {
		return err
	}
	return RunApp(ctx, app, web.Listener)
}

// CreateTopics creates, with a client built with opts (security), the
// input (if missing, with partitions partitions)
// and the outputs with the input's partition count, so that an output
// partition holds the keys of the input partition of the same number.
// examples/windowed uses it too.
func CreateTopics(ctx context.Context, seeds []string, opts []kgo.Opt, input string, partitions int32, outputs ...string) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	defer cl.Close()
	if err := kafka.CreateTopics(ctx, cl, kafka.TopicSpec{Name: input, Partitions: partitions}); err != nil {
		return fmt.Errorf("create %s: %w", input, err)
	}
	parts, err := kafka.Partitions(ctx, cl, input)
	if err != nil {
		return err
	}
	for _, out := range outputs {
		if err := kafka.CreateTopics(ctx, cl, kafka.TopicSpec{Name: out, Partitions: parts[input]}); err != nil {
			return fmt.Errorf("create %s: %w", out, err)
		}
	}
	return nil
}
