package eddy

// Stream operators beyond the basic ones of stream.go: branching, side
// effects, value-only flat maps, and the record metadata (topic, partition,
// offset, timestamp, headers) that Kafka Streams users read from the
// record context.

// RecordContext is the metadata of the record an operator is handling: the
// input record the task read (Topic, Partition, Offset) and the record's
// own event time and headers. It is passed by value and built from fields
// the task already holds, so reading it costs no allocation.
//
// Topic is the topic the task read the input record from: after a
// repartition (GroupBy, an automatic re-key, Repartition) that is the
// internal topic "<app-id>-<name>-repartition", with its partition and
// offset, not the original topic's. A record that a punctuator forwarded
// has no input record: its Topic is "" and its Offset -1, and Partition is
// the task's partition (every record a task handles belongs to it).
type RecordContext struct {
	Topic     string
	Partition int32
	// Offset is the input record's offset in Topic, -1 when the record
	// comes from a punctuator.
	Offset int64
	// Timestamp is the record's event time (ms since the Unix epoch): the
	// Kafka timestamp, what TimestampFrom extracted, or what an upstream
	// operator set.
	Timestamp int64
	// Headers are the record's headers, shared with the record: read
	// them, do not modify them.
	Headers []Header
}

// Header returns the value of the record's last header named key.
func (rc RecordContext) Header(key string) (value []byte, ok bool) {
	for i := len(rc.Headers) - 1; i >= 0; i-- {
		if rc.Headers[i].Key == key {
			return rc.Headers[i].Value, true
		}
	}
	return nil, false
}

// recordContext is the metadata of a record with timestamp ts and headers
// hs, handled now by this task.
func (b *taskBuild) recordContext(ts int64, hs []Header) RecordContext {
	if r := b.current; r != nil {
		return RecordContext{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: ts, Headers: hs}
	}
	return RecordContext{Partition: b.tc.ID().Partition, Offset: -1, Timestamp: ts, Headers: hs}
}

// MapValuesWithContext is MapValues whose function also gets the record's
// metadata (topic, partition, offset, timestamp, headers).
func MapValuesWithContext[K, V, V2 any](s Stream[K, V], fn func(rc RecordContext, k K, v V) V2) Stream[K, V2] {
	return attach(s, "map-values", false, func(b *taskBuild, out *emitter[K, V2]) receiver[K, V] {
		return receiverFunc[K, V](func(r Record[K, V]) error {
			v := fn(b.recordContext(r.Timestamp, r.Headers), r.Key, r.Value)
			return out.emit(Record[K, V2]{Key: r.Key, Value: v, Timestamp: r.Timestamp, Headers: r.Headers, Tombstone: r.Tombstone})
		})
	})
}

// FilterWithContext is Filter whose predicate also gets the record's
// metadata (topic, partition, offset, timestamp, headers).
func FilterWithContext[K, V any](s Stream[K, V], keep func(rc RecordContext, k K, v V) bool) Stream[K, V] {
	out := attach(s, "filter", false, func(b *taskBuild, out *emitter[K, V]) receiver[K, V] {
		return receiverFunc[K, V](func(r Record[K, V]) error {
			if !keep(b.recordContext(r.Timestamp, r.Headers), r.Key, r.Value) {
				return nil
			}
			return out.emit(r)
		})
	})
	out.values = s.values
	return out
}

// FilterNot keeps the records for which drop returns false: Filter with
// the predicate negated (Kafka Streams' filterNot).
func FilterNot[K, V any](s Stream[K, V], drop func(K, V) bool) Stream[K, V] {
	out := attach(s, "filter-not", false, func(_ *taskBuild, out *emitter[K, V]) receiver[K, V] {
		return receiverFunc[K, V](func(r Record[K, V]) error {
			if drop(r.Key, r.Value) {
				return nil
			}
			return out.emit(r)
		})
	})
	out.values = s.values
	return out
}

// FlatMapValues replaces each record with zero or more records of the same
// key: fn appends the new values to dst and returns it (the slice is reused
// across records). The key, and so the partition, stays, so a GroupByKey
// after it needs no repartition topic (FlatMap would).
func FlatMapValues[K, V, V2 any](s Stream[K, V], fn func(dst []V2, k K, v V) []V2) Stream[K, V2] {
	return attach(s, "flat-map-values", false, func(_ *taskBuild, out *emitter[K, V2]) receiver[K, V] {
		var buf []V2
		return receiverFunc[K, V](func(r Record[K, V]) error {
			buf = fn(buf[:0], r.Key, r.Value)
			for _, v := range buf {
				if err := out.emit(Record[K, V2]{Key: r.Key, Value: v, Timestamp: r.Timestamp, Headers: r.Headers, Tombstone: r.Tombstone}); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// Peek calls fn for each record and passes the record on unchanged: for
// logging, metrics or debugging. fn's side effects are at least once: a
// record of an aborted transaction (a crash, a rebalance, a failed commit)
// is processed again, and fn sees it again; only the topology's outputs and
// stores are exactly once.
func Peek[K, V any](s Stream[K, V], fn func(K, V)) Stream[K, V] {
	out := attach(s, "peek", false, func(_ *taskBuild, out *emitter[K, V]) receiver[K, V] {
		return receiverFunc[K, V](func(r Record[K, V]) error {
			fn(r.Key, r.Value)
			return out.emit(r)
		})
	})
	out.values = s.values
	return out
}

// Foreach ends the stream by calling fn for each record (Kafka Streams'
// foreach). Exactly once covers what eddy writes, not fn's side effects:
// after an abort or a crash the records of the open transaction are
// processed again and fn runs again for them, so its effects are at least
// once; make them idempotent (keyed by the record's topic, partition and
// offset, see ForeachWithContext) or write to a topic with To instead.
func Foreach[K, V any](s Stream[K, V], fn func(K, V)) {
	s.t.sideEffects = true
	attach(s, "foreach", false, func(_ *taskBuild, _ *emitter[K, V]) receiver[K, V] {
		return receiverFunc[K, V](func(r Record[K, V]) error {
			fn(r.Key, r.Value)
			return nil
		})
	})
}

// ForeachWithContext is Foreach whose function also gets the record's
// metadata: its topic, partition and offset identify the input record, so
// that an external system can drop the repeats a reprocessing sends.
func ForeachWithContext[K, V any](s Stream[K, V], fn func(rc RecordContext, k K, v V)) {
	s.t.sideEffects = true
	attach(s, "foreach", false, func(b *taskBuild, _ *emitter[K, V]) receiver[K, V] {
		return receiverFunc[K, V](func(r Record[K, V]) error {
			fn(b.recordContext(r.Timestamp, r.Headers), r.Key, r.Value)
			return nil
		})
	})
}

// Splitter routes a stream's records into named branches (Kafka Streams'
// split().branch().defaultBranch()); Split returns it.
//
// It is a builder with one method per branch, rather than a function that
// returns a map of branches by name, so that each branch is a typed
// variable the compiler checks (a misspelt name in a map lookup would be a
// nil stream at run time), and the order of the Branch calls is visibly
// the order the predicates are tried in.
type Splitter[K, V any] struct {
	s        Stream[K, V]
	name     string
	n        *node
	branches []splitBranch[K, V]
	def      *Stream[K, V]
}

type splitBranch[K, V any] struct {
	name string
	n    *node
	pred func(K, V) bool
}

// Split starts routing s into branches: add them with Branch, in the order
// their predicates are tried, and Default for the records no predicate
// takes. Each record goes to the first branch whose predicate returns true
// (first match wins), else to the default branch, else nowhere. name names
// the operator in Describe ("split-<name>", its branches
// "branch-<name>-<branch>").
func Split[K, V any](s Stream[K, V], name string) *Splitter[K, V] {
	sp := &Splitter[K, V]{s: s, name: name}
	sp.n = s.t.add("split-"+name, s.n)
	sp.n.build = func(b *taskBuild) error {
		// Every branch is declared by now: the topology is complete
		// before a task is built.
		preds := make([]func(K, V) bool, len(sp.branches))
		outs := make([]*emitter[K, V], len(sp.branches))
		for i, br := range sp.branches {
			preds[i], outs[i] = br.pred, &emitter[K, V]{}
			b.out[br.n] = outs[i]
		}
		var def *emitter[K, V]
		if sp.def != nil {
			def = &emitter[K, V]{}
			b.out[sp.def.n] = def
		}
		b.out[sp.n] = &emitter[K, V]{} // no stream reads the split node itself
		in := output[K, V](b, s.n)
		in.children = append(in.children, receiverFunc[K, V](func(r Record[K, V]) error {
			for i, keep := range preds {
				if keep(r.Key, r.Value) {
					return outs[i].emit(r)
				}
			}
			if def != nil {
				return def.emit(r)
			}
			return nil
		}))
		return nil
	}
	return sp
}

// Branch adds a branch that takes the records for which pred returns true
// and that no earlier branch took. Branch names are unique within a Split.
func (sp *Splitter[K, V]) Branch(name string, pred func(K, V) bool) Stream[K, V] {
	for _, br := range sp.branches {
		if br.name == name {
			sp.s.t.failOn("Split "+sp.name, sp.s.n, "branch %q is declared twice; give each branch its own name", name)
			return sp.branch(br.n)
		}
	}
	n := sp.s.t.add("branch-"+sp.name+"-"+name, sp.n)
	sp.branches = append(sp.branches, splitBranch[K, V]{name: name, n: n, pred: pred})
	return sp.branch(n)
}

// Default returns the branch of the records that no Branch takes, whenever
// it is called (branches added after it still come first). Without it those
// records are dropped.
func (sp *Splitter[K, V]) Default() Stream[K, V] {
	if sp.def == nil {
		d := sp.branch(sp.s.t.add("branch-"+sp.name+"-default", sp.n))
		sp.def = &d
	}
	return *sp.def
}

// branch is the stream of branch node n: the split's input, typed and
// keyed alike.
func (sp *Splitter[K, V]) branch(n *node) Stream[K, V] {
	// The split node built n's emitter; n has nothing of its own to build.
	n.build = func(*taskBuild) error { return nil }
	return Stream[K, V]{t: sp.s.t, n: n, keyChanged: sp.s.keyChanged, values: sp.s.values}
}
