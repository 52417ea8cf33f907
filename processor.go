package eddy

import (
	"fmt"
	"log/slog"
	"slices"

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

// Forward sends rec to the processor's children, synchronously.
func (c *ProcessorContext[K, V]) Forward(rec Record[K, V]) error { return c.out.emit(rec) }

// TaskID names the task, as "<subtopology>_<partition>".
func (c *ProcessorContext[K, V]) TaskID() string { return c.b.tc.ID().String() }

// Partition is the input partition the task processes.
func (c *ProcessorContext[K, V]) Partition() int32 { return c.b.tc.ID().Partition }

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
}

// Process adds a processor after s. newProcessor is called once per task.
// stores are the state stores the processor uses (declared with
// KeyValueStore); each is logged to its changelog topic.
func Process[KIn, VIn, KOut, VOut any](s Stream[KIn, VIn], name string, newProcessor func() Processor[KIn, VIn, KOut, VOut], stores ...StoreSpec) Stream[KOut, VOut] {
	names := make([]string, len(stores))
	for i, st := range stores {
		names[i] = st.StoreName()
		s.t.addStore(names[i])
	}
	return attach(s, "process-"+name, true, func(b *taskBuild, out *emitter[KOut, VOut]) receiver[KIn, VIn] {
		p := newProcessor()
		ctx := &ProcessorContext[KOut, VOut]{b: b, out: out, name: name, stores: names}
		return &processorNode[KIn, VIn, KOut, VOut]{b: b, p: p, ctx: ctx}
	})
}

// processorNode initialises its processor lazily, on the first record, so
// that building a task never fails half-way through user code.
type processorNode[KIn, VIn, KOut, VOut any] struct {
	b      *taskBuild
	p      Processor[KIn, VIn, KOut, VOut]
	ctx    *ProcessorContext[KOut, VOut]
	inited bool
}

func (n *processorNode[KIn, VIn, KOut, VOut]) receive(r Record[KIn, VIn]) error {
	if !n.inited {
		if err := n.p.Init(n.ctx); err != nil {
			return err
		}
		n.inited = true
		n.b.closers = append(n.b.closers, n.p.Close)
	}
	return n.p.Process(r)
}
