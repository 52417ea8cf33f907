package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// repartitionPurge deletes the records of repartition topics that committed
// transactions consumed, as Kafka Streams does after its commits: a
// repartition topic only carries records in transit between
// sub-topologies, and without the purge it would keep them for the
// topic's retention (a week by default), on the brokers' disks.
//
// The workers hand it their tasks' committed input offsets after a commit
// (offer, at most every interval per worker, off the per-record path); its
// own goroutine (run) deletes up to them with its own client, outside any
// transaction. Deleting up to a committed offset is safe: whoever owns the
// partition next starts at or after it (the group's committed offset and
// the offsets in the state both are at least that, §6.3).
type repartitionPurge struct {
	interval time.Duration
	topics   map[string]bool
	log      *slog.Logger
	newAdmin func() (*kgo.Client, error)

	mu sync.Mutex
	// pending are the highest committed offsets offered, per topic and
	// partition; deleted what was deleted up to.
	pending map[string]map[int32]int64
	deleted map[string]map[int32]int64
	offered map[string]time.Time // by worker (member id): when it last offered
	wake    chan struct{}
	// failures counts consecutive failed rounds, to log the first and then
	// every tenth.
	failures int
}

// newRepartitionPurge returns a purge of topics every interval, or nil
// (which does nothing) when there is nothing to purge or interval is not
// positive.
func newRepartitionPurge(cfg Config, topics []Repartition) *repartitionPurge {
	if cfg.RepartitionPurgeInterval <= 0 || len(topics) == 0 {
		return nil
	}
	p := &repartitionPurge{
		interval: cfg.RepartitionPurgeInterval,
		topics:   make(map[string]bool, len(topics)),
		log:      cfg.Logger,
		newAdmin: func() (*kgo.Client, error) {
			return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, cfg.ClientOpts...)...)
		},
		pending: make(map[string]map[int32]int64),
		deleted: make(map[string]map[int32]int64),
		offered: make(map[string]time.Time),
		wake:    make(chan struct{}, 1),
	}
	for _, r := range topics {
		p.topics[r.Topic] = true
	}
	return p
}

// offer records the committed input offsets of worker's tasks that read
// repartition topics, at most every interval per worker. The worker calls
// it after each commit, on its own goroutine; it never blocks on the
// brokers.
func (p *repartitionPurge) offer(worker string, tasks map[TaskID]*task) {
	if p == nil {
		return
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Sub(p.offered[worker]) < p.interval {
		return
	}
	p.offered[worker] = now
	for _, t := range tasks {
		for _, tp := range t.sources {
			if !p.topics[tp.Topic] {
				continue
			}
			off := t.Input(tp)
			if off <= 0 {
				continue
			}
			parts := p.pending[tp.Topic]
			if parts == nil {
				parts = make(map[int32]int64)
				p.pending[tp.Topic] = parts
			}
			parts[tp.Partition] = max(parts[tp.Partition], off)
		}
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run deletes what offer recorded until ctx ends.
func (p *repartitionPurge) run(ctx context.Context) {
	if p == nil {
		return
	}
	var adm *kadm.Client
	for {
		select {
		case <-ctx.Done():
			if adm != nil {
				adm.Close()
			}
			return
		case <-p.wake:
		}
		if adm == nil {
			cl, err := p.newAdmin()
			if err != nil {
				p.log.Warn("repartition purge: no admin client; repartition records are kept", "err", err)
				return
			}
			adm = kadm.NewClient(cl)
		}
		p.purge(ctx, adm)
	}
}

// purge deletes the records below the pending offsets that were not
// deleted yet.
func (p *repartitionPurge) purge(ctx context.Context, adm *kadm.Client) {
	p.mu.Lock()
	var todo kadm.Offsets
	for topic, parts := range p.pending {
		for part, off := range parts {
			if off > p.deleted[topic][part] {
				todo.Add(kadm.Offset{Topic: topic, Partition: part, At: off})
			}
		}
	}
	p.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	resps, err := adm.DeleteRecords(ctx, todo)
	if ctx.Err() != nil {
		return // stopping: the next run purges
	}
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	p.mu.Lock()
	resps.Each(func(r kadm.DeleteRecordsResponse) {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("%s/%d: %w", r.Topic, r.Partition, r.Err))
			return
		}
		if p.deleted[r.Topic] == nil {
			p.deleted[r.Topic] = make(map[int32]int64)
		}
		if o, ok := todo.Lookup(r.Topic, r.Partition); ok {
			p.deleted[r.Topic][r.Partition] = max(p.deleted[r.Topic][r.Partition], o.At)
		}
	})
	if len(errs) == 0 {
		p.failures = 0
		p.mu.Unlock()
		return
	}
	p.failures++
	failures := p.failures
	p.mu.Unlock()
	if failures%10 == 1 {
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		p.log.Warn("repartition purge failed; the consumed records stay until a purge succeeds (with ACLs on, the app's principal needs DELETE on its <app-id>- topics: eddy acls)",
			"err", errors.Join(errs...), "failed_rounds", failures)
	}
}
