package eddy

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/state"
)

// TopN keeps, for each key of g, its n first values in the order cmp
// gives (SQL's ROW_NUMBER() OVER (PARTITION BY key ORDER BY …) <= n): a
// table whose row of a key is the list of those values, first first. cmp
// is slices.SortFunc's: negative when a ranks before b. Values that cmp
// calls equal rank by their encodings (values'), the smaller first
// (bytes.Compare), so the result depends on the values alone, not on the
// order in which they arrived: a replay, another partitioning of the
// input, or a reference computed apart all give the same lists.
//
// The records of g are rows that only ever join their group (an
// append-only input): a value that does not rank among the n first is
// dropped at once, so the store named store keeps at most n values per
// key (Flink's AppendOnlyTopNFunction). A key's row changes only when a
// value enters it; only then is an update forwarded (through the table
// cache: the latest per key once per commit), with the timestamp of the
// record that entered. Tombstones are skipped. For an input whose rows
// change or go (a table), use TopNTable.
//
// The store holds each key's list encoded with serde.List(values); the
// returned table reads it there (joins, GroupTableBy, queries), and
// serde.List(values) writes its updates to a topic.
func TopN[K, V any](g GroupedStream[K, V], store string, n int, cmp func(a, b V) int, values serde.Serde[V]) Table[K, []V] {
	return addTopN[K, V, V](g.s.t, g.s.n, "top-n-"+store, g.keys, store, n, cmp, values, false,
		func(r Record[K, V]) (V, bool) { return r.Value, true })
}

// TopNTable keeps, for each key of a regrouped table (GroupTableBy), the n
// first of its current rows in the order cmp gives, as TopN does, ties
// broken the same way. A row that leaves the group (it changed, moved to
// another group, or was deleted) leaves its list too, and the next row in
// order takes its place, so the lists stay right when the input is itself
// an updating result, such as a per-key maximum that rises (Kafka Streams'
// KGroupedTable.aggregate over a sorted set, Flink's
// RetractableTopNFunction).
//
// That needs every current row of a group, not only its n first: besides
// the lists in store, the store "<store>-rows" keeps each group's rows
// (one entry a distinct row: the group's encoded key, the row's encoding,
// its multiplicity). A row that joins costs a look at its group's list
// and an entry; one that leaves costs its entry, and, if it was in the
// list while rows wait outside it, one scan of its group's rows to find
// the next. A group with no rows left is deleted from the table: its
// update is a tombstone.
func TopNTable[K, V any](g GroupedTable[K, V], store string, n int, cmp func(a, b V) int, values serde.Serde[V]) Table[K, []V] {
	return addTopN[K, tableChange[V], V](g.s.t, g.s.n, "top-n-table-"+store, g.keys, store, n, cmp, values, true,
		func(r Record[K, tableChange[V]]) (V, bool) { return r.Value.v, r.Value.add })
}

// addTopN adds the node of TopN (retract false: every record adds its
// value) or TopNTable (row tells a record's value and whether it joins or
// leaves its group).
func addTopN[K, VIn, V any](t *Topology, parent *node, name string, keys serde.Serde[K], store string, n int, cmp func(a, b V) int,
	values serde.Serde[V], retract bool, row func(Record[K, VIn]) (V, bool)) Table[K, []V] {
	lists := NewKeyValueStoreSpec(store, keys, serde.List(values))
	out := Table[K, []V]{t: t, store: store, rows: storeRows(lists)}
	op := "TopN"
	if retract {
		op = "TopNTable"
	}
	switch {
	case n < 1:
		t.failOn(op, parent, "store %s: n is %d; a top-n keeps at least 1 value per key", store, n)
	case cmp == nil || values == nil || keys == nil:
		t.failOn(op, parent, "store %s: cmp, the values' serde and the keys' serde are required", store)
	}
	nd := t.add(name, parent)
	out.n = nd
	t.addStore(store, nd, 0, lists)
	rowsStore := store + "-rows"
	if retract {
		t.addStore(rowsStore, nd, 0, NewKeyValueStoreSpec(rowsStore, serde.Bytes(), serde.Bytes()))
	}
	nd.build = func(b *taskBuild) error {
		emit := &emitter[K, []V]{}
		b.out[nd] = emit
		buf, err := b.tc.Store(store)
		if err != nil {
			return err
		}
		op := &topN[K, V]{n: n, cmp: cmp, keys: keys, values: values, lists: buf, cache: newTableCache(b, emit)}
		if retract {
			if op.rows, err = b.tc.Store(rowsStore); err != nil {
				return err
			}
			if err := op.checkN(); err != nil {
				return err
			}
		}
		in := output[K, VIn](b, parent)
		in.children = append(in.children, receiverFunc[K, VIn](func(r Record[K, VIn]) error {
			if r.Tombstone {
				return nil // not a row (GroupTableBy sends none)
			}
			v, add := row(r)
			return op.receive(r.Key, v, add, r.Timestamp, r.Headers)
		}))
		return nil
	}
	return out
}

// topN is one task's instance of TopN or TopNTable.
type topN[K, V any] struct {
	n      int
	cmp    func(a, b V) int
	keys   serde.Serde[K]
	values serde.Serde[V]
	lists  *state.StoreBuffer // encoded key → serde.List of the first n
	rows   *state.StoreBuffer // TopNTable's: rowKey(key, row) → multiplicity
	cache  *tableCache[K, []V]

	kbuf    []byte   // the key's encoding
	vbuf    []byte   // the value's encoding
	list    []byte   // the key's list as read, then as written
	spans   [][]byte // the encodings of the list's values, into list
	rowKey  []byte   // a rows entry's key
	scratch []byte

	// nMarked: the rows store holds n under rowsKeyN, unless a
	// transaction aborted since (Aborts was nAborts when it was written).
	nMarked bool
	nAborts uint64
}

// rowsKeyN is the key, in TopNTable's rows store, of the n its lists were
// kept for: a length of 127 with nothing after it, which neither a row's
// key (uvarint(len(k)) ‖ k ‖ row) nor a group's prefix can be.
var rowsKeyN = []byte{0x7f}

// checkN refuses, when the task opens, a TopNTable whose state was kept
// for another n. A list holds only the first n rows of its group and is
// rebuilt from the rows only when one of them leaves, so with a raised n
// the lists would stay short, and wrong, until then; with a lowered one
// they would keep rows past n. Rebuilding every list at open would cost a
// scan of every row on every start, so a change of n is refused, naming
// the fix (the lists rebuilt from the input). A store without the marker is new, or was written by an eddy before
// the marker: it is taken as kept for this n.
func (op *topN[K, V]) checkN() error {
	b, ok, err := op.rows.Get(rowsKeyN)
	if err != nil || !ok {
		return err
	}
	was, w := binary.Uvarint(b)
	if w <= 0 || w != len(b) {
		return fmt.Errorf("eddy: top-n %s: the stored n (%d bytes) is corrupt", op.lists.Name(), len(b))
	}
	if was != uint64(op.n) {
		return fmt.Errorf("eddy: TopNTable %s: its state keeps the first %d rows of each group and the topology now asks for %d, but the lists cannot change n in place (the rows past the old n were never listed): keep n at %d, or rebuild the lists from the input under the new n: reset the application (delete its state directories and the changelog topics of stores %s and %s, and read the input again from its start) or run it under a new Config.AppID", op.lists.Name(), was, op.n, was, op.lists.Name(), op.rows.Name())
	}
	op.nMarked, op.nAborts = true, op.rows.Aborts()
	return nil
}

// markN writes n beside the rows in the open transaction, if the
// committed state may lack it: once, and again after an abort (which may
// have dropped it).
func (op *topN[K, V]) markN() {
	if op.nMarked && op.nAborts == op.rows.Aborts() {
		return
	}
	op.rows.Put(rowsKeyN, binary.AppendUvarint(nil, uint64(op.n)))
	op.nMarked, op.nAborts = true, op.rows.Aborts()
}

// ranked is a value with its encoding, which breaks cmp's ties.
type ranked[V any] struct {
	v   V
	enc []byte
}

// before reports whether a ranks before b: cmp's order, then the
// encodings'.
func (op *topN[K, V]) before(a, b ranked[V]) bool {
	if c := op.cmp(a.v, b.v); c != 0 {
		return c < 0
	}
	return bytes.Compare(a.enc, b.enc) < 0
}

func (op *topN[K, V]) receive(k K, v V, add bool, ts int64, hs []Header) error {
	var err error
	if op.kbuf, err = op.keys.Serialize(op.kbuf[:0], k); err != nil {
		return fmt.Errorf("eddy: top-n %s: encode key: %w", op.lists.Name(), err)
	}
	if op.vbuf, err = op.values.Serialize(op.vbuf[:0], v); err != nil {
		return fmt.Errorf("eddy: top-n %s: encode value: %w", op.lists.Name(), err)
	}
	if err := op.readList(); err != nil {
		return err
	}
	var list []V
	if op.rows != nil {
		op.markN()
	}
	if add {
		if op.rows != nil {
			if _, err := op.count(+1); err != nil {
				return err
			}
		}
		if list, err = op.insert(ranked[V]{v: v, enc: op.vbuf}); err != nil || list == nil {
			return err
		}
	} else {
		left, err := op.count(-1)
		if err != nil || !left {
			return err // a row the group does not hold (it never joined)
		}
		i := op.indexOf(op.vbuf)
		if i < 0 {
			return nil // it was not among the first n: the list stands
		}
		if list, err = op.refill(i); err != nil {
			return err
		}
	}
	if len(list) == 0 {
		op.lists.Delete(op.kbuf)
		return op.cache.update(op.kbuf, 0, Record[K, []V]{Key: k, Timestamp: ts, Headers: hs, Tombstone: true})
	}
	if err := checkWrite(op.lists, op.kbuf, op.list); err != nil {
		return err
	}
	op.lists.Put(op.kbuf, op.list)
	return op.cache.update(op.kbuf, len(op.list), Record[K, []V]{Key: k, Value: list, Timestamp: ts, Headers: hs})
}

// readList reads the key's list into op.list and the spans of its
// values' encodings into op.spans, without decoding them.
func (op *topN[K, V]) readList() error {
	op.list, op.spans = op.list[:0], op.spans[:0]
	b, ok, err := op.lists.Get(op.kbuf)
	if err != nil || !ok {
		return err
	}
	op.list = append(op.list, b...) // b is the store's until its next write
	n, w := binary.Uvarint(op.list)
	rest := op.list[max(w, 0):]
	for i := uint64(0); w > 0 && i < n; i++ {
		l, lw := binary.Uvarint(rest)
		if lw <= 0 || l > uint64(len(rest)-lw) {
			w = 0
			break
		}
		op.spans = append(op.spans, rest[lw:lw+int(l)])
		rest = rest[lw+int(l):]
	}
	if w <= 0 || len(rest) != 0 || uint64(len(op.spans)) != n {
		return fmt.Errorf("eddy: top-n %s: the stored list of a key (%d bytes) is corrupt", op.lists.Name(), len(b))
	}
	return nil
}

func (op *topN[K, V]) decode(enc []byte) (V, error) {
	v, err := op.values.Deserialize(enc)
	if err != nil {
		return v, fmt.Errorf("eddy: top-n %s: decode a stored value: %w", op.lists.Name(), err)
	}
	return v, nil
}

// insert puts r into the key's list if it ranks among the first n,
// writes the new list to op.list and returns it decoded (a new slice: the
// table cache may hold it past the next record); nil if r did not enter.
func (op *topN[K, V]) insert(r ranked[V]) ([]V, error) {
	m := len(op.spans)
	// Find r's place from the end, decoding the values r ranks before:
	// one decode for a value that does not enter a full list.
	var list []V // allocated once r is known to enter
	at := m
	for at > 0 {
		v, err := op.decode(op.spans[at-1])
		if err != nil {
			return nil, err
		}
		if !op.before(r, ranked[V]{v: v, enc: op.spans[at-1]}) {
			break
		}
		if list == nil {
			list = make([]V, min(m+1, op.n))
		}
		if at < len(list) {
			list[at] = v // moves one down
		}
		at--
	}
	if at >= op.n {
		return nil, nil
	}
	if list == nil {
		list = make([]V, min(m+1, op.n))
	}
	list[at] = r.v
	op.scratch = binary.AppendUvarint(op.scratch[:0], uint64(len(list)))
	for i := range list {
		switch {
		case i < at:
			v, err := op.decode(op.spans[i])
			if err != nil {
				return nil, err
			}
			list[i] = v
			op.scratch = appendSpan(op.scratch, op.spans[i])
		case i == at:
			op.scratch = appendSpan(op.scratch, r.enc)
		default:
			op.scratch = appendSpan(op.scratch, op.spans[i-1])
		}
	}
	op.setList(op.scratch)
	return list, nil
}

// setList makes enc the key's list (op.list and op.spans).
func (op *topN[K, V]) setList(enc []byte) {
	op.list = append(op.list[:0], enc...)
	op.spans = op.spans[:0]
	_, w := binary.Uvarint(op.list)
	for rest := op.list[w:]; len(rest) > 0; {
		l, lw := binary.Uvarint(rest)
		op.spans = append(op.spans, rest[lw:lw+int(l)])
		rest = rest[lw+int(l):]
	}
}

func appendSpan(dst, enc []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(enc))), enc...)
}

// decodeList decodes the key's list, a new slice (the table cache may hold
// it past the next record).
func (op *topN[K, V]) decodeList() ([]V, error) {
	list := make([]V, len(op.spans))
	for i, enc := range op.spans {
		var err error
		if list[i], err = op.decode(enc); err != nil {
			return nil, err
		}
	}
	return list, nil
}

// indexOf returns the position of the value encoded as enc in the key's
// list, or -1.
func (op *topN[K, V]) indexOf(enc []byte) int {
	for i, s := range op.spans {
		if bytes.Equal(s, enc) {
			return i
		}
	}
	return -1
}

// count adds delta (+1, -1) to the multiplicity of the row op.vbuf in the
// group op.kbuf, deleting the entry at 0, and reports whether the row was
// there to take away (always true for +1).
func (op *topN[K, V]) count(delta int) (bool, error) {
	op.rowKey = appendSpan(op.rowKey[:0], op.kbuf)
	op.rowKey = append(op.rowKey, op.vbuf...)
	b, ok, err := op.rows.Get(op.rowKey)
	if err != nil {
		return false, err
	}
	var c uint64
	if ok {
		var w int
		if c, w = binary.Uvarint(b); w <= 0 || w != len(b) {
			return false, fmt.Errorf("eddy: top-n %s: a row's count (%d bytes) is corrupt", op.rows.Name(), len(b))
		}
	}
	switch {
	case delta > 0:
		c++
	case c == 0:
		return false, nil
	default:
		c--
	}
	if c == 0 {
		op.rows.Delete(op.rowKey)
		return true, nil
	}
	op.scratch = binary.AppendUvarint(op.scratch[:0], c)
	if err := checkWrite(op.rows, op.rowKey, op.scratch); err != nil {
		return false, err
	}
	op.rows.Put(op.rowKey, op.scratch)
	return true, nil
}

// refill takes the value at position i out of the key's list. If the list
// held n values, rows outside it may now belong in it: the group's rows
// are scanned for the n first, so a list always holds the first
// min(n, rows) of its group. It returns the new list, decoded.
func (op *topN[K, V]) refill(i int) ([]V, error) {
	if len(op.spans) < op.n {
		// Every row of the group was in the list: drop the one.
		op.scratch = binary.AppendUvarint(op.scratch[:0], uint64(len(op.spans)-1))
		for j, s := range op.spans {
			if j != i {
				op.scratch = appendSpan(op.scratch, s)
			}
		}
		op.setList(op.scratch)
		return op.decodeList()
	}
	prefix := appendSpan(nil, op.kbuf)
	var first []ranked[V] // the n first so far, in order
	err := op.rows.PrefixScan(prefix, func(key, value []byte) error {
		c, w := binary.Uvarint(value)
		if w <= 0 {
			return fmt.Errorf("eddy: top-n %s: a row's count (%d bytes) is corrupt", op.rows.Name(), len(value))
		}
		enc := key[len(prefix):]
		v, err := op.decode(enc)
		if err != nil {
			return err
		}
		r := ranked[V]{v: v, enc: enc}
		if len(first) == op.n && !op.before(r, first[op.n-1]) {
			return nil
		}
		r.enc = bytes.Clone(enc) // enc is the scan's, for this call
		for ; c > 0; c-- {
			at := len(first)
			for at > 0 && op.before(r, first[at-1]) {
				at--
			}
			if at >= op.n {
				break
			}
			if len(first) < op.n {
				first = append(first, r)
			}
			copy(first[at+1:], first[at:])
			first[at] = r
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	op.scratch = binary.AppendUvarint(op.scratch[:0], uint64(len(first)))
	list := make([]V, len(first))
	for j, r := range first {
		op.scratch = appendSpan(op.scratch, r.enc)
		list[j] = r.v
	}
	op.setList(op.scratch)
	return list, nil
}
