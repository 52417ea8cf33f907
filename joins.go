package eddy

import (
	"fmt"

	"github.com/eddy-streams/eddy/serde"
)

// JoinKind is the kind of a join: which unmatched records still produce a
// result.
type JoinKind int

const (
	// InnerJoin: a result only when both sides have a value.
	InnerJoin JoinKind = iota
	// LeftJoin: every left record (or left table row) gives a result; the
	// right side may be missing.
	LeftJoin
	// OuterJoin: both sides give results when unmatched (table-table and
	// stream-stream joins only).
	OuterJoin
)

func (k JoinKind) String() string {
	switch k {
	case InnerJoin:
		return "inner"
	case LeftJoin:
		return "left"
	case OuterJoin:
		return "outer"
	}
	return fmt.Sprintf("JoinKind(%d)", int(k))
}

// TableFrom reads topic as a table (a KTable): each record is the new value
// of its key, and a record with a null value deletes the key. The table is
// kept in the key-value store named store, logged to its own changelog.
// Its updates can be read with ToStream, deletions as tombstones.
func TableFrom[K, V any](t *Topology, topic, store string, keys serde.Serde[K], values serde.Serde[V]) Table[K, V] {
	src := source(t, topic, keys, values, asTable())
	spec := NewKeyValueStoreSpec(store, keys, values)
	n := keepLatest(t, "table-"+store, src.n, spec)
	return Table[K, V]{t: t, n: n, store: store, rows: storeRows(spec)}
}

// joinable checks that a table can be read by a join.
func joinable[K, V any](side string, tb Table[K, V]) error {
	if tb.rows == nil {
		return fmt.Errorf("eddy: the %s table of a join is not kept in a key-value store (a windowed table or a join result); aggregate it, read it with TableFrom or materialize it (eddy.Materialize)", side)
	}
	return nil
}

// JoinStreamTable joins each record of s with the current value of its key
// in table: Kafka Streams' stream-table join. Table updates only update the
// table; stream records trigger results. With InnerJoin a record whose key
// is not in the table gives no result; with LeftJoin it gives
// joiner(key, v, zero, false). After SelectKey, s goes through a
// repartition topic by itself (see GroupByKey); its source topic must be
// co-partitioned with the table's.
func JoinStreamTable[K, V, VT, VR any](s Stream[K, V], table Table[K, VT], kind JoinKind, joiner func(key K, v V, tv VT, found bool) VR) Stream[K, VR] {
	t := s.t
	if err := joinable("right", table); err != nil {
		t.failOn("JoinStreamTable", s.n, "%w", err)
		return Stream[K, VR]{t: t, n: s.n}
	}
	if kind == OuterJoin {
		t.failOn("JoinStreamTable", s.n, "a stream-table join is inner or left, not outer")
	}
	s = autoRepartition(s, table.rows.keys, "JoinStreamTable")
	n := t.add("join-stream-table-"+table.rows.store, s.n, table.n)
	rows := table.rows
	n.build = func(b *taskBuild) error {
		out := &emitter[K, VR]{}
		b.out[n] = out
		kv, err := rows.open(b)
		if err != nil {
			return err
		}
		in := output[K, V](b, s.n)
		in.children = append(in.children, receiverFunc[K, V](func(r Record[K, V]) error {
			if r.Tombstone {
				return nil
			}
			tv, ok, err := kv.Get(r.Key)
			if err != nil {
				return err
			}
			if !ok && kind == InnerJoin {
				return nil
			}
			return out.emit(Record[K, VR]{Key: r.Key, Value: joiner(r.Key, r.Value, tv, ok), Timestamp: r.Timestamp, Headers: r.Headers})
		}))
		return nil
	}
	return Stream[K, VR]{t: t, n: n}
}

// JoinTables joins two tables on their key: Kafka Streams' table-table join.
// Each update of either side looks up the other side's current value and
// updates the result: joiner(key, left, leftFound, right, rightFound) when
// the kind says there is a result, a tombstone when a key's result
// disappears. The result is a table of updates, not kept in a store of its
// own: to join it or query it, give it one with a FilterTable or
// MapTableValues and Materialize.
func JoinTables[K, VL, VR, VO any](left Table[K, VL], right Table[K, VR], kind JoinKind, joiner func(key K, l VL, lok bool, r VR, rok bool) VO) Table[K, VO] {
	t := left.t
	if err := joinable("left", left); err != nil {
		t.failOn("JoinTables", left.n, "%w", err)
	}
	if err := joinable("right", right); err != nil {
		t.failOn("JoinTables", left.n, "%w", err)
	}
	n := t.add("join-tables-"+left.label()+"-"+right.label(), left.n, right.n)
	if left.rows == nil || right.rows == nil {
		return Table[K, VO]{t: t, n: n}
	}
	lrows, rrows := left.rows, right.rows
	n.build = func(b *taskBuild) error {
		out := &emitter[K, VO]{}
		b.out[n] = out
		lkv, err := lrows.open(b)
		if err != nil {
			return err
		}
		rkv, err := rrows.open(b)
		if err != nil {
			return err
		}
		// result emits the key's join result after an update of one side,
		// or a tombstone when the kind says the key has none now.
		result := func(k K, ts int64, l VL, lok bool, r VR, rok bool, hs []Header) error {
			emit := false
			switch kind {
			case InnerJoin:
				emit = lok && rok
			case LeftJoin:
				emit = lok
			case OuterJoin:
				emit = lok || rok
			}
			if !emit {
				return out.emit(Record[K, VO]{Key: k, Timestamp: ts, Tombstone: true, Headers: hs})
			}
			return out.emit(Record[K, VO]{Key: k, Value: joiner(k, l, lok, r, rok), Timestamp: ts, Headers: hs})
		}
		lin := output[K, VL](b, left.n)
		lin.children = append(lin.children, receiverFunc[K, VL](func(rec Record[K, VL]) error {
			r, rok, err := rkv.Get(rec.Key)
			if err != nil {
				return err
			}
			if kind == InnerJoin && !rok {
				return nil // no right row: no result, none to remove
			}
			return result(rec.Key, rec.Timestamp, rec.Value, !rec.Tombstone, r, rok, rec.Headers)
		}))
		rin := output[K, VR](b, right.n)
		rin.children = append(rin.children, receiverFunc[K, VR](func(rec Record[K, VR]) error {
			l, lok, err := lkv.Get(rec.Key)
			if err != nil {
				return err
			}
			if !lok && kind != OuterJoin {
				return nil // no left row: no result, none to remove
			}
			return result(rec.Key, rec.Timestamp, l, lok, rec.Value, !rec.Tombstone, rec.Headers)
		}))
		return nil
	}
	return Table[K, VO]{t: t, n: n}
}
