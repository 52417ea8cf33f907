package eddy

import (
	"fmt"

	"github.com/eddy-streams/eddy/serde"
)

// GroupedStream is a stream grouped by key, ready to aggregate.
type GroupedStream[K, V any] struct {
	s    Stream[K, V]
	keys serde.Serde[K]
}

// GroupByKey groups s by its current key; keys encodes the key in the
// aggregation's store. The records must be on the partition of their key:
// after SelectKey they go through a repartition topic by themselves
// ("<app-id>-rekey-<n>-repartition"); after an operation that also changed
// the value type (Map, FlatMap, Process) eddy cannot encode them, so that
// is an error that names the fix: Repartition, or GroupBy, which re-keys
// and repartitions in one step with the serdes it is given.
func GroupByKey[K, V any](s Stream[K, V], keys serde.Serde[K]) GroupedStream[K, V] {
	s = autoRepartition(s, keys, "GroupByKey")
	return GroupedStream[K, V]{s: s, keys: keys}
}

// GroupBy groups s by a new key, fn's result: the records go through the
// repartition topic "<app-id>-<name>-repartition" (see Repartition), so
// each key's records meet in one task.
func GroupBy[K, V, K2 any](s Stream[K, V], fn func(K, V) K2, name string, keys serde.Serde[K2], values serde.Serde[V]) GroupedStream[K2, V] {
	return GroupByKey(Repartition(SelectKey(s, fn), name, keys, values), keys)
}

// Table is a changelog stream of the latest value per key (a KTable),
// materialised in a state store.
type Table[K, V any] struct {
	t     *Topology
	n     *node
	store string
	// kv is the key-value store that holds the table, when it has one
	// (windowed tables and join results have none): what joins read.
	kv *KeyValueStoreSpec[K, V]
}

// StoreName is the name of the table's state store ("" for a table that
// is not materialised, such as a join's result).
func (t Table[K, V]) StoreName() string { return t.store }

// ToStream returns the table's updates as a stream: one record per update,
// with the new value. (No cache suppresses intermediate updates.)
func ToStream[K, V any](t Table[K, V]) Stream[K, V] {
	return Stream[K, V]{t: t.t, n: t.n}
}

// Aggregate folds each key's records into an aggregate, kept in the store
// named store: init gives the aggregate of a key seen for the first time,
// add folds one record in. Every update is forwarded downstream.
func Aggregate[K, V, A any](g GroupedStream[K, V], store string, init func() A, add func(key K, value V, agg A) A, aggs serde.Serde[A]) Table[K, A] {
	t := g.s.t
	spec := KeyValueStore(store, g.keys, aggs)
	n := t.add("aggregate-"+store, g.s.n)
	t.addStore(store, n, 0, spec)
	n.build = func(b *taskBuild) error {
		out := &emitter[K, A]{}
		b.out[n] = out
		buf, err := b.tc.Store(store)
		if err != nil {
			return err
		}
		kv := &KVStore[K, A]{buf: buf, keys: spec.keys, values: spec.values}
		in := output[K, V](b, g.s.n)
		in.children = append(in.children, receiverFunc[K, V](func(r Record[K, V]) error {
			if r.Tombstone {
				return nil // as in Kafka Streams: a null value is not aggregated
			}
			agg, ok, err := kv.Get(r.Key)
			if err != nil {
				return err
			}
			if !ok {
				agg = init()
			}
			agg = add(r.Key, r.Value, agg)
			if err := kv.Put(r.Key, agg); err != nil {
				return err
			}
			return out.emit(Record[K, A]{Key: r.Key, Value: agg, Timestamp: r.Timestamp, Headers: r.Headers})
		}))
		return nil
	}
	return Table[K, A]{t: t, n: n, store: store, kv: &spec}
}

// Count counts each key's records.
func Count[K, V any](g GroupedStream[K, V], store string) Table[K, int64] {
	return Aggregate(g, store, func() int64 { return 0 }, func(_ K, _ V, n int64) int64 { return n + 1 }, serde.Int64())
}

// Reduce combines each key's values with fn; the first value of a key is
// its initial aggregate.
func Reduce[K, V any](g GroupedStream[K, V], store string, fn func(agg, v V) V, values serde.Serde[V]) Table[K, V] {
	type reduced struct {
		v   V
		set bool
	}
	t := Aggregate(g, store, func() reduced { return reduced{} }, func(_ K, v V, agg reduced) reduced {
		if !agg.set {
			return reduced{v: v, set: true}
		}
		return reduced{v: fn(agg.v, v), set: true}
	}, reducedSerde[V, reduced]{values: values, wrap: func(v V) reduced { return reduced{v: v, set: true} }, unwrap: func(r reduced) V { return r.v }})
	spec := KeyValueStore(store, g.keys, values)
	if d := t.t.stores[store]; d != nil {
		// The store holds values encoded by values (reducedSerde wraps
		// them only in memory): queries render them as V.
		d.query = spec
	}
	return Table[K, V]{t: t.t, n: mapTableValues(t, func(r reduced) V { return r.v }), store: t.store, kv: &spec}
}

// reducedSerde stores a Reduce aggregate as the plain value, so the store
// and its changelog hold V, readable by any client.
type reducedSerde[V, R any] struct {
	values serde.Serde[V]
	wrap   func(V) R
	unwrap func(R) V
}

func (s reducedSerde[V, R]) Serialize(dst []byte, r R) ([]byte, error) {
	return s.values.Serialize(dst, s.unwrap(r))
}

func (s reducedSerde[V, R]) Deserialize(b []byte) (R, error) {
	v, err := s.values.Deserialize(b)
	if err != nil {
		var zero R
		return zero, fmt.Errorf("reduce: %w", err)
	}
	return s.wrap(v), nil
}

// mapTableValues adds a node that maps a table's update values.
func mapTableValues[K, A, B any](t Table[K, A], fn func(A) B) *node {
	s := MapValues(Stream[K, A]{t: t.t, n: t.n}, func(_ K, a A) B { return fn(a) })
	return s.n
}
