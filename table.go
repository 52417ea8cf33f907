package eddy

import (
	"bytes"
	"encoding/binary"
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
// ("<app-id>-rekey-<n>-repartition", n the position of the operator that
// changed the key, or "<app-id>-<name>-repartition" once eddy.Named named
// it); after an operation that also changed
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
	// rows reads the table's current rows, when a key-value store holds
	// them (windowed tables and join results have none): what joins and
	// GroupTableBy read. A view (FilterTable, MapTableValues without
	// Materialize) reads its parent's store through its own function.
	rows *tableRows[K, V]
	// closeAt, set on a windowed aggregation's table and the tables
	// derived from it, is the stream time at which a key's window is
	// final: what Suppress's UntilWindowCloses waits for.
	closeAt func(K) int64
}

// StoreName is the name of the table's state store ("" for a table that
// is not materialised, such as a join's result or a FilterTable or
// MapTableValues view).
func (t Table[K, V]) StoreName() string { return t.store }

// ToStream returns the table's updates as a stream: one record per update,
// with the new value. A table kept in a store (an aggregation, ToTable,
// TableFrom, a Materialize'd table) forwards the latest update per key
// once per commit when the table cache is on (Config.TableCacheBytes), so
// the stream may skip intermediate updates of a key.
func ToStream[K, V any](t Table[K, V]) Stream[K, V] {
	return Stream[K, V]{t: t.t, n: t.n}
}

// Aggregate folds each key's records into an aggregate, kept in the store
// named store: init gives the aggregate of a key seen for the first time,
// add folds one record in. Every update is forwarded downstream, or, with
// the table cache on (Config.TableCacheBytes, the default), the latest
// update per key once per commit.
func Aggregate[K, V, A any](g GroupedStream[K, V], store string, init func() A, add func(key K, value V, agg A) A, aggs serde.Serde[A]) Table[K, A] {
	return aggregate(g, store, "aggregate-", init, aggs, func(*taskBuild) (func(K, V, A) (A, error), error) {
		return func(k K, v V, agg A) (A, error) { return add(k, v, agg), nil }, nil
	})
}

// aggregate adds an aggregation of g kept in the store named store, in a
// node named kind + store: each record's aggregate (init's for a new key)
// goes through the step that prepare returns for the task, and the result
// is stored and forwarded through the table cache. more are stores the
// step uses besides.
func aggregate[K, V, A any](g GroupedStream[K, V], store, kind string, init func() A, aggs serde.Serde[A], prepare func(b *taskBuild) (func(K, V, A) (A, error), error), more ...StoreSpec) Table[K, A] {
	t := g.s.t
	spec := NewKeyValueStoreSpec(store, g.keys, aggs)
	n := t.add(kind+store, g.s.n)
	t.addStore(store, n, 0, spec)
	for _, m := range more {
		t.addStore(m.StoreName(), n, 0, m)
	}
	n.build = func(b *taskBuild) error {
		out := &emitter[K, A]{}
		b.out[n] = out
		buf, err := b.tc.Store(store)
		if err != nil {
			return err
		}
		step, err := prepare(b)
		if err != nil {
			return err
		}
		kv := &KeyValueStore[K, A]{buf: buf, keys: spec.keys, values: spec.values}
		cache := newTableCache(b, out)
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
			if agg, err = step(r.Key, r.Value, agg); err != nil {
				return err
			}
			if err := kv.Put(r.Key, agg); err != nil {
				return err
			}
			return cache.update(kv.kbuf, len(kv.vbuf), Record[K, A]{Key: r.Key, Value: agg, Timestamp: r.Timestamp, Headers: r.Headers})
		}))
		return nil
	}
	return Table[K, A]{t: t, n: n, store: store, rows: storeRows(spec)}
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
	spec := NewKeyValueStoreSpec(store, g.keys, values)
	if d := t.t.stores[store]; d != nil {
		// The store holds values encoded by values (reducedSerde wraps
		// them only in memory): queries render them as V.
		d.query = spec
	}
	return Table[K, V]{t: t.t, n: mapUpdates(t, func(r reduced) V { return r.v }), store: t.store, rows: storeRows(spec)}
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

// mapUpdates adds a node that maps a table's update values.
func mapUpdates[K, A, B any](t Table[K, A], fn func(A) B) *node {
	s := MapValues(Stream[K, A]{t: t.t, n: t.n}, func(_ K, a A) B { return fn(a) })
	return s.n
}

// GroupedTable is a table regrouped by a new key (Kafka Streams'
// KGroupedTable), ready to aggregate with an adder and a subtractor: its
// records are the changes of the original table, each value either joining
// or leaving its new key's group.
type GroupedTable[K, V any] struct {
	s    Stream[K, tableChange[V]]
	keys serde.Serde[K]
}

// tableChange is one half of a table update after a regrouping: v joins
// its group (add) or leaves it (!add).
type tableChange[V any] struct {
	v   V
	add bool
}

// GroupTableBy regroups a table by a new key: fn maps each row to its new
// key and value. A table row is a current value, not an event, so when a
// row changes the aggregation downstream must forget its old value before
// it counts the new one: each update sends the old (key, value), if any,
// as a subtraction and the new one as an addition (a tombstone only
// subtracts), through the repartition topic "<app-id>-<name>-repartition",
// subtraction first. That is Kafka Streams' KTable.groupBy, and what an
// aggregation of an updating result (an average of per-key maxima) needs.
//
// The old value comes from the store "<name>-prior", which keeps each
// row's last (new key, new value); an update whose new key and value
// encode as the old ones sends nothing (Kafka Streams' emit-on-change), so
// an aggregate that did not change costs no repartitioned records. tb must
// be kept in a key-value store (an aggregation, TableFrom, ToTable, or a
// FilterTable or MapTableValues of one): its key serde encodes the prior
// store's keys.
func GroupTableBy[K, V, K2, V2 any](tb Table[K, V], fn func(K, V) (K2, V2), name string, keys serde.Serde[K2], values serde.Serde[V2]) GroupedTable[K2, V2] {
	t := tb.t
	changes := tableChangeSerde[V2]{values: values}
	if tb.rows == nil {
		t.fail("eddy: GroupTableBy %s: the table is not kept in a key-value store (a windowed table or a join result); aggregate it or read it with TableFrom", name)
		return GroupedTable[K2, V2]{s: Stream[K2, tableChange[V2]]{t: t, n: tb.n}, keys: keys}
	}
	prior := NewKeyValueStoreSpec(name+"-prior", tb.rows.keys, serde.Bytes())
	n := t.add("group-table-by-"+name, tb.n)
	t.addStore(prior.name, n, 0, prior)
	n.build = func(b *taskBuild) error {
		out := &emitter[K2, tableChange[V2]]{}
		b.out[n] = out
		buf, err := b.tc.Store(prior.name)
		if err != nil {
			return err
		}
		g := &tableRegrouper[K, V, K2, V2]{out: out, prior: prior.view(buf, b.tc.StreamTime), fn: fn, keys: keys, values: values}
		in := output[K, V](b, tb.n)
		in.children = append(in.children, receiverFunc[K, V](g.receive))
		return nil
	}
	s := Repartition(Stream[K2, tableChange[V2]]{t: t, n: n}, name, keys, changes)
	return GroupedTable[K2, V2]{s: s, keys: keys}
}

// tableRegrouper is one task's instance of GroupTableBy.
type tableRegrouper[K, V, K2, V2 any] struct {
	out    *emitter[K2, tableChange[V2]]
	prior  *KeyValueStore[K, []byte]
	fn     func(K, V) (K2, V2)
	keys   serde.Serde[K2]
	values serde.Serde[V2]
	enc    []byte // the new row's encoding, reused
	kbuf   []byte // the new key's encoding, reused
}

// A prior row is stored as the uvarint length of the encoded new key, the
// key, then the encoded new value.
func (g *tableRegrouper[K, V, K2, V2]) receive(r Record[K, V]) error {
	old, hadOld, err := g.prior.Get(r.Key)
	if err != nil {
		return err
	}
	var k2 K2
	var v2 V2
	if !r.Tombstone {
		k2, v2 = g.fn(r.Key, r.Value)
		if g.enc, err = g.encode(g.enc[:0], k2, v2); err != nil {
			return err
		}
		if hadOld && bytes.Equal(old, g.enc) {
			return nil // unchanged: nothing leaves or joins a group
		}
	}
	if hadOld {
		ok, ov, err := g.decode(old)
		if err != nil {
			return err
		}
		if err := g.out.emit(Record[K2, tableChange[V2]]{Key: ok, Value: tableChange[V2]{v: ov}, Timestamp: r.Timestamp, Headers: r.Headers}); err != nil {
			return err
		}
	}
	if r.Tombstone {
		if !hadOld {
			return nil
		}
		return g.prior.Delete(r.Key)
	}
	if err := g.prior.Put(r.Key, g.enc); err != nil {
		return err
	}
	return g.out.emit(Record[K2, tableChange[V2]]{Key: k2, Value: tableChange[V2]{v: v2, add: true}, Timestamp: r.Timestamp, Headers: r.Headers})
}

func (g *tableRegrouper[K, V, K2, V2]) encode(dst []byte, k K2, v V2) ([]byte, error) {
	var err error
	if g.kbuf, err = g.keys.Serialize(g.kbuf[:0], k); err != nil {
		return nil, fmt.Errorf("eddy: GroupTableBy: encode key: %w", err)
	}
	dst = binary.AppendUvarint(dst, uint64(len(g.kbuf)))
	dst = append(dst, g.kbuf...)
	if dst, err = g.values.Serialize(dst, v); err != nil {
		return nil, fmt.Errorf("eddy: GroupTableBy: encode value: %w", err)
	}
	return dst, nil
}

func (g *tableRegrouper[K, V, K2, V2]) decode(b []byte) (k K2, v V2, err error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || uint64(len(b)-w) < n {
		return k, v, fmt.Errorf("eddy: GroupTableBy: prior row of %d bytes is corrupt", len(b))
	}
	if k, err = g.keys.Deserialize(b[w : w+int(n)]); err != nil {
		return k, v, fmt.Errorf("eddy: GroupTableBy: decode prior key: %w", err)
	}
	if v, err = g.values.Deserialize(b[w+int(n):]); err != nil {
		return k, v, fmt.Errorf("eddy: GroupTableBy: decode prior value: %w", err)
	}
	return k, v, nil
}

// tableChangeSerde encodes a change as one byte (1 add, 0 subtract) and
// the value.
type tableChangeSerde[V any] struct{ values serde.Serde[V] }

func (s tableChangeSerde[V]) Serialize(dst []byte, c tableChange[V]) ([]byte, error) {
	flag := byte(0)
	if c.add {
		flag = 1
	}
	return s.values.Serialize(append(dst, flag), c.v)
}

func (s tableChangeSerde[V]) Deserialize(b []byte) (tableChange[V], error) {
	if len(b) == 0 || b[0] > 1 {
		return tableChange[V]{}, fmt.Errorf("eddy: table change: missing or bad flag byte")
	}
	v, err := s.values.Deserialize(b[1:])
	if err != nil {
		return tableChange[V]{}, fmt.Errorf("eddy: table change: %w", err)
	}
	return tableChange[V]{v: v, add: b[0] == 1}, nil
}

// AggregateTable folds each group of a regrouped table into an aggregate,
// kept in the store named store: init gives a group's first aggregate, add
// folds a value that joined the group in, sub takes out one that left it
// (Kafka Streams' KGroupedTable.aggregate with an adder and a subtractor).
// Every change is forwarded downstream, so an update of a row shows as
// two updates of its group, the subtraction's then the addition's; the
// last one per key is the current aggregate.
func AggregateTable[K, V, A any](g GroupedTable[K, V], store string, init func() A, add, sub func(key K, value V, agg A) A, aggs serde.Serde[A]) Table[K, A] {
	return Aggregate(GroupedStream[K, tableChange[V]]{s: g.s, keys: g.keys}, store, init, func(k K, c tableChange[V], agg A) A {
		if c.add {
			return add(k, c.v, agg)
		}
		return sub(k, c.v, agg)
	}, aggs)
}
