package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
)

// Run runs topo with cfg until ctx is cancelled, then commits, closes the
// tasks and returns. It creates the changelog topics it needs.
func Run(ctx context.Context, cfg Config, topo Topology) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("runtime: invalid config: %w", err)
	}
	if len(topo.Subtopologies) != 1 || len(topo.Repartitions) > 0 || len(topo.Globals) > 0 {
		return fmt.Errorf("runtime: %d sub-topologies, %d repartition topics, %d global stores: this version runs one sub-topology and no global store", len(topo.Subtopologies), len(topo.Repartitions), len(topo.Globals))
	}
	sub := topo.Subtopologies[0]
	if len(sub.Sources) == 0 {
		return errors.New("runtime: the topology has no source topic")
	}
	if len(sub.Sources) > 1 {
		// The group's assignor places each topic's partitions on its own;
		// a task needs partition p of every source on one member, which
		// takes a task-aware assignor that is not built yet.
		return fmt.Errorf("runtime: %d source topics %v: a topology reads one source topic in this version", len(sub.Sources), sub.Sources)
	}
	if err := prepareTopics(ctx, cfg, topo); err != nil {
		return err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := 0; i < cfg.Workers; i++ {
		w := newWorker(cfg, topo, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.run(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				cancel() // one worker failing stops the instance
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// prepareTopics checks that the sources exist and are co-partitioned, and
// creates the compacted changelog topics with the sources' partition count.
func prepareTopics(ctx context.Context, cfg Config, topo Topology) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, cfg.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("runtime: admin client: %w", err)
	}
	defer cl.Close()
	sub := topo.Subtopologies[0]
	parts, err := kafka.Partitions(ctx, cl, sub.Sources...)
	if err != nil {
		return fmt.Errorf("runtime: source topics: %w", err)
	}
	n := parts[sub.Sources[0]]
	for _, s := range sub.Sources[1:] {
		if parts[s] != n {
			return fmt.Errorf("runtime: source topics %s (%d partitions) and %s (%d partitions) are not co-partitioned; give them the same partition count",
				sub.Sources[0], n, s, parts[s])
		}
	}
	var specs []kafka.TopicSpec
	for _, store := range sub.Stores {
		specs = append(specs, kafka.TopicSpec{Name: ChangelogTopic(cfg.AppID, store.Name), Partitions: n, Compacted: true})
	}
	if len(specs) == 0 {
		return nil
	}
	if err := kafka.CreateTopics(ctx, cl, specs...); err != nil {
		return fmt.Errorf("runtime: changelog topics: %w", err)
	}
	clParts, err := kafka.Partitions(ctx, cl, specsNames(specs)...)
	if err != nil {
		return fmt.Errorf("runtime: changelog topics: %w", err)
	}
	for _, s := range specs {
		if clParts[s.Name] != n {
			return fmt.Errorf("runtime: changelog %s has %d partitions, the sources %d; delete it or restore the source partition count",
				s.Name, clParts[s.Name], n)
		}
	}
	return nil
}

func specsNames(specs []kafka.TopicSpec) []string {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return names
}
