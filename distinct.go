package eddy

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/state"
)

// DistinctColumn is one column whose distinct values an AggregateDistinct
// tells apart, under up to 64 filters of its own (SQL's
// COUNT(DISTINCT col) FILTER (WHERE …), one bit per filter). Declare it
// with Distinct.
type DistinctColumn[K, V any] struct {
	// encode appends the record's value of the column: two records have
	// the same value when their encodings are equal.
	encode  func(dst []byte, k K, v V) ([]byte, error)
	filters func(K, V) uint64
	// err is what Distinct found wrong, reported by AggregateDistinct,
	// which has the topology.
	err error
}

// Distinct declares a column of AggregateDistinct: value is the record's
// value of the column, encoded with values to be stored (equal encodings
// are the same value); filters returns the bit set of the column's
// filters the record passes (bit i for filter i; return 1 for a column
// counted without a filter, and 0 for a record the column ignores, as SQL
// ignores a NULL).
func Distinct[K, V, D any](value func(K, V) D, values serde.Serde[D], filters func(K, V) uint64) DistinctColumn[K, V] {
	if value == nil || values == nil || filters == nil {
		return DistinctColumn[K, V]{err: errors.New("pass value, its serde and filters (func(K, V) uint64 { return 1 } counts the column without a filter)")}
	}
	return DistinctColumn[K, V]{
		encode:  func(dst []byte, k K, v V) ([]byte, error) { return values.Serialize(dst, value(k, v)) },
		filters: filters,
	}
}

// AggregateDistinct is Aggregate that also knows, for each of columns,
// whether the record's value of the column is new in its key's group
// under each of the column's filters: what COUNT(DISTINCT col) FILTER
// (WHERE …), and any other aggregate of distinct values, needs. add
// receives fresh, one bit set per column (fresh[c] for columns[c]): bit i
// is set when the record passes the column's filter i and no earlier
// record of the key with the same value of the column passed it. A count
// of distinct values adds the bit; fresh is reused across records.
//
// The distinct values are kept in the store "<store>-distinct", one entry
// per (key, column, value) holding the bits of the filters the value has
// passed, so a record costs one lookup per column however many filters
// the column has (Flink's distinct aggregates keep one map per distinct
// column in the same way), and a write only when a bit is new. Both
// stores are logged to their changelogs and written through the task's
// transaction like every store, so the counts are exactly once. The input
// is a stream of insertions: a value, once seen, stays seen (nothing is
// retracted), and the stores grow with the distinct values, as the SQL's
// state does without a TTL.
//
// The aggregate is forwarded as Aggregate's: every update, or, with the
// table cache on, the latest update per key once per commit.
func AggregateDistinct[K, V, A any](g GroupedStream[K, V], store string, columns []DistinctColumn[K, V], init func() A, add func(key K, value V, fresh []uint64, agg A) A, aggs serde.Serde[A]) Table[K, A] {
	if len(columns) == 0 || len(columns) > 255 {
		g.s.t.fail("eddy: AggregateDistinct %s: %d columns; give 1 to 255 (or use Aggregate)", store, len(columns))
	}
	for c, col := range columns {
		if col.err != nil {
			g.s.t.fail("eddy: AggregateDistinct %s: column %d: %w", store, c, col.err)
		}
	}
	seen := NewKeyValueStoreSpec(store+"-distinct", serde.Bytes(), serde.Int64())
	return aggregate(g, store, "aggregate-distinct-", init, aggs, func(b *taskBuild) (func(K, V, A) (A, error), error) {
		buf, err := b.tc.Store(seen.name)
		if err != nil {
			return nil, err
		}
		d := newDistinctValues(buf, g.keys, columns)
		return func(k K, v V, agg A) (A, error) {
			if err := d.look(k, v); err != nil {
				return agg, fmt.Errorf("eddy: AggregateDistinct %s: %w", store, err)
			}
			agg = add(k, v, d.fresh, agg)
			d.record()
			return agg, nil
		}, nil
	}, seen)
}

// distinctValues is one task's store of the values an AggregateDistinct
// has seen. An entry's key is the group key's encoding prefixed by its
// uvarint length, the column's index (one byte), then the value's
// encoding; its value the filters' bits (8 bytes, big-endian).
type distinctValues[K, V any] struct {
	buf     *state.StoreBuffer
	keys    serde.Serde[K]
	columns []DistinctColumn[K, V]
	fresh   []uint64
	// key is the group key's encoding; while fresh[c] != 0, entries[c]
	// is column c's entry and bits[c] its new bits, which record
	// writes; word is an entry's value being written: reused.
	key     []byte
	entries [][]byte
	bits    []uint64
	word    [8]byte
}

func newDistinctValues[K, V any](buf *state.StoreBuffer, keys serde.Serde[K], columns []DistinctColumn[K, V]) *distinctValues[K, V] {
	return &distinctValues[K, V]{buf: buf, keys: keys, columns: columns,
		fresh: make([]uint64, len(columns)), entries: make([][]byte, len(columns)), bits: make([]uint64, len(columns))}
}

// look sets fresh for the record (k, v) and finds its values' new bits,
// without writing them: a record that fails here, or in the adder after,
// leaves no value seen that it did not count (an error policy that skips
// it keeps the writes made before the failure).
func (d *distinctValues[K, V]) look(k K, v V) error {
	keyed := false
	for c, col := range d.columns {
		d.fresh[c] = 0
		passed := col.filters(k, v)
		if passed == 0 {
			continue
		}
		var err error
		if !keyed {
			if d.key, err = d.keys.Serialize(d.key[:0], k); err != nil {
				return fmt.Errorf("encode key: %w", err)
			}
			keyed = true
		}
		e := append(binary.AppendUvarint(d.entries[c][:0], uint64(len(d.key))), d.key...)
		if e, err = col.encode(append(e, byte(c)), k, v); err != nil {
			return fmt.Errorf("encode column %d: %w", c, err)
		}
		d.entries[c] = e
		var had uint64
		old, ok, err := d.buf.Get(e)
		if err != nil {
			return err
		}
		if ok {
			if len(old) != 8 {
				return fmt.Errorf("store %s: a value of %d bytes, want 8", d.buf.Name(), len(old))
			}
			had = binary.BigEndian.Uint64(old)
		}
		if d.fresh[c] = passed &^ had; d.fresh[c] != 0 {
			d.bits[c] = had | passed
			if err := checkWrite(d.buf, e, d.word[:]); err != nil {
				return err
			}
		}
	}
	return nil
}

// record writes the new bits that look found.
func (d *distinctValues[K, V]) record() {
	for c, f := range d.fresh {
		if f != 0 {
			binary.BigEndian.PutUint64(d.word[:], d.bits[c])
			d.buf.Put(d.entries[c], d.word[:])
		}
	}
}
