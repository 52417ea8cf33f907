package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/state"
)

// globalPollInterval is how often the global stores catch up with their
// topics once running: the latency of a global table update.
const globalPollInterval = 500 * time.Millisecond

// globals are the instance's global stores (Kafka Streams' global state
// stores): each holds its whole topic, every partition, in its own
// database under StateDir/AppID/global/<name>, with the next offset per
// partition stored beside the data, so a restart reads only what is new.
// They are filled before the workers start and then follow their topics
// from one goroutine; tasks read them concurrently.
type globals struct {
	cfg    Config
	log    *slog.Logger
	stores map[string]*globalStore
	list   []*globalStore
}

// globalStore is one global store. mu serialises every use of db, the
// reads of several workers' tasks and the applies of the updating
// goroutine: a state.DB is used by one goroutine at a time (Pebble's Get
// builds its lookup key in a buffer of the DB).
type globalStore struct {
	spec    GlobalStore
	mu      sync.Mutex
	db      state.DB
	offsets state.Offsets
}

// Get implements GlobalReader.
func (g *globalStore) Get(key []byte) ([]byte, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok, err := g.db.Get(g.spec.Name, key)
	if err != nil {
		// The store's trouble, never the record's (error policies).
		return nil, false, fmt.Errorf("eddy: global store %s: %w: %w", g.spec.Name, state.ErrRead, err)
	}
	return v, ok, nil
}

// openGlobals opens the global stores and brings each up to its topic's
// last stable offset.
func openGlobals(ctx context.Context, cfg Config, specs []GlobalStore) (*globals, error) {
	g := &globals{cfg: cfg, log: cfg.Logger, stores: make(map[string]*globalStore)}
	for _, spec := range specs {
		db, err := openGlobalDB(cfg, spec)
		if err != nil {
			g.close()
			return nil, err
		}
		offsets, err := db.Offsets()
		if err != nil {
			db.Close()
			g.close()
			return nil, fmt.Errorf("eddy: global store %s: %w", spec.Name, err)
		}
		gs := &globalStore{spec: spec, db: db, offsets: offsets}
		g.stores[spec.Name] = gs
		g.list = append(g.list, gs)
	}
	if err := g.catchUp(ctx, true); err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

// openGlobalDB opens a global store's database, rebuilding it from its
// topic when it is corrupt.
func openGlobalDB(cfg Config, spec GlobalStore) (state.DB, error) {
	dir := filepath.Join(cfg.StateDir, cfg.AppID, "global", spec.Name)
	db, err := cfg.Backend.Open(dir)
	if errors.Is(err, state.ErrCorrupt) {
		cfg.Logger.Warn("global store is corrupt; rebuilding it from its topic", "store", spec.Name, "err", err)
		if err = cfg.Backend.Destroy(dir); err == nil {
			db, err = cfg.Backend.Open(dir)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("eddy: global store %s: open: %w", spec.Name, err)
	}
	return db, nil
}

// store returns the named global store.
func (g *globals) store(name string) (GlobalReader, error) {
	if g != nil {
		if s := g.stores[name]; s != nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("eddy: global store %q is not declared in the topology", name)
}

// run keeps the stores up to date until ctx is done. A failure is logged
// and retried at the next poll: the stores keep their last content.
func (g *globals) run(ctx context.Context) {
	t := time.NewTicker(globalPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := g.catchUp(ctx, false); err != nil && ctx.Err() == nil {
			g.log.Warn("global stores: catching up failed; retrying", "err", err)
		}
	}
}

// catchUp reads every global topic from the stored offsets to its last
// stable offset and applies it, batch by batch, each batch with the
// offsets it reaches.
func (g *globals) catchUp(ctx context.Context, first bool) error {
	if len(g.list) == 0 {
		return nil
	}
	opts := append(append(kafka.RetryOptions(), kgo.SeedBrokers(g.cfg.Brokers...)), g.cfg.ClientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("eddy: global stores: client: %w", err)
	}
	defer cl.Close()
	topics := make([]string, len(g.list))
	for i, s := range g.list {
		topics[i] = s.spec.Topic
	}
	if first {
		// A missing topic is a configuration error: say so instead of
		// waiting for it.
		if _, err := kafka.Partitions(ctx, cl, topics...); err != nil {
			return fmt.Errorf("eddy: global tables: %w", err)
		}
	}
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("eddy: global stores: list offsets: %w", err)
	}
	for _, s := range g.list {
		if err := s.catchUp(ctx, opts, ends, first, g.log); err != nil {
			return err
		}
	}
	return nil
}

func (s *globalStore) catchUp(ctx context.Context, opts []kgo.Opt, ends kadm.ListedOffsets, log bool, logger *slog.Logger) error {
	spans := map[int32]kafka.Span{}
	var total int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Topic != s.spec.Topic {
			return
		}
		from := s.offsets.Input[state.TopicPartition{Topic: o.Topic, Partition: o.Partition}]
		if from < o.Offset {
			spans[o.Partition] = kafka.Span{From: from, End: o.Offset}
			total += o.Offset - from
		}
	})
	if len(spans) == 0 {
		return nil
	}
	if log {
		logger.Info("global store: loading", "store", s.spec.Name, "topic", s.spec.Topic, "offsets", total)
	}
	batch := state.Batch{Offsets: s.offsets.Clone()}
	flush := func() error {
		s.mu.Lock()
		err := s.db.Apply(&batch)
		s.mu.Unlock()
		if err != nil {
			return fmt.Errorf("eddy: global store %s: apply: %w", s.spec.Name, err)
		}
		s.offsets = batch.Offsets.Clone()
		clear(batch.Writes)
		batch.Writes = batch.Writes[:0]
		return nil
	}
	err := kafka.ReadCommitted(ctx, opts, map[string]map[int32]kafka.Span{s.spec.Topic: spans}, func(r *kgo.Record) error {
		batch.Writes = append(batch.Writes, state.Write{Store: s.spec.Name, Key: r.Key, Value: r.Value, Delete: r.Value == nil})
		batch.Offsets.Input[state.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = r.Offset + 1
		if len(batch.Writes) >= restoreBatch {
			return flush()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("eddy: global store %s: read %s: %w", s.spec.Name, s.spec.Topic, err)
	}
	// Read to the ends: what lies before them is applied or not committed.
	for p, sp := range spans {
		batch.Offsets.Input[state.TopicPartition{Topic: s.spec.Topic, Partition: p}] = sp.End
	}
	return flush()
}

func (g *globals) close() {
	for _, s := range g.list {
		s.mu.Lock()
		s.db.Close()
		s.mu.Unlock()
	}
}
