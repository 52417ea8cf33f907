package eddy

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/eddy-streams/eddy/state"
)

// Processor is the low-level API: one instance per task processes that
// task's records one at a time, with access to the task's state stores, and
// forwards any number of records downstream.
type Processor[KIn, VIn, KOut, VOut any] interface {
	// Init is called once per task before the first record; keep ctx to
	// forward records and open stores.
	Init(ctx *ProcessorContext[KOut, VOut]) error
	// Process handles one record. An error stops the app; the transaction
	// that held the record is aborted, so the record is processed again
	// after a restart.
	Process(rec Record[KIn, VIn]) error
	// Close releases what Init acquired.
	Close() error
}

// ProcessorContext is a processor's access to its task.
type ProcessorContext[K, V any] struct {
	b      *taskBuild
	out    *emitter[K, V]
	name   string
	stores []string // the stores passed to Process for this processor
}

// StreamTime is the task's stream time: the largest record timestamp it has
// seen (ms since the epoch), restored with the state after a restart.
func (c *ProcessorContext[K, V]) StreamTime() int64 { return c.b.tc.StreamTime() }

// Forward sends rec to the processor's children, synchronously.
func (c *ProcessorContext[K, V]) Forward(rec Record[K, V]) error { return c.out.emit(rec) }

// TaskID names the task, as "<subtopology>_<partition>".
func (c *ProcessorContext[K, V]) TaskID() string { return c.b.tc.ID().String() }

// Partition is the input partition the task processes: the partition of
// every record it reads (its sources are co-partitioned).
func (c *ProcessorContext[K, V]) Partition() int32 { return c.b.tc.ID().Partition }

// Topic is the topic of the input record being processed (after a
// repartition, the internal "<app-id>-<name>-repartition" topic), or ""
// in a punctuator, which runs with no input record.
func (c *ProcessorContext[K, V]) Topic() string {
	if r := c.b.current; r != nil {
		return r.Topic
	}
	return ""
}

// Offset is the offset in Topic of the input record being processed, or -1
// in a punctuator.
func (c *ProcessorContext[K, V]) Offset() int64 {
	if r := c.b.current; r != nil {
		return r.Offset
	}
	return -1
}

// WallClock is the system time in ms since the Unix epoch, read once per
// poll (or punctuation) rather than per record, as Kafka Streams caches it;
// the records of one poll see the same value.
func (c *ProcessorContext[K, V]) WallClock() int64 { return c.b.tc.WallClock() }

// Logger carries the app, instance and task attributes.
func (c *ProcessorContext[K, V]) Logger() *slog.Logger { return c.b.tc.Logger() }

func (c *ProcessorContext[K, V]) openStore(name string) (*state.StoreBuffer, error) {
	if !slices.Contains(c.stores, name) {
		return nil, fmt.Errorf("eddy: processor %s opens store %q, which was not passed to eddy.Process for it", c.name, name)
	}
	return c.b.tc.Store(name)
}

// storeOpener is what a store spec needs from a processor context.
type storeOpener interface {
	openStore(name string) (*state.StoreBuffer, error)
	task() *taskBuild
}

func (c *ProcessorContext[K, V]) task() *taskBuild { return c.b }

// Process adds a processor after s. newProcessor is called once per task.
// stores are the state stores the processor uses (declared with
// NewKeyValueStoreSpec); each is logged to its changelog topic.
func Process[KIn, VIn, KOut, VOut any](s Stream[KIn, VIn], name string, newProcessor func() Processor[KIn, VIn, KOut, VOut], stores ...StoreSpec) Stream[KOut, VOut] {
	names := make([]string, len(stores))
	for i, st := range stores {
		names[i] = st.StoreName()
	}
	out := attach(s, "process-"+name, true, func(b *taskBuild, out *emitter[KOut, VOut]) receiver[KIn, VIn] {
		p := newProcessor()
		ctx := &ProcessorContext[KOut, VOut]{b: b, out: out, name: name, stores: names}
		// Init runs once the whole task is built (so a punctuator may
		// forward to any child); Close runs if Init succeeded.
		b.inits = append(b.inits, func() error {
			if err := p.Init(ctx); err != nil {
				return fmt.Errorf("eddy: processor %s: init: %w", name, err)
			}
			b.closers = append(b.closers, p.Close)
			return nil
		})
		return receiverFunc[KIn, VIn](p.Process)
	})
	for i, st := range stores {
		s.t.addStore(names[i], out.n, storeRetention(st), st)
	}
	return out
}

// storeRetention is the retention of a window or session store spec, zero
// for a key-value store.
func storeRetention(s StoreSpec) time.Duration {
	if r, ok := s.(interface{ retention() time.Duration }); ok {
		return r.retention()
	}
	return 0
}
