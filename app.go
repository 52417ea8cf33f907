package eddy

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/checkpoint"
	"github.com/eddy-streams/eddy/httpapi"
	"github.com/eddy-streams/eddy/internal/failpoint"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/internal/runtime"
	"github.com/eddy-streams/eddy/metrics"
	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/pebble"
)

// Guarantee is the processing guarantee.
type Guarantee int

const (
	// ExactlyOnce: every input changes state and outputs exactly once,
	// through Kafka transactions (the default).
	ExactlyOnce Guarantee = iota
	// AtLeastOnce: no transactions; after a crash the records since the
	// last commit are processed again and their outputs written again.
	AtLeastOnce
)

func (g Guarantee) String() string {
	switch g {
	case ExactlyOnce:
		return "exactly-once"
	case AtLeastOnce:
		return "at-least-once"
	}
	return fmt.Sprintf("Guarantee(%d)", int(g))
}

// ParseGuarantee parses "exactly-once" or "at-least-once".
func ParseGuarantee(s string) (Guarantee, error) {
	switch s {
	case "exactly-once", "exactly_once":
		return ExactlyOnce, nil
	case "at-least-once", "at_least_once":
		return AtLeastOnce, nil
	}
	return 0, fmt.Errorf("eddy: guarantee %q: use exactly-once or at-least-once", s)
}

// Config configures Run. Zero fields take the defaults named on them.
type Config struct {
	// AppID names the application: its consumer group, the prefix of its
	// changelog topics and transactional ids. Required.
	AppID string
	// Brokers are the Kafka bootstrap servers. Required.
	Brokers []string
	// StateDir holds the task databases, under StateDir/AppID. Required.
	StateDir string
	// InstanceID is the static group membership id of this instance: a
	// restarted instance with the same id gets its tasks back at once.
	// Default: derived from the absolute StateDir, so one state directory
	// is one instance.
	InstanceID string
	// Workers is the number of workers (group members) in this process.
	// Default 1.
	Workers int
	// StandbyReplicas is how many standby copies of each stateful task the
	// group keeps on other instances (DESIGN.md §4): a standby follows the
	// task's changelog into its own local database, so that when the
	// task's instance fails the group gives the task to the instance with
	// the most caught-up standby, which replays only the last few
	// transactions instead of the whole changelog. A copy needs an
	// instance (a process) that does not run the task: with fewer
	// instances, fewer copies exist. Each standby costs its instance the
	// task's disk space and a share of a changelog reader. The group
	// leader's setting applies: give every instance the same. Default 0.
	StandbyReplicas int
	// CommitInterval is how often a transaction commits. Default 100ms.
	CommitInterval time.Duration
	// CommitRecords caps the records of one transaction. Default 100000
	// (the interval usually ends a transaction first).
	CommitRecords int
	// SessionTimeout is the group session timeout. Default 10s.
	SessionTimeout time.Duration
	// TransactionTimeout bounds how long a crashed instance's open
	// transaction blocks its partitions. Default 10s.
	TransactionTimeout time.Duration
	// Guarantee is the processing guarantee. Default ExactlyOnce.
	Guarantee Guarantee
	// OnDecodeError is the policy for records that fail to decode.
	// Default DeadLetter.
	OnDecodeError ErrorPolicy
	// OnProcessError is the policy for records whose processing fails
	// (an error or a panic in user code, an output that fails to
	// encode). Default Fail.
	OnProcessError ErrorPolicy
	// OnProduceError is the policy for output records larger than
	// MaxRecordBytes. Default Fail.
	OnProduceError ErrorPolicy
	// MaxRecordBytes caps an output record's key, value and headers
	// (changelog records included): a larger one is refused at once with
	// ErrRecordTooLarge (and OnProduceError applies), rather than failing
	// the transaction at the broker. Default 1,000,000, under Kafka's
	// default max.message.bytes (1,048,588); raise both together.
	MaxRecordBytes int
	// IgnoreStateOffsets resumes tasks from the group's committed offsets
	// alone, ignoring the input offsets carried in the changelog. It exists
	// only to measure what those offsets protect against (lost group
	// offsets, DESIGN.md §6); it weakens exactly-once. Default false.
	IgnoreStateOffsets bool
	// Backend stores task state. Default: Pebble with its default options.
	Backend state.Backend
	// CheckpointURL turns on remote incremental checkpoints of the task
	// databases (DESIGN.md §4): "file:///absolute/path" (a directory,
	// local or mounted) or "s3://bucket/prefix" (endpoint, credentials and
	// region from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY and AWS_REGION; the bucket must exist). Each
	// task uploads the files its last checkpoint lacks, every
	// CheckpointInterval and at a clean stop; a task that starts without
	// local state (a new machine, a wiped or corrupt directory) downloads
	// the newest checkpoint and replays only the changelog written since.
	// Default: none; such a task replays its whole changelog. Checkpoints
	// need a backend that can take them (Pebble on the OS file system).
	CheckpointURL string
	// CheckpointStore is used instead of CheckpointURL, for a store of
	// your own. Default: none.
	CheckpointStore checkpoint.Store
	// CheckpointInterval is how often each task is checkpointed when
	// checkpoints are on. Default 1 minute; negative: only at a clean stop.
	CheckpointInterval time.Duration
	// CheckpointKeep is how many checkpoints per task the store keeps; the
	// files only older ones need are deleted. Default 3.
	CheckpointKeep int
	// Logger receives the app's logs. Default slog.Default().
	Logger *slog.Logger
	// KafkaOptions are added to every Kafka client (TLS, SASL, ...).
	KafkaOptions []kgo.Opt
	// Endpoint is the host:port at which this instance serves its HTTP
	// endpoints (App.Handler), as other instances reach it: the group
	// learns it, so that any instance can forward a state query to the
	// instance that owns the key (Kafka Streams' application.server).
	// Default: none; the instance answers for its own tasks only, and
	// other instances cannot route to it.
	Endpoint string
	// HTTPToken, when set, protects the endpoints of Handler: every
	// request but /healthz and /readyz must carry it as a bearer token
	// (or the browser cookie the web UI gets from "?token=TOKEN"). Give
	// every instance the same: forwarded queries carry it. Default: none.
	HTTPToken string
	// HTTPPeerTLS, when set, makes queries forwarded to other instances
	// use HTTPS with this client configuration: set it when the instances
	// serve Handler over TLS. Default: plain HTTP.
	HTTPPeerTLS *tls.Config
	// OnRestoreProgress, if set, receives each task's restore progress:
	// at the start, at most every second, and at the end (Done). It runs
	// in a worker's goroutine: return quickly. Restores are also logged
	// every 5 seconds with records, bytes, percent and ETA.
	OnRestoreProgress func(RestoreProgress)
}

func (c *Config) applyDefaults() {
	if c.InstanceID == "" && c.StateDir != "" {
		c.InstanceID = InstanceIDFromDir(c.StateDir)
	}
	if c.Workers == 0 {
		c.Workers = 1
	}
	if c.CommitInterval == 0 {
		c.CommitInterval = 100 * time.Millisecond
	}
	if c.CommitRecords == 0 {
		c.CommitRecords = 100_000
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 10 * time.Second
	}
	if c.TransactionTimeout == 0 {
		c.TransactionTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = DefaultCheckpointInterval
	}
	if c.CheckpointKeep == 0 {
		c.CheckpointKeep = checkpoint.DefaultKeep
	}
	c.policyDefaults()
}

// DefaultCheckpointInterval is Config.CheckpointInterval's default.
const DefaultCheckpointInterval = time.Minute

var unsafeIDChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// InstanceIDFromDir derives a static membership id from a state directory:
// its base name and a hash of its absolute path.
func InstanceIDFromDir(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	sum := sha256.Sum256([]byte(abs))
	base := unsafeIDChars.ReplaceAllString(filepath.Base(abs), "_")
	return base + "-" + hex.EncodeToString(sum[:4])
}

// Run runs the topology until ctx is cancelled (commit, close the stores,
// return nil) or a fatal error. It creates the topology's internal topics
// (changelogs, dead-letter topics) but not its sources. It is New and
// App.Run in one call, for an app that serves no HTTP endpoints.
func Run(ctx context.Context, t *Topology, cfg Config) error {
	app, err := New(t, cfg)
	if err != nil {
		return err
	}
	return app.Run(ctx)
}

// App is an application built from a topology and a configuration: Run
// runs it, Handler serves its HTTP endpoints (metrics, health, state
// queries, the web UI) while it runs.
type App struct {
	cfg  Config
	rt   runtime.Topology
	inst atomic.Pointer[runtime.Instance] // set when Run starts
	ran  atomic.Bool

	// stores are the topology's store declarations, for queries.
	stores map[string]*storeDecl
	// desc is the topology's description (GET /v1/topology).
	desc TopologyDescription
	// metrics are the app's Prometheus metrics (app_metrics.go).
	metrics *metrics.Metrics
	// failpoints are armed by EDDY_FAILPOINTS (crash tests).
	failpoints *failpoint.Set
}

// New builds the topology with cfg and returns the app, ready to Run.
// Problems found in the topology or the configuration are returned at
// once; what needs the brokers is checked by Run.
func New(t *Topology, cfg Config) (*App, error) {
	cfg.applyDefaults()
	if err := runtime.CheckEndpoint(cfg.Endpoint); err != nil {
		return nil, fmt.Errorf("eddy: invalid config: Endpoint: %w", err)
	}
	if err := cfg.checkPolicies(); err != nil {
		return nil, fmt.Errorf("eddy: invalid config: %w", err)
	}
	// Crash tests only: unset in any real run (internal/failpoint).
	fail, err := failpoint.FromEnv()
	if err != nil {
		return nil, err
	}
	rt, err := t.runtimeTopology(&cfg)
	if err != nil {
		return nil, err
	}
	return &App{cfg: cfg, rt: rt, stores: t.stores, desc: t.Describe(cfg.AppID), metrics: metrics.New(), failpoints: fail}, nil
}

// Run runs the app until ctx is cancelled (commit, close the stores,
// return nil) or a fatal error. An app runs once.
func (a *App) Run(ctx context.Context) error {
	if !a.ran.CompareAndSwap(false, true) {
		return errors.New("eddy: App.Run called twice; build a new App with New")
	}
	cfg, rt := a.cfg, a.rt
	var err error
	backend := cfg.Backend
	if backend == nil {
		pb := pebble.New(pebble.Options{Logger: cfg.Logger})
		defer pb.Close()
		backend = pb
	}
	store := cfg.CheckpointStore
	switch {
	case store != nil && cfg.CheckpointURL != "":
		return errors.New("eddy: invalid config: CheckpointURL and CheckpointStore are both set; set one")
	case cfg.CheckpointURL != "":
		if store, err = checkpoint.Open(ctx, cfg.CheckpointURL); err != nil {
			return fmt.Errorf("eddy: CheckpointURL: %w", err)
		}
	}
	rcfg := runtime.Config{
		AppID:              cfg.AppID,
		Brokers:            cfg.Brokers,
		StateDir:           cfg.StateDir,
		InstanceID:         cfg.InstanceID,
		Workers:            cfg.Workers,
		StandbyReplicas:    cfg.StandbyReplicas,
		CommitInterval:     cfg.CommitInterval,
		CommitRecords:      cfg.CommitRecords,
		MaxRecordBytes:     cfg.MaxRecordBytes,
		SessionTimeout:     cfg.SessionTimeout,
		TransactionTimeout: cfg.TransactionTimeout,
		AtLeastOnce:        cfg.Guarantee == AtLeastOnce,
		IgnoreStateOffsets: cfg.IgnoreStateOffsets,
		Backend:            backend,
		Checkpoints:        store,
		CheckpointInterval: max(cfg.CheckpointInterval, 0),
		CheckpointKeep:     cfg.CheckpointKeep,
		Logger:             cfg.Logger.With("app", cfg.AppID, "instance", cfg.InstanceID),
		ClientOpts:         cfg.KafkaOptions,
		OnRestoreProgress:  onRestoreProgress(cfg.OnRestoreProgress),
		Endpoint:           cfg.Endpoint,
		Failpoints:         a.failpoints,
		Metrics:            a.metrics,
	}
	if err := rcfg.Validate(); err != nil {
		return fmt.Errorf("eddy: invalid config: %w", err)
	}
	inst, err := runtime.New(rcfg, rt)
	if err != nil {
		return err
	}
	a.metrics.SetBackend(backend)
	defer a.metrics.SetBackend(nil)
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, cfg.AppID), 0o700); err != nil {
		return fmt.Errorf("eddy: state dir: %w", err)
	}
	if external, internal := deadLetterSources(cfg, rt); len(external)+len(internal) > 0 {
		if err := createDeadLetterTopics(ctx, &cfg, external, internal); err != nil {
			return err
		}
	}
	a.inst.Store(inst)
	return inst.Run(ctx)
}

// onRestoreProgress adapts the user's callback to the runtime's progress.
func onRestoreProgress(fn func(RestoreProgress)) func(runtime.RestoreProgress) {
	if fn == nil {
		return nil
	}
	return func(p runtime.RestoreProgress) { fn(restoreProgressOf(p)) }
}

// deadLetterSources are the sources whose records can be dead-lettered:
// the external ones when decode errors are (a repartition topic holds what
// this app's serdes wrote, so a record there that fails to decode is a bug
// that stops the app, not bad input), all of them when processing or
// production errors are.
func deadLetterSources(cfg Config, rt runtime.Topology) (external, internal []string) {
	all := cfg.OnProcessError == DeadLetter || cfg.OnProduceError == DeadLetter
	if !all && cfg.OnDecodeError != DeadLetter {
		return nil, nil
	}
	repartition := map[string]bool{}
	for _, r := range rt.Repartitions {
		repartition[r.Topic] = true
	}
	for _, sub := range rt.Subtopologies {
		for _, s := range sub.Sources {
			switch {
			case !repartition[s]:
				external = append(external, s)
			case all:
				internal = append(internal, s)
			}
		}
	}
	return external, internal
}

// createDeadLetterTopics creates the dead-letter topics of the external
// sources with their partition counts, and of the repartition topics (not
// created yet) with the broker's default.
func createDeadLetterTopics(ctx context.Context, cfg *Config, sources, repartitions []string) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, cfg.KafkaOptions...)...)
	if err != nil {
		return fmt.Errorf("eddy: admin client: %w", err)
	}
	defer cl.Close()
	parts, err := kafka.Partitions(ctx, cl, sources...)
	if err != nil {
		return fmt.Errorf("eddy: source topics: %w", err)
	}
	var specs []kafka.TopicSpec
	for _, s := range sources {
		specs = append(specs, kafka.TopicSpec{Name: DeadLetterTopic(s), Partitions: parts[s]})
	}
	for _, s := range repartitions {
		specs = append(specs, kafka.TopicSpec{Name: DeadLetterTopic(s)})
	}
	if err := kafka.CreateTopics(ctx, cl, specs...); err != nil {
		return fmt.Errorf("eddy: dead-letter topics: %w", err)
	}
	return nil
}

// Handler serves the app's HTTP endpoints (package httpapi): /healthz,
// and, as they are built, metrics, readiness, state queries and the web
// UI. Serve it on an address of your choice, e.g. with http.Server; the
// examples take --http ADDR.
func (a *App) Handler() http.Handler {
	return httpapi.New(httpapi.Options{
		Metrics:  a.metrics.Handler(),
		Status:   httpStatus{a},
		Topology: httpStatus{a},
		UI:       true,
		Queries:  httpQueries{a},
		Token:    a.cfg.HTTPToken,
		PeerTLS:  a.cfg.HTTPPeerTLS,
	})
}
