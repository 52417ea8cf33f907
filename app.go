package eddy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"

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

// Run runs the topology until ctx is cancelled (commit, close the stores,
// return nil), a bounded run ends (Config.StopAtEndOffsets; likewise nil)
// or a fatal error. It creates the topology's internal topics
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
	// repartitions are the topology's repartition topics and the
	// operators they carry, for the startup check (orphans.go).
	repartitions []repartitionOrigin
	// metrics are the app's Prometheus metrics (app_metrics.go).
	metrics *metrics.Metrics
	// failpoints are armed by EDDY_FAILPOINTS (crash tests).
	failpoints *failpoint.Set
	// sinkChecks check the sinks' registry serdes at start (sinkcheck.go).
	sinkChecks []sinkCheck
}

// New builds the topology with cfg and returns the app, ready to Run.
// Every problem of the configuration (each naming the field and a valid
// value) and of the topology is returned at once; what needs the brokers
// or the checkpoint store is checked by Run.
func New(t *Topology, cfg Config) (*App, error) {
	cfg.applyDefaults()
	cfgErr := cfg.validate()
	rt, topoErr := t.runtimeTopology(&cfg)
	if err := errors.Join(cfgErr, topoErr); err != nil {
		return nil, err
	}
	// Crash tests only: unset in any real run (internal/failpoint).
	fail, err := failpoint.FromEnv()
	if err != nil {
		return nil, err
	}
	if t.sinkless() {
		cfg.Logger.Warn("the topology writes no topic and keeps no store: its results go nowhere; add eddy.To (or a store to query)")
	}
	return &App{cfg: cfg, rt: rt, stores: t.stores, desc: t.Describe(cfg.AppID), repartitions: t.repartitionOrigins(cfg.AppID), metrics: metrics.New(), failpoints: fail, sinkChecks: t.sinkChecks}, nil
}

// Run runs the app until ctx is cancelled (commit, close the stores,
// return nil), a bounded run ends (Config.StopAtEndOffsets; likewise nil)
// or a fatal error. An app runs once.
func (a *App) Run(ctx context.Context) error {
	if !a.ran.CompareAndSwap(false, true) {
		return errors.New("eddy: App.Run called twice; build a new App with New")
	}
	cfg, rt := a.cfg, a.rt
	var err error
	// The registry serdes' checks first, before the brokers' watch
	// starts its BrokerTimeout: a registry slow to answer is not a broker
	// that cannot be reached.
	if err := checkSinkSerdes(ctx, cfg.AppID, a.sinkChecks); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return nil // stopped during the checks
	}
	// Every client of the app reports its connection attempts to reach,
	// which warns while no broker answers and ends ctx after
	// BrokerTimeout.
	log := cfg.Logger.With("app", cfg.AppID, "instance", cfg.InstanceID)
	reach := kafka.NewReach(cfg.Brokers, cfg.BrokerTimeout, log)
	stop := ctx // the caller's: its end is a stop, not an error
	ctx, stopWatch := reach.Watch(ctx)
	defer stopWatch()
	clientOpts := slices.Concat(cfg.KafkaOptions, []kgo.Opt{reach.Opt()})
	// StateMemory: half for the write buffers' caches, half for the
	// default backend's block cache and memtables (docs/design.md §2.1).
	caches := state.NewCacheBudget(cfg.StateMemory / 2)
	backend := cfg.Backend
	if backend == nil {
		pb := pebble.New(pebble.Options{Logger: cfg.Logger, CacheSize: cfg.StateMemory - cfg.StateMemory/2})
		defer pb.Close()
		backend = pb
	}
	store := cfg.CheckpointStore
	if cfg.CheckpointURL != "" {
		if store, err = checkpoint.Open(ctx, cfg.CheckpointURL); err != nil {
			return fmt.Errorf("eddy: CheckpointURL: %w", err)
		}
	}

	rcfg := runtime.Config{
		AppID:                    cfg.AppID,
		Brokers:                  cfg.Brokers,
		StateDir:                 cfg.StateDir,
		InstanceID:               cfg.InstanceID,
		Workers:                  cfg.Workers,
		StandbyReplicas:          cfg.StandbyReplicas,
		CommitInterval:           cfg.CommitInterval,
		CommitRecords:            cfg.CommitRecords,
		MaxTaskIdle:              cfg.MaxTaskIdle,
		Bounded:                  cfg.StopAtEndOffsets,
		MaxRecordBytes:           cfg.MaxRecordBytes,
		SessionTimeout:           cfg.SessionTimeout,
		TransactionTimeout:       cfg.TransactionTimeout,
		AtLeastOnce:              cfg.Guarantee == AtLeastOnce,
		IgnoreStateOffsets:       cfg.IgnoreStateOffsets,
		Backend:                  backend,
		StateCache:               caches,
		TableCacheBytes:          max(cfg.TableCacheBytes, 0),
		Checkpoints:              store,
		CheckpointInterval:       max(cfg.CheckpointInterval, 0),
		CheckpointKeep:           cfg.CheckpointKeep,
		RepartitionPurgeInterval: max(cfg.RepartitionPurgeInterval, 0),
		Logger:                   log,
		ClientOpts:               clientOpts,
		OnRestoreProgress:        onRestoreProgress(cfg.OnRestoreProgress),
		Endpoint:                 cfg.Endpoint,
		Failpoints:               a.failpoints,
		Metrics:                  a.metrics,

		// The partition guard and the partitioner (docs/partitioners.md).
		Partitioner:         cfg.Partitioner.kafka(),
		PartitionCheckEvery: max(cfg.PartitionCheckEvery, 0),
		FailOnMisplaced:     cfg.OnMisplacedRecord == FailMisplaced,
	}
	if deadLetters := cfg.OnDecodeError == DeadLetter || cfg.OnProcessError == DeadLetter || cfg.OnProduceError == DeadLetter; deadLetters {
		// The topics of source patterns are known once Run lists them.
		rcfg.PrepareSources = func(ctx context.Context, topics []string) error {
			return createDeadLetterTopics(ctx, cfg.Brokers, clientOpts, topics, nil)
		}
	}
	inst, err := runtime.New(rcfg, rt)
	if err != nil {
		return err
	}
	a.metrics.SetBackend(backend)
	defer a.metrics.SetBackend(nil)
	a.metrics.SetStateCache(caches)
	defer a.metrics.SetStateCache(nil)
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, cfg.AppID), 0o700); err != nil {
		return fmt.Errorf("eddy: state dir: %w", err)
	}
	// Before the runtime creates the repartition topics: a repartition
	// topic the topology lost, still holding records, stops the app.
	if err := checkTopologyChangeOnStart(ctx, cfg, clientOpts, a.repartitions, log); err != nil {
		return runEnd(stop, reach, err)
	}
	if external, internal := deadLetterSources(cfg, rt); len(external)+len(internal) > 0 {
		if err := createDeadLetterTopics(ctx, cfg.Brokers, clientOpts, external, internal); err != nil {
			return runEnd(stop, reach, err)
		}
	}
	a.inst.Store(inst)
	return runEnd(stop, reach, inst.Run(ctx))
}

// runEnd is Run's result for err: reach's error if it gave up waiting for
// a broker (what stopped the app, whatever err its end caused); nil if
// the caller stopped the app (a start cut short by a stop is a stop, as
// Run's doc says: a startup step's "context canceled" is not an error);
// else err.
func runEnd(stop context.Context, reach *kafka.Reach, err error) error {
	if rerr := reach.Err(); rerr != nil {
		return fmt.Errorf("eddy: Config.BrokerTimeout passed: %w", rerr)
	}
	if err != nil && stop.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
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
func createDeadLetterTopics(ctx context.Context, brokers []string, opts []kgo.Opt, sources, repartitions []string) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
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
		Logger:   a.cfg.Logger.With("app", a.cfg.AppID, "instance", a.cfg.InstanceID),
	})
}
