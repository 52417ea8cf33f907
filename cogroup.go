package eddy

import (
	"slices"

	"github.com/eddy-streams/eddy/serde"
)

// Cogrouped is several grouped streams of one key type, each with its own
// adder, folded into one aggregate of type A per key (Kafka Streams'
// CogroupedKStream, KIP-150): e.g. clicks, views and purchases, three
// value types, into one customer profile, kept in one store with one
// changelog instead of three aggregates joined afterwards.
//
// Build it with Cogroup and CogroupWith, then aggregate it with
// CogroupAggregate, or window it with CogroupWindowedBy. The inputs are
// grouped streams, so each already sits on its key's partition (through
// its own repartition topic if it was re-keyed); their topics end up in
// one task and must be co-partitioned, as for Merge or a join.
//
// Kafka Streams chains methods (cogroup(...).cogroup(...).aggregate(...));
// a Go method cannot add a type parameter, and each input brings its own
// value type, so eddy's steps are free functions named after the first
// one: Cogroup, CogroupWith, CogroupAggregate.
type Cogrouped[K, A any] struct {
	t      *Topology
	keys   serde.Serde[K]
	inputs []cogroupInput[K, A]
}

// cogroupInput is one grouped stream of a cogroup: its node, and how to
// connect its output to the cogroup node in a task, where each record
// becomes a step that folds it into the aggregate with its own adder.
type cogroupInput[K, A any] struct {
	n       *node
	connect func(b *taskBuild, out *emitter[K, cogroupStep[K, A]])
}

// cogroupStep folds one input record into a key's aggregate: the record's
// value and adder, whatever its input's value type, behind one type, so
// that one aggregation node serves every input.
type cogroupStep[K, A any] func(key K, agg A) A

// Cogroup starts a cogroup with g, whose records add folds into the
// aggregate. Add more inputs with CogroupWith.
func Cogroup[K, V, A any](g GroupedStream[K, V], add func(key K, value V, agg A) A) Cogrouped[K, A] {
	cg := Cogrouped[K, A]{t: g.s.t, keys: g.keys}
	return CogroupWith(cg, g, add)
}

// CogroupWith returns cg with one more input, g, whose records add folds
// into the same aggregate; g's value type may differ from the other
// inputs'. cg is not changed, so one cogroup can start several. The key
// serde of the aggregate's store is the first input's.
func CogroupWith[K, V, A any](cg Cogrouped[K, A], g GroupedStream[K, V], add func(key K, value V, agg A) A) Cogrouped[K, A] {
	switch {
	case g.s.t != cg.t:
		cg.t.failOn("CogroupWith", g.s.n, "the grouped stream belongs to another topology; build the cogroup's inputs in one")
		return cg
	case add == nil:
		cg.t.failOn("CogroupWith", g.s.n, "no adder given; pass a function that folds a record into the aggregate")
		return cg
	case slices.ContainsFunc(cg.inputs, func(in cogroupInput[K, A]) bool { return in.n == g.s.n }):
		cg.t.failOn("CogroupWith", g.s.n, "the grouped stream is already an input of this cogroup; fold both adders into one")
		return cg
	}
	in := cogroupInput[K, A]{n: g.s.n, connect: func(b *taskBuild, out *emitter[K, cogroupStep[K, A]]) {
		src := output[K, V](b, g.s.n)
		// One step per input and task, reading the record being passed
		// on: the aggregation applies it within emit, before the next
		// record, so no closure is made per record.
		var v V
		apply := cogroupStep[K, A](func(k K, agg A) A { return add(k, v, agg) })
		src.children = append(src.children, receiverFunc[K, V](func(r Record[K, V]) error {
			step := Record[K, cogroupStep[K, A]]{Key: r.Key, Timestamp: r.Timestamp, Headers: r.Headers, Tombstone: r.Tombstone}
			if !r.Tombstone { // the aggregation skips tombstones, as Aggregate does
				v, step.Value = r.Value, apply
			}
			return out.emit(step)
		}))
	}}
	// A new slice: cg's own stays as it was for its other uses.
	cg.inputs = append(slices.Clip(cg.inputs), in)
	return cg
}

// grouped adds the cogroup node, whose parents are the inputs: it passes
// each input's records on, in the order the task processes them (by
// timestamp across the task's sources), as steps that the aggregation
// applies. What aggregates it (CogroupAggregate, CogroupWindowAggregate)
// is the next node: Aggregate and WindowAggregate, unchanged.
func (cg Cogrouped[K, A]) grouped() GroupedStream[K, cogroupStep[K, A]] {
	parents := make([]*node, len(cg.inputs))
	for i, in := range cg.inputs {
		parents[i] = in.n
	}
	n := cg.t.add("cogroup", parents...)
	inputs := cg.inputs
	n.build = func(b *taskBuild) error {
		out := &emitter[K, cogroupStep[K, A]]{}
		b.out[n] = out
		for _, in := range inputs {
			in.connect(b, out)
		}
		return nil
	}
	return GroupedStream[K, cogroupStep[K, A]]{s: Stream[K, cogroupStep[K, A]]{t: cg.t, n: n}, keys: cg.keys}
}

// applyStep is the aggregations' adder: the step knows its input's adder.
func applyStep[K, A any](k K, step cogroupStep[K, A], agg A) A { return step(k, agg) }

// CogroupAggregate folds the records of every input of cg into one
// aggregate per key, kept in the store named store (logged to
// "<app-id>-<store>-changelog"): init gives the aggregate of a key seen
// for the first time, and each record is folded in by its own input's
// adder, in the order the task processes the records. Tombstones are
// skipped, as Aggregate skips them. Every update is forwarded downstream
// with the timestamp and headers of the record that made it.
//
// It is Aggregate over the cogroup node, so the store is queryable and
// restored as any aggregate's.
func CogroupAggregate[K, A any](cg Cogrouped[K, A], store string, init func() A, aggs serde.Serde[A]) Table[K, A] {
	if init == nil {
		cg.t.fail("eddy: cogroup aggregate %q: pass an init function", store)
	}
	return Aggregate(cg.grouped(), store, init, applyStep[K, A], aggs)
}

// CogroupedWindows is a cogroup cut into windows (Kafka Streams'
// TimeWindowedCogroupedKStream and SessionWindowedCogroupedKStream),
// ready to aggregate with CogroupWindowAggregate.
type CogroupedWindows[K, A any] struct {
	cg      Cogrouped[K, A]
	windows Windows
	emit    EmitStrategy
}

// CogroupWindowedBy cuts cg into windows, as WindowedBy cuts a grouped
// stream: TumblingWindows, HoppingWindows,
// SlidingWindowsWithTimeDifference or SessionWindowsWithGap.
func CogroupWindowedBy[K, A any](cg Cogrouped[K, A], w Windows) CogroupedWindows[K, A] {
	return CogroupedWindows[K, A]{cg: cg, windows: w}
}

// Emit sets when the aggregation of w forwards its results (default
// EmitEveryUpdate), as WindowedStream.Emit does.
func (w CogroupedWindows[K, A]) Emit(e EmitStrategy) CogroupedWindows[K, A] {
	w.emit = e
	return w
}

// CogroupWindowAggregate folds the records of every input of w per key
// and window into one aggregate: init gives a window's first aggregate,
// each record is folded in by its own input's adder, and merge combines
// two sessions that a record joins (session windows need it; other
// windows ignore it: pass nil). It is WindowAggregate over the cogroup
// node: the store, late records (counted, not offered as a stream: their
// values are of several types), emit strategies and output timestamps are
// WindowAggregate's.
func CogroupWindowAggregate[K, A any](w CogroupedWindows[K, A], store string, init func() A, merge func(key K, a, b A) A, aggs serde.Serde[A]) Table[Windowed[K], A] {
	ws := WindowedBy(w.cg.grouped(), w.windows).Emit(w.emit)
	return WindowAggregate(ws, store, init, applyStep[K, A], merge, aggs)
}
