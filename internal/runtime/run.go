package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/metrics"
)

// Instance is one process's share of an application: its workers, its
// standbys and its global stores. New checks the configuration and the
// topology; Run runs them. The methods that report on an instance (for
// metrics, health and queries) are safe to call while it runs.
type Instance struct {
	cfg  Config
	topo Topology
	plan *plan
	// queries are the tasks that interactive queries may read, and the
	// group's routes (query.go).
	queries *queries

	// What Status reads (status.go): each worker's board, the standbys,
	// the phase (phaseStarting, phaseRunning, phaseStopped) and when Run
	// started.
	boards  []*workerBoard
	sb      atomic.Pointer[standbys]
	phase   atomic.Int32
	started atomic.Pointer[time.Time]
}

// Phases of an instance, for Status.
const (
	phaseStarting int32 = iota
	phaseRunning
	phaseStopped
)

// New checks topo and returns an instance ready to Run. cfg is trusted:
// eddy.New validated it.
func New(cfg Config, topo Topology) (*Instance, error) {
	if cfg.Bounded {
		if err := checkBounded(topo); err != nil {
			return nil, err
		}
		topo = withEndStores(topo)
	}
	p, err := newPlan(cfg.AppID, topo)
	if err != nil {
		return nil, err
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	in := &Instance{cfg: cfg, topo: topo, plan: p, queries: newQueries()}
	for i := 0; i < cfg.Workers; i++ {
		in.boards = append(in.boards, newWorkerBoard(i, memberName(cfg, i)))
	}
	return in, nil
}

// Run runs topo with cfg until ctx is cancelled, then commits, closes the
// tasks and returns. It creates the changelog and repartition topics it
// needs; the external source topics must exist.
func Run(ctx context.Context, cfg Config, topo Topology) error {
	in, err := New(cfg, topo)
	if err != nil {
		return err
	}
	return in.Run(ctx)
}

// Run runs the instance until ctx is cancelled, or a bounded run's every
// task has ended (Config.Bounded), then commits, closes the tasks and
// returns. An instance runs once.
func (in *Instance) Run(ctx context.Context) error {
	now := time.Now()
	in.started.Store(&now)
	defer in.phase.Store(phaseStopped)
	if !in.topo.hasPatterns() {
		return in.runPlan(ctx, in.topo, in.plan)
	}
	return in.runPatterns(ctx)
}

// runPatterns runs a topology with source patterns: one plan after another,
// each with the topics the patterns matched when it started. A watcher
// lists the cluster's topics every PatternRefresh; when the matching set
// changes it ends the plan's run as a stop does (the workers commit and
// close their tasks), and the next plan reads the new set. Kafka Streams
// rebalances likewise when a topic starts matching. A task keeps its state
// and its offsets of the topics it read before: its offsets are per topic
// partition, and a new topic is read from its start (no committed offset).
func (in *Instance) runPatterns(ctx context.Context) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(in.cfg.Brokers...)}, in.cfg.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("eddy: admin client: %w", err)
	}
	defer cl.Close()
	for {
		topics, err := listTopics(ctx, cl)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		topo := resolvePatterns(in.cfg.AppID, in.topo, topics)
		p, err := newPlan(in.cfg.AppID, topo)
		if err != nil {
			return err
		}
		matched := patternTopics(in.cfg.AppID, &in.topo, topics)
		in.cfg.Logger.Info("source patterns resolved", "topics", matched)
		if prep := in.cfg.PrepareSources; prep != nil && len(matched) > 0 {
			if err := prep(ctx, matched); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		runCtx, stop := context.WithCancel(ctx)
		changed := make(chan bool, 1)
		go func() {
			c := in.watchPatterns(runCtx, cl, matched)
			if c {
				stop()
			}
			changed <- c
		}()
		err = in.runPlan(runCtx, topo, p)
		stop()
		if !<-changed || err != nil {
			return err // stopped, or failed
		}
	}
}

// watchPatterns lists the cluster's topics every PatternRefresh until ctx
// ends, and reports true when the topics the patterns match are no longer
// matched. A failed listing is logged and retried at the next tick.
func (in *Instance) watchPatterns(ctx context.Context, cl *kgo.Client, matched []string) bool {
	tick := time.NewTicker(PatternRefresh)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
		topics, err := listTopics(ctx, cl)
		if err != nil {
			if ctx.Err() == nil {
				in.cfg.Logger.Warn("could not list the topics for the source patterns; retrying", "err", err)
			}
			continue
		}
		if now := patternTopics(in.cfg.AppID, &in.topo, topics); !slices.Equal(now, matched) {
			in.cfg.Logger.Info("the topics matching the source patterns changed; committing and starting again with them",
				"before", matched, "now", now)
			return true
		}
	}
}

// runPlan runs topo, planned as p, until ctx is cancelled.
func (in *Instance) runPlan(ctx context.Context, topo Topology, p *plan) error {
	cfg := in.cfg
	if err := prepareTopics(ctx, cfg, p, topo.Repartitions, topo.Sinks); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting: nothing ran, nothing to commit
		}
		return err
	}
	// Global stores are loaded before any task runs, so a join never
	// misses a row that was in the topic when the app started.
	g, err := openGlobals(ctx, cfg, topo.Globals)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer g.close()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var ckpt *checkpoints
	if cfg.Checkpoints != nil {
		ckpt = newCheckpoints(cfg)
	}
	globalsDone := make(chan struct{})
	go func() {
		defer close(globalsDone)
		g.run(ctx)
	}()
	// Every instance keeps the standbys its assignments give it, whatever
	// its own StandbyReplicas: the leader's setting places them.
	sb := newStandbys(cfg, p)
	in.sb.Store(sb)
	standbysDone := make(chan struct{})
	go func() {
		defer close(standbysDone)
		sb.run(ctx)
	}()
	// The topics whose misplaced records were logged: once per instance.
	misplacedLogged := &loggedTopics{}
	purge := newRepartitionPurge(cfg, topo.Repartitions)
	purgeDone := make(chan struct{})
	go func() {
		defer close(purgeDone)
		purge.run(ctx)
	}()
	for i := 0; i < cfg.Workers; i++ {
		w := newWorker(cfg, p, i)
		w.globals, w.standbys = g, sb
		w.guard = newPartitionGuard(cfg, misplacedLogged, w.log)
		w.board = in.boards[i]
		w.ckpt = ckpt
		w.queries = in.queries
		w.purge = purge
		wg.Add(1)
		go func() {
			// Not deferred: a panic that escapes w.run (a state.Fatal,
			// which must crash the process) would run a deferred Done
			// while it unwinds, and Run could return before the process
			// dies, to a caller that logs and goes on.
			if err := w.run(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				cancel() // one worker failing stops the instance
			}
			wg.Done()
		}()
	}
	in.phase.Store(phaseRunning)
	endedDone := make(chan struct{})
	go func() {
		defer close(endedDone)
		if cfg.Bounded && in.watchEnded(ctx, p.taskCount) {
			cfg.Logger.Info("bounded run: every task's input ended; stopping")
			cancel() // the workers commit and close, and Run returns nil
		}
	}()
	wg.Wait()
	if ckpt != nil {
		ckpt.close() // the final checkpoints' uploads
	}
	cancel() // the workers are done: stop the global stores and standbys too
	<-globalsDone
	<-standbysDone
	<-purgeDone
	<-endedDone
	return errors.Join(errs...)
}

// prepareTopics creates the repartition topics, checks that the sources of
// each sub-topology are co-partitioned (task p reads partition p of each),
// and creates each sub-topology's changelogs with its partition count.
// Every problem is reported at once, each naming the topics and the fix.
func prepareTopics(ctx context.Context, cfg Config, p *plan, repartitions []Repartition, sinks []string) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, cfg.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("eddy: admin client: %w", err)
	}
	defer cl.Close()

	internal := make(map[string]bool, len(repartitions))
	var errs []error
	for _, r := range repartitions {
		switch {
		case internal[r.Topic]:
			errs = append(errs, fmt.Errorf("eddy: repartition topic %s is declared twice", r.Topic))
		case r.Partitions < 0:
			errs = append(errs, fmt.Errorf("eddy: repartition topic %s: %d partitions; use 0 (as many as the sources) or more", r.Topic, r.Partitions))
		case slices.ContainsFunc(r.Writers, func(w int) bool { return w < 0 || w >= len(p.subs) }):
			errs = append(errs, fmt.Errorf("eddy: repartition topic %s: writers %v: the topology has sub-topologies 0 to %d", r.Topic, r.Writers, len(p.subs)-1))
		}
		internal[r.Topic] = true
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var external []string
	for _, s := range p.sources {
		if !internal[s] {
			external = append(external, s)
		}
	}
	parts, err := kafka.Partitions(ctx, cl, external...)
	if err != nil {
		return fmt.Errorf("eddy: source topics: %w; create them before starting the application", err)
	}
	if len(sinks) > 0 {
		if _, err := kafka.Partitions(ctx, cl, sinks...); err != nil {
			return fmt.Errorf("eddy: output topics: %w; create them before starting the application (eddy creates only its internal topics)", err)
		}
	}

	if len(repartitions) > 0 {
		// Sized as Kafka Streams sizes them (repartition.go).
		want, fromWriters, err := repartitionCounts(p, repartitions, parts)
		if err != nil {
			return err
		}
		specs := make([]kafka.TopicSpec, len(repartitions))
		names := make([]string, len(repartitions))
		for i, r := range repartitions {
			specs[i] = kafka.TopicSpec{Name: r.Topic, Partitions: want[r.Topic]}
			names[i] = r.Topic
		}
		if err := kafka.CreateTopics(ctx, cl, specs...); err != nil {
			return fmt.Errorf("eddy: repartition topics: %w", err)
		}
		got, err := kafka.Partitions(ctx, cl, names...)
		if err != nil {
			return fmt.Errorf("eddy: repartition topics: %w", err)
		}
		for _, s := range specs {
			switch {
			case got[s.Name] == s.Partitions:
			case fromWriters[s.Name]:
				// Only parallelism depends on this count: keep the
				// topic (the co-partitioning check below still applies).
				cfg.Logger.Info("repartition topic exists with another partition count; keeping it",
					"topic", s.Name, "partitions", got[s.Name], "sized_now", s.Partitions)
			default:
				errs = append(errs, fmt.Errorf("eddy: repartition topic %s has %d partitions, the topology wants %d; delete it (it holds only data in transit between sub-topologies) or set its partition count in the topology",
					s.Name, got[s.Name], s.Partitions))
			}
			parts[s.Name] = got[s.Name]
		}
	}

	var specs []kafka.TopicSpec
	if cfg.Bounded {
		planEnds(p, repartitions, parts)
		// One partition suffices (a record per task); a topic that
		// exists with more works as well: its readers read them all.
		if err := kafka.CreateTopics(ctx, cl, kafka.TopicSpec{Name: EndedTopic(cfg.AppID), Partitions: 1, Compacted: true}); err != nil {
			return fmt.Errorf("eddy: the ended topic of a bounded run: %w", err)
		}
	}
	for _, sub := range p.subs {
		if len(sub.Sources) == 0 {
			continue // a pattern that matches no topic yet: no task, no changelog
		}
		n := parts[sub.Sources[0]]
		agree := true
		for _, src := range sub.Sources[1:] {
			if parts[src] != n {
				agree = false
				errs = append(errs, fmt.Errorf("eddy: sub-topology %d reads %s (%d partitions) and %s (%d partitions): they are not co-partitioned; give them the same partition count (or repartition one of them)",
					sub.index, sub.Sources[0], n, src, parts[src]))
			}
		}
		keyed := 0
		for _, src := range sub.Sources {
			if !slices.Contains(sub.Addressed, src) {
				keyed++
			}
		}
		if agree && keyed > 1 {
			p.subs[sub.index].copartitioned = n
		}
		for i, store := range sub.Stores {
			specs = append(specs, changelogSpec(sub.changelogs[i], n, store.Retention))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if len(specs) == 0 {
		return nil
	}
	if err := kafka.CreateTopics(ctx, cl, specs...); err != nil {
		return fmt.Errorf("eddy: changelog topics: %w", err)
	}
	clParts, err := kafka.Partitions(ctx, cl, specsNames(specs)...)
	if err != nil {
		return fmt.Errorf("eddy: changelog topics: %w", err)
	}
	for _, s := range specs {
		if clParts[s.Name] != s.Partitions {
			errs = append(errs, fmt.Errorf("eddy: changelog %s has %d partitions, its sources %d; delete it (the state is rebuilt from the sources only if they are complete) or restore the source partition count",
				s.Name, clParts[s.Name], s.Partitions))
		}
	}
	return errors.Join(errs...)
}

// changelogSpec is a store's changelog topic: compacted, and for a store
// with a retention also deleted by time, retention.ms being the store's
// retention plus a day (Kafka Streams' windowstore.changelog.additional.retention.ms),
// so that nothing a restore still needs has expired. A topic that exists
// keeps its configs.
func changelogSpec(name string, partitions int32, retention time.Duration) kafka.TopicSpec {
	spec := kafka.TopicSpec{Name: name, Partitions: partitions, Compacted: true}
	if retention > 0 {
		spec.Configs = map[string]string{
			"cleanup.policy": "compact,delete",
			"retention.ms":   strconv.FormatInt((retention + changelogExtraRetention).Milliseconds(), 10),
		}
	}
	return spec
}

// changelogExtraRetention is how much longer than its store a changelog
// with a retention keeps records.
const changelogExtraRetention = 24 * time.Hour

func specsNames(specs []kafka.TopicSpec) []string {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return names
}
