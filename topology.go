package eddy

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/plan"
	"github.com/eddy-streams/eddy/internal/runtime"
)

// Topology is a graph of processors from source topics to sink topics. It
// is a description: Run instantiates it once per task.
type Topology struct {
	nodes   []*node
	sources map[string]*node
	// patterns are the SourcePattern nodes' patterns, anchored.
	patterns map[*node]*regexp.Regexp
	// patternText is each SourcePattern's pattern as given, to describe.
	patternText map[*node]string
	stores      map[string]*storeDecl
	// repartitions are the internal topics the topology writes and reads
	// back (a re-key before a grouping or a join), by short name.
	repartitions []string
	// rekeyed are the automatic repartitions (Stream[K, V] values) of
	// re-keyed streams, by the node that re-keyed them.
	rekeyed map[*node]any
	// named are the operators the user named (Named), by name.
	named map[string]*node
	// autoRepartitions are the repartitions autoRepartition added, by
	// name, with the node whose key changed: what the startup check
	// names when it finds a repartition topic the topology lost.
	autoRepartitions map[string]*node
	globals          []runtime.GlobalStore
	// sinks are the external topics the topology writes (To), checked
	// to exist when the app starts.
	sinks []string
	// sinkChecks are the sink serdes that can check their schema with a
	// registry (serdeChecker), which Run calls before it starts.
	sinkChecks []sinkCheck
	// writers are the nodes that write a topic (To, and the write side
	// of a repartition), with the topic as the description names it.
	writers map[*node]string
	// addressed are the internal topics whose records are written to a
	// chosen partition rather than by key (a foreign-key join's answers),
	// as the description names them.
	addressed map[string]bool
	// sideEffects is set by Foreach: a terminal whose results are its
	// function's effects, not a topic or a store.
	sideEffects bool
	errs        []error
}

// storeDecl is a declared store: the node that owns it decides its
// sub-topology; retention > 0 marks a window or session store.
type storeDecl struct {
	name      string
	owner     *node
	retention time.Duration
	// query renders the store for interactive queries; nil for a store
	// declared without a spec of this package.
	query storeQuery
}

// NewTopology returns an empty topology.
func NewTopology() *Topology {
	return &Topology{sources: make(map[string]*node), stores: make(map[string]*storeDecl), rekeyed: make(map[*node]any), writers: make(map[*node]string),
		named: make(map[string]*node), autoRepartitions: make(map[string]*node),
		patterns: make(map[*node]*regexp.Regexp), patternText: make(map[*node]string), addressed: make(map[string]bool)}
}

// node is one vertex of the description. build instantiates it for a task:
// it links the node's instance to its parents' outputs, typed, so records
// flow between processors as Go values, never as bytes.
type node struct {
	// name is "<kind>-<position>", or what Named gave it.
	name string
	// named marks a name the user gave (Named): it does not depend on
	// the node's position, nor do the names derived from it.
	named   bool
	parents []*node
	// stores are the stores this node owns (declared for it).
	stores []string
	build  func(b *taskBuild) error
}

func (t *Topology) add(name string, parents ...*node) *node {
	n := &node{name: fmt.Sprintf("%s-%d", name, len(t.nodes)), parents: parents}
	if _, dup := t.named[n.name]; dup {
		t.fail("eddy: operator name %q given with eddy.Named is also the name of operator %d of the topology; choose a name that does not end in a position", n.name, len(t.nodes))
	}
	t.nodes = append(t.nodes, n)
	return n
}

func (t *Topology) fail(format string, args ...any) {
	t.errs = append(t.errs, fmt.Errorf(format, args...))
}

// failOn records a problem of operator op, about to be added after parent:
// the error names the operator and where it stands (the node it follows
// and its position), not only the rule, so that a topology of many
// operators points at the one to fix.
func (t *Topology) failOn(op string, parent *node, format string, args ...any) {
	t.errs = append(t.errs, &operatorError{op: op, after: parent.name, pos: len(t.nodes), err: fmt.Errorf(format, args...)})
}

// operatorError is a topology error located at an operator.
type operatorError struct {
	op, after string
	pos       int
	err       error
}

func (e *operatorError) Error() string {
	return fmt.Sprintf("eddy: %s after %s (operator %d of the topology): %s", e.op, e.after, e.pos, strings.TrimPrefix(e.err.Error(), "eddy: "))
}

func (e *operatorError) Unwrap() error { return e.err }

// addStore declares store name, owned by n (which may be set later with
// ownStore when the node is created after the declaration).
func (t *Topology) addStore(name string, owner *node, retention time.Duration, spec any) {
	if !runtime.ValidName(name) {
		t.fail("eddy: store name %q: use letters, digits, '.', '_' and '-' (it names the changelog topic)", name)
		return
	}
	if _, dup := t.stores[name]; dup {
		t.fail("eddy: store %q is declared twice; give each store its own name", name)
		return
	}
	q, _ := spec.(storeQuery)
	t.stores[name] = &storeDecl{name: name, owner: owner, retention: retention, query: q}
	if owner != nil {
		owner.stores = append(owner.stores, name)
	}
}

// Err returns the problems found while the topology was described, joined.
func (t *Topology) Err() error { return errors.Join(t.errs...) }

func init() { plan.Register(buildPlan) }

// buildPlan compiles a topology into what eddy's runtime executes (its
// sub-topologies, the parts that only topics connect, with their sources
// and stores) for eddy's own tools that run it without Run: the eddytest
// driver and the harness's in-process runner (see internal/plan).
func buildPlan(topology, config any) (runtime.Topology, error) {
	t, ok := topology.(*Topology)
	if !ok {
		return runtime.Topology{}, fmt.Errorf("eddy: build: %T is not an *eddy.Topology", topology)
	}
	cfg, ok := config.(Config)
	if !ok {
		return runtime.Topology{}, fmt.Errorf("eddy: build: %T is not an eddy.Config", config)
	}
	cfg.applyDefaults()
	return t.runtimeTopology(&cfg)
}

// runtimeTopology turns the description into what the runtime runs. Nodes
// joined by parent links (a join has two parents) form one sub-topology; a
// repartition topic is written by one sub-topology and read by another,
// through a source node with no parent.
func (t *Topology) runtimeTopology(cfg *Config) (runtime.Topology, error) {
	if err := t.Err(); err != nil {
		return runtime.Topology{}, err
	}
	if len(t.sources) == 0 && len(t.patterns) == 0 {
		return runtime.Topology{}, errors.New("eddy: the topology has no source; add one with eddy.Source")
	}
	if err := t.checkLoops(); err != nil {
		return runtime.Topology{}, err
	}
	comp := t.components()
	subIndex := map[int]int{} // component → sub-topology, numbered in node order
	var subs []runtime.Subtopology
	var members [][]*node
	for _, n := range t.nodes {
		c := comp[n]
		i, ok := subIndex[c]
		if !ok {
			i = len(subs)
			subIndex[c] = i
			subs = append(subs, runtime.Subtopology{})
			members = append(members, nil)
		}
		members[i] = append(members[i], n)
		if topic, ok := t.writers[n]; ok {
			subs[i].Writes = append(subs[i].Writes, topicName(cfg.AppID, topic))
		}
		for topic, src := range t.sources {
			if src == n {
				subs[i].Sources = append(subs[i].Sources, topicName(cfg.AppID, topic))
				if t.addressed[topic] {
					subs[i].Addressed = append(subs[i].Addressed, topicName(cfg.AppID, topic))
				}
			}
		}
		if re, ok := t.patterns[n]; ok {
			subs[i].Patterns = append(subs[i].Patterns, re)
		}
		for _, name := range n.stores {
			subs[i].Stores = append(subs[i].Stores, runtime.Store{Name: name, Retention: t.stores[name].retention})
		}
	}
	for i := range subs {
		if len(subs[i].Sources) == 0 && len(subs[i].Patterns) == 0 {
			return runtime.Topology{}, fmt.Errorf("eddy: part of the topology (%s) reads no topic", members[i][0].name)
		}
		nodes := members[i]
		subs[i].NewTask = func(tc runtime.TaskContext) (runtime.TaskProcessor, error) {
			b, err := newTaskBuild(tc, cfg, nodes)
			if err != nil {
				return nil, err // not a nil *taskBuild in an interface
			}
			return b, nil
		}
	}
	rt := runtime.Topology{Subtopologies: subs, Globals: append([]runtime.GlobalStore(nil), t.globals...), Sinks: slices.Clone(t.sinks)}
	// Which sub-topologies write each repartition topic: Run sizes a
	// topic from its writers' sources when nothing it is joined with does.
	writers := map[string][]int{}
	for _, n := range t.nodes { // in node order, for a stable result
		if topic, ok := t.writers[n]; ok && strings.HasPrefix(topic, repartitionPrefix) {
			writers[topic] = append(writers[topic], subIndex[comp[n]])
		}
	}
	for _, r := range t.repartitions {
		rt.Repartitions = append(rt.Repartitions, runtime.Repartition{Topic: RepartitionTopic(cfg.AppID, r), Writers: writers[repartitionPrefix+r]})
	}
	return rt, nil
}

// checkLoops refuses a topology that writes a topic it reads upstream of
// the writer (To(s, "in") on a stream of Source "in", directly or through
// other topics): each record would come back as input, and its outputs
// again, without end. A topic written by one part and read by another (a
// chain) is fine.
func (t *Topology) checkLoops() error {
	children := make(map[*node][]*node, len(t.nodes))
	for _, n := range t.nodes {
		for _, p := range n.parents {
			children[p] = append(children[p], n)
		}
	}
	// A writer's topic leads to the source that reads it.
	for w, topic := range t.writers {
		if src := t.sources[topic]; src != nil {
			children[w] = append(children[w], src)
		}
	}
	for _, w := range t.nodes { // in node order: the first loop is reported
		topic, ok := t.writers[w]
		src := t.sources[topic]
		if !ok || src == nil {
			continue
		}
		seen := map[*node]bool{}
		stack := []*node{src}
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if n == w {
				return fmt.Errorf("eddy: operator %s writes topic %s, which the topology reads upstream of it: every record would come back as input without end; write to another topic", w.name, topicLabel(topic))
			}
			if !seen[n] {
				seen[n] = true
				stack = append(stack, children[n]...)
			}
		}
	}
	return nil
}

// topicLabel names a topic of the description for a user.
func topicLabel(topic string) string {
	if name, ok := strings.CutPrefix(topic, repartitionPrefix); ok {
		return "of repartition " + name
	}
	return topic
}

// sinkless reports whether the topology writes no topic, keeps no store
// and has no Foreach: its results would go nowhere (Process nodes may still
// have side effects, so it is a warning, not an error).
func (t *Topology) sinkless() bool {
	return len(t.writers) == 0 && len(t.stores) == 0 && !t.sideEffects
}

// RepartitionTopic is the internal topic that carries the re-keyed records
// of the repartition named name.
func RepartitionTopic(appID, name string) string { return appID + "-" + name + "-repartition" }

// components numbers the connected components of the node graph.
func (t *Topology) components() map[*node]int {
	parent := make(map[*node]*node, len(t.nodes))
	var find func(n *node) *node
	find = func(n *node) *node {
		for parent[n] != n {
			parent[n] = parent[parent[n]]
			n = parent[n]
		}
		return n
	}
	for _, n := range t.nodes {
		parent[n] = n
	}
	for _, n := range t.nodes {
		for _, p := range n.parents {
			parent[find(n)] = find(p)
		}
	}
	ids := make(map[*node]int)
	out := make(map[*node]int, len(t.nodes))
	for _, n := range t.nodes {
		r := find(n)
		if _, ok := ids[r]; !ok {
			ids[r] = len(ids)
		}
		out[n] = ids[r]
	}
	return out
}

// taskBuild is one task's instance of its sub-topology: it routes source
// records to the source nodes, runs punctuators and closes the processors.
type taskBuild struct {
	tc  runtime.TaskContext
	cfg *Config
	out map[*node]any // *emitter[K, V] of each node
	// current is the input record being processed, nil while punctuators
	// run: the metadata of RecordContext and ProcessorContext.Topic. Set
	// once per record, it costs no allocation.
	current *kgo.Record
	// currentHeld is set while a table cache forwards a held update:
	// current is then the cache's copy of the update's metadata.
	currentHeld bool
	sources     map[string]rawReceiver
	// patterns open the receiver of a topic that no Source names, in
	// node order: the first whose pattern matches reads it.
	patterns []patternReceiver
	// inits run once every node is built: processors' Init, which may
	// schedule punctuators.
	inits             []func() error
	closers           []func() error
	streamPunctuators []*punctuator
	wallPunctuators   []*punctuator
	// endOfInput are what the task's nodes do when its input ends, in
	// node order (endofinput.go).
	endOfInput []func(end int64) error
	// caches are the table caches of the task's table operators, in
	// node order (table_cache.go); cacheForwarded and cacheCollapsed
	// count their updates since the task opened.
	caches                         []heldUpdates
	cacheForwarded, cacheCollapsed int64
	// transactional are the task's transactional sinks (ToTransactional),
	// which prepare in Flush and commit in Committed.
	transactional []*twoPhase
	// lateDropped counts the records that windowed operations dropped as
	// late since the task opened (those of aborted transactions too);
	// lateLogged is when the count was last logged.
	lateDropped int64
	lateLogged  time.Time
	// deadLetters counts the records sent to a dead-letter topic since
	// the task opened (those of aborted transactions too).
	deadLetters int64
	// timeRefused counts the source records refused for their event time
	// (stage time), dead-lettered or skipped, since the task opened.
	timeRefused int64
	// skipped counts the records a log-and-continue policy skipped since
	// the task opened; skippedLogged is when that was last logged.
	skipped       int64
	skippedLogged time.Time
}

// countLate counts a late record, and logs the count at most every ten
// seconds, so late data is visible without a line per record.
func (b *taskBuild) countLate(op string, ts, streamTime int64) {
	b.lateDropped++
	if time.Since(b.lateLogged) < 10*time.Second {
		return
	}
	b.lateLogged = time.Now()
	b.tc.Logger().Info("late records dropped", "by", op, "dropped_since_start", b.lateDropped,
		"last_timestamp", ts, "stream_time", streamTime)
}

// LateDropped returns how many records the task's windowed operations
// dropped as late since it opened.
func (b *taskBuild) LateDropped() int64 { return b.lateDropped }

// DeadLetters returns how many records the task sent to a dead-letter
// topic since it opened.
func (b *taskBuild) DeadLetters() int64 { return b.deadLetters }

// TimeRefused returns how many source records the task refused for their
// event time since it opened.
func (b *taskBuild) TimeRefused() int64 { return b.timeRefused }

func newTaskBuild(tc runtime.TaskContext, cfg *Config, nodes []*node) (_ *taskBuild, err error) {
	b := &taskBuild{tc: tc, cfg: cfg, out: make(map[*node]any), sources: make(map[string]rawReceiver)}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	for _, n := range nodes {
		if err := n.build(b); err != nil {
			return nil, fmt.Errorf("eddy: build %s: %w", n.name, err)
		}
	}
	for _, init := range b.inits {
		if err := init(); err != nil {
			return nil, err
		}
	}
	return b, nil
}

type rawReceiver interface {
	receiveRaw(r *kgo.Record) error
}

func (b *taskBuild) Process(r *kgo.Record) error {
	src := b.sources[r.Topic]
	if src == nil {
		if src = b.patternSource(r.Topic); src == nil {
			return fmt.Errorf("eddy: no source for topic %s", r.Topic)
		}
	}
	b.current = r
	if len(b.streamPunctuators) == 0 {
		err := b.processRecord(src, r) // the common case: nothing to punctuate
		b.current = nil
		return err
	}
	prev := b.tc.StreamTime()
	err := b.processRecord(src, r)
	b.current = nil // what punctuators forward has no input record
	if err != nil {
		return err
	}
	return b.punctuateStreamTime(prev)
}

func (b *taskBuild) Close() error {
	var errs []error
	for i := len(b.closers) - 1; i >= 0; i-- {
		errs = append(errs, b.closers[i]())
	}
	b.closers = nil
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

// output returns the typed output of node n in this task, for a child to
// attach to.
func output[K, V any](b *taskBuild, n *node) *emitter[K, V] {
	return b.out[n].(*emitter[K, V])
}
