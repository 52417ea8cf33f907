package eddy

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/runtime"
)

// Topology is a graph of processors from source topics to sink topics. It
// is a description: Run instantiates it once per task.
type Topology struct {
	nodes   []*node
	sources map[string]*node
	stores  []string
	errs    []error
}

// NewTopology returns an empty topology.
func NewTopology() *Topology {
	return &Topology{sources: make(map[string]*node)}
}

// node is one vertex of the description. build instantiates it for a task:
// it links the node's instance to its parent's output, typed, so records
// flow between processors as Go values, never as bytes.
type node struct {
	name   string
	parent *node
	build  func(b *taskBuild) error
}

func (t *Topology) add(name string, parent *node) *node {
	n := &node{name: fmt.Sprintf("%s-%d", name, len(t.nodes)), parent: parent}
	t.nodes = append(t.nodes, n)
	return n
}

func (t *Topology) fail(format string, args ...any) {
	t.errs = append(t.errs, fmt.Errorf(format, args...))
}

func (t *Topology) addStore(name string) {
	if !runtime.ValidName(name) {
		t.fail("eddy: store name %q: use letters, digits, '.', '_' and '-' (it names the changelog topic)", name)
		return
	}
	for _, s := range t.stores {
		if s == name {
			t.fail("eddy: store %q is declared twice; give each store its own name", name)
			return
		}
	}
	t.stores = append(t.stores, name)
}

// Err returns the problems found while the topology was described, joined.
func (t *Topology) Err() error { return errors.Join(t.errs...) }

// runtimeTopology turns the description into what the runtime runs.
func (t *Topology) runtimeTopology(cfg *Config) (runtime.Topology, error) {
	if err := t.Err(); err != nil {
		return runtime.Topology{}, err
	}
	if len(t.sources) == 0 {
		return runtime.Topology{}, errors.New("eddy: the topology has no source; add one with eddy.Source")
	}
	sub := runtime.Subtopology{}
	for _, name := range t.stores {
		sub.Stores = append(sub.Stores, runtime.Store{Name: name})
	}
	for _, n := range t.nodes {
		for topic, src := range t.sources {
			if src == n {
				sub.Sources = append(sub.Sources, topic)
			}
		}
	}
	sub.NewTask = func(tc runtime.TaskContext) (runtime.TaskProcessor, error) {
		b := &taskBuild{tc: tc, cfg: cfg, out: make(map[*node]any), sources: make(map[string]rawReceiver)}
		for _, n := range t.nodes {
			if err := n.build(b); err != nil {
				return nil, fmt.Errorf("eddy: build %s: %w", n.name, err)
			}
		}
		return b, nil
	}
	return runtime.Topology{Subtopologies: []runtime.Subtopology{sub}}, nil
}

// taskBuild is one task's instance of the topology: it routes source
// records to the source nodes and closes the processors.
type taskBuild struct {
	tc      runtime.TaskContext
	cfg     *Config
	out     map[*node]any // *emitter[K, V] of each node
	sources map[string]rawReceiver
	closers []func() error
}

type rawReceiver interface {
	receiveRaw(r *kgo.Record) error
}

func (b *taskBuild) Process(r *kgo.Record) error {
	src := b.sources[r.Topic]
	if src == nil {
		return fmt.Errorf("eddy: no source for topic %s", r.Topic)
	}
	return src.receiveRaw(r)
}

func (b *taskBuild) Punctuate(now time.Time) error { return nil }

func (b *taskBuild) Close() error {
	var errs []error
	for _, c := range b.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// receiver consumes typed records inside a task.
type receiver[K, V any] interface {
	receive(r Record[K, V]) error
}

type receiverFunc[K, V any] func(r Record[K, V]) error

func (f receiverFunc[K, V]) receive(r Record[K, V]) error { return f(r) }

// emitter is a node's output: it passes each record to the node's children
// in the order they were added.
type emitter[K, V any] struct {
	children []receiver[K, V]
}

func (e *emitter[K, V]) emit(r Record[K, V]) error {
	for _, c := range e.children {
		if err := c.receive(r); err != nil {
			return err
		}
	}
	return nil
}

// output returns the typed output of n's parent in this task, for n to
// attach to.
func output[K, V any](b *taskBuild, n *node) *emitter[K, V] {
	return b.out[n].(*emitter[K, V])
}
