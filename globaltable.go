package eddy

import (
	"fmt"

	"github.com/eddy-streams/eddy/internal/runtime"
	"github.com/eddy-streams/eddy/serde"
)

// GlobalTable is a table that every instance holds whole, read from its
// topic (all partitions) before and while the topology runs: Kafka Streams'
// GlobalKTable. It suits small reference data (currencies, account
// details): a stream joins it on any key it computes, with no repartition.
type GlobalTable[K, V any] struct {
	t      *Topology
	store  string
	keys   serde.Serde[K]
	values serde.Serde[V]
}

// GlobalTableFrom declares a global table read from topic into the global
// store named store. The topic is its changelog: records with a null value
// delete their key. It is read with read_committed, so only committed
// records are seen.
func GlobalTableFrom[K, V any](t *Topology, topic, store string, keys serde.Serde[K], values serde.Serde[V]) GlobalTable[K, V] {
	switch {
	case !runtime.ValidName(store):
		t.fail("eddy: global store name %q: use letters, digits, '.', '_' and '-'", store)
	case t.stores[store] != nil:
		t.fail("eddy: global store %q has the name of another store", store)
	default:
		for _, g := range t.globals {
			if g.Name == store || g.Topic == topic {
				t.fail("eddy: global table %s (topic %s) is declared twice", store, topic)
			}
		}
		if _, ok := t.sources[topic]; ok {
			t.fail("eddy: topic %s is both a source and a global table", topic)
		}
		t.globals = append(t.globals, runtime.GlobalStore{Name: store, Topic: topic})
	}
	return GlobalTable[K, V]{t: t, store: store, keys: keys, values: values}
}

// JoinGlobal joins each record of s with the row of the global table whose
// key keyFn computes from it. With InnerJoin a record with no row gives no
// result; with LeftJoin it gives joiner(key, v, zero, false).
func JoinGlobal[K, V, KG, VG, VR any](s Stream[K, V], g GlobalTable[KG, VG], keyFn func(K, V) KG, kind JoinKind, joiner func(key K, v V, gv VG, found bool) VR) Stream[K, VR] {
	if kind == OuterJoin {
		s.t.failOn("JoinGlobal", s.n, "a global table join is inner or left, not outer")
	}
	return attach(s, "join-global-"+g.store, false, func(b *taskBuild, out *emitter[K, VR]) receiver[K, V] {
		var kbuf []byte
		var reader runtime.GlobalReader
		return receiverFunc[K, V](func(r Record[K, V]) error {
			if r.Tombstone {
				return nil
			}
			if reader == nil {
				var err error
				if reader, err = b.tc.GlobalStore(g.store); err != nil {
					return err
				}
			}
			var err error
			if kbuf, err = g.keys.Serialize(kbuf[:0], keyFn(r.Key, r.Value)); err != nil {
				return fmt.Errorf("eddy: global table %s: encode key: %w", g.store, err)
			}
			raw, ok, err := reader.Get(kbuf)
			if err != nil {
				return fmt.Errorf("eddy: global table %s: %w", g.store, err)
			}
			var gv VG
			if ok {
				if gv, err = g.values.Deserialize(raw); err != nil {
					return fmt.Errorf("eddy: global table %s: decode value: %w", g.store, err)
				}
			} else if kind == InnerJoin {
				return nil
			}
			return out.emit(Record[K, VR]{Key: r.Key, Value: joiner(r.Key, r.Value, gv, ok), Timestamp: r.Timestamp, Headers: r.Headers})
		})
	})
}
