package eddy

import (
	"github.com/eddy-streams/eddy/serde"
)

// tableRows is how a join or GroupTableBy reads a table's current rows.
type tableRows[K, V any] struct {
	// store is the key-value store that holds the rows: the table's own,
	// or, for a view, the store of the table it filters or maps.
	store string
	keys  serde.Serde[K]
	// values encodes the rows when the table has a store of its own (nil
	// for a view, whose values its store does not hold): what a
	// foreign-key join hashes the left rows and sends the right ones with.
	values serde.Serde[V]
	// open returns a task's reader of the rows; the task must own store.
	open func(b *taskBuild) (rowReader[K, V], error)
}

// rowReader looks up a table's current value of a key.
type rowReader[K, V any] interface {
	Get(k K) (V, bool, error)
}

// storeRows reads the rows held in the key-value store of spec.
func storeRows[K, V any](spec KeyValueStoreSpec[K, V]) *tableRows[K, V] {
	return &tableRows[K, V]{store: spec.name, keys: spec.keys, values: spec.values, open: func(b *taskBuild) (rowReader[K, V], error) {
		buf, err := b.tc.Store(spec.name)
		if err != nil {
			return nil, err
		}
		return spec.view(buf, b.tc.StreamTime), nil
	}}
}

// label names the table in its children's node names: its store, or the
// store a view reads.
func (t Table[K, V]) label() string {
	if t.store == "" && t.rows != nil {
		return t.rows.store
	}
	return t.store
}

// keepLatest adds the node that keeps the latest value per key of its
// parent's records in the store of spec (a tombstone deletes the key) and
// forwards every record: a table's own store (TableFrom, ToTable).
func keepLatest[K, V any](t *Topology, name string, parent *node, spec KeyValueStoreSpec[K, V]) *node {
	n := t.add(name, parent)
	t.addStore(spec.name, n, 0, spec)
	n.build = func(b *taskBuild) error {
		out := &emitter[K, V]{}
		b.out[n] = out
		buf, err := b.tc.Store(spec.name)
		if err != nil {
			return err
		}
		kv := spec.view(buf, b.tc.StreamTime)
		cache := newTableCache(b, out)
		in := output[K, V](b, parent)
		in.children = append(in.children, receiverFunc[K, V](func(r Record[K, V]) error {
			var err error
			valueLen := 0
			if r.Tombstone {
				err = kv.Delete(r.Key)
			} else {
				err, valueLen = kv.Put(r.Key, r.Value), len(kv.vbuf)
			}
			if err != nil {
				return err
			}
			return cache.update(kv.kbuf, valueLen, r)
		}))
		return nil
	}
	return n
}

// ToTable turns s into a table of the latest value per key (Kafka Streams'
// KStream.toTable), kept in the key-value store named store and logged to
// its changelog "<app-id>-<store>-changelog": each record is its key's new
// value and a tombstone (from a table's ToStream, a Process that forwards
// one) deletes the key. Every record is forwarded as an update (with the
// table cache on, the latest per key once per commit). After an
// operation that may have changed the key, s goes through a repartition
// topic by itself, encoded with keys and values (see GroupByKey).
func ToTable[K, V any](s Stream[K, V], store string, keys serde.Serde[K], values serde.Serde[V]) Table[K, V] {
	if s.values == nil {
		s.values = values // what the repartition, if one is needed, encodes with
	}
	s = autoRepartition(s, keys, "ToTable")
	spec := NewKeyValueStoreSpec(store, keys, values)
	n := keepLatest(s.t, "to-table-"+store, s.n, spec)
	return Table[K, V]{t: s.t, n: n, store: store, rows: storeRows(spec)}
}

// TableOption configures FilterTable, FilterNotTable and MapTableValues.
type TableOption[K, V any] func(*tableOptions[K, V])

type tableOptions[K, V any] struct {
	store *KeyValueStoreSpec[K, V]
}

// Materialize keeps a table operator's result in a key-value store of its
// own, named store and logged to "<app-id>-<store>-changelog", as Kafka
// Streams' Materialized.as(store): it can be queried, and joins look its
// rows up there. Without it the result is a view that joins compute on
// read from the parent table's store, which costs no storage but needs a
// parent kept in a store, and runs the operator on every lookup.
func Materialize[K, V any](store string, keys serde.Serde[K], values serde.Serde[V]) TableOption[K, V] {
	return func(o *tableOptions[K, V]) {
		spec := NewKeyValueStoreSpec(store, keys, values)
		o.store = &spec
	}
}

// FilterTable keeps the rows for which keep returns true (Kafka Streams'
// KTable.filter): an update that fails keep is forwarded as a tombstone,
// since the key's previous row may have passed, so a join or a table
// downstream drops the key.
func FilterTable[K, V any](t Table[K, V], keep func(K, V) bool, opts ...TableOption[K, V]) Table[K, V] {
	return deriveTable(t, "table-filter", func(k K, v V) (V, bool) { return v, keep(k, v) }, opts)
}

// FilterNotTable drops the rows for which drop returns true, as
// FilterTable with the predicate negated (Kafka Streams' KTable.filterNot).
func FilterNotTable[K, V any](t Table[K, V], drop func(K, V) bool, opts ...TableOption[K, V]) Table[K, V] {
	return deriveTable(t, "table-filter-not", func(k K, v V) (V, bool) { return v, !drop(k, v) }, opts)
}

// MapTableValues maps each row's value with fn (Kafka Streams'
// KTable.mapValues); deletions pass as deletions.
func MapTableValues[K, V, V2 any](t Table[K, V], fn func(K, V) V2, opts ...TableOption[K, V2]) Table[K, V2] {
	return deriveTable(t, "table-map-values", func(k K, v V) (V2, bool) { return fn(k, v), true }, opts)
}

// deriveTable adds a table whose row of a key is f of the parent's row, or
// none when f reports false. Each parent update becomes the new row, or a
// tombstone. Materialized, the rows are kept in the option's store; else
// the table is a view: its readers apply f to the parent's rows.
func deriveTable[K, V, V2 any](tb Table[K, V], name string, f func(K, V) (V2, bool), opts []TableOption[K, V2]) Table[K, V2] {
	var o tableOptions[K, V2]
	for _, opt := range opts {
		opt(&o)
	}
	t := tb.t
	n := t.add(name, tb.n)
	out := Table[K, V2]{t: t, n: n, closeAt: tb.closeAt}
	switch {
	case o.store != nil:
		t.addStore(o.store.name, n, 0, *o.store)
		out.store, out.rows = o.store.name, storeRows(*o.store)
	case tb.rows != nil:
		parent := tb.rows
		out.rows = &tableRows[K, V2]{store: parent.store, keys: parent.keys, open: func(b *taskBuild) (rowReader[K, V2], error) {
			r, err := parent.open(b)
			if err != nil {
				return nil, err
			}
			return viewReader[K, V, V2]{parent: r, f: f}, nil
		}}
	}
	spec := o.store
	n.build = func(b *taskBuild) error {
		emit := &emitter[K, V2]{}
		b.out[n] = emit
		var kv *KeyValueStore[K, V2]
		var cache *tableCache[K, V2]
		if spec != nil {
			buf, err := b.tc.Store(spec.name)
			if err != nil {
				return err
			}
			kv = spec.view(buf, b.tc.StreamTime)
			cache = newTableCache(b, emit)
		}
		in := output[K, V](b, tb.n)
		in.children = append(in.children, receiverFunc[K, V](func(r Record[K, V]) error {
			rec := Record[K, V2]{Key: r.Key, Timestamp: r.Timestamp, Headers: r.Headers, Tombstone: true}
			if !r.Tombstone {
				var ok bool
				rec.Value, ok = f(r.Key, r.Value)
				rec.Tombstone = !ok
				if !ok {
					var zero V2
					rec.Value = zero
				}
			}
			if kv == nil {
				return emit.emit(rec)
			}
			var err error
			valueLen := 0
			if rec.Tombstone {
				err = kv.Delete(r.Key)
			} else {
				err, valueLen = kv.Put(r.Key, rec.Value), len(kv.vbuf)
			}
			if err != nil {
				return err
			}
			return cache.update(kv.kbuf, valueLen, rec)
		}))
		return nil
	}
	return out
}

// viewReader reads a view's row: f of the parent's row.
type viewReader[K, V, V2 any] struct {
	parent rowReader[K, V]
	f      func(K, V) (V2, bool)
}

func (r viewReader[K, V, V2]) Get(k K) (V2, bool, error) {
	var zero V2
	v, ok, err := r.parent.Get(k)
	if err != nil || !ok {
		return zero, false, err
	}
	v2, ok := r.f(k, v)
	if !ok {
		return zero, false, nil
	}
	return v2, true, nil
}
