package eddy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/state"
)

// RegularJoin configures JoinStreamsRegular. The zero value keeps every
// record of both sides for ever, as a SQL join of two tables that only
// grow does.
type RegularJoin struct {
	leftUnique, rightUnique bool
	ttl                     int64 // ms; 0: no expiry
	err                     error
}

// LeftUnique declares that the left stream has at most one record per
// key, ever: an auction by its id, a person by its id. The join then
// stores a right record only until its left partner arrives: a right
// record that finds its left partner, or whose waiting ends when the
// partner arrives, can meet no other. The result is the same as without
// the declaration as long as it holds; it is the user's to make, as the
// join cannot check it in general: a second left record of a key is an
// error (the record fails, see Config.OnProcessError) when the first is
// still stored, and otherwise joins only the right records that arrive
// after it.
func (o RegularJoin) LeftUnique() RegularJoin {
	o.leftUnique = true
	return o
}

// RightUnique is LeftUnique for the right stream.
func (o RegularJoin) RightUnique() RegularJoin {
	o.rightUnique = true
	return o
}

// WithTTL bounds how long a stored record can be joined, in event time:
// once stream time passes its timestamp + ttl, it no longer joins, and a
// sweep (each ttl/2 of stream time) deletes it. This changes the result
// (pairs further apart than the TTL, as stream time saw them, are missing)
// in exchange for bounded state: Flink's table.exec.state.ttl, but in
// event time, so a replay expires the same records. A record older than
// the TTL when it arrives still joins what is stored, and is not stored.
func (o RegularJoin) WithTTL(ttl time.Duration) RegularJoin {
	o.ttl = ttl.Milliseconds()
	if ttl < time.Millisecond && o.err == nil {
		o.err = fmt.Errorf("eddy: regular join TTL %v: use at least 1ms", ttl)
	}
	return o
}

// JoinStreamsRegular joins two streams on their key with no time bound:
// SQL's regular (unbounded) inner join of two insert-only inputs, as
// Flink's StreamingJoinOperator runs it. Every left record and every right
// record of the same key make one result, joiner(key, l, r), emitted once,
// when the later of the two arrives, whichever side that is; the result's
// timestamp is the later of their timestamps and its headers the arriving
// record's. Inputs are insert-only: a record never retracts an earlier
// one, and a tombstone is ignored. Left and outer joins are not offered:
// their "no partner yet" results would need retracting when a partner
// arrives later.
//
// Each side's records are kept in a store, name+"-left" and name+"-right",
// keyed by the join key, so a record finds its partners with one lookup;
// like every store they commit with the task's transactions (exactly
// once), are logged to changelogs, and spill from memory to the state
// database. Without an option the state grows with the input; o declares
// a side unique per key (RegularJoin.LeftUnique), which stores the other
// side's records only until their partner arrives, and may set a TTL
// (RegularJoin.WithTTL). Streams whose key changed are repartitioned
// first (topics name+"-left" and name+"-right").
func JoinStreamsRegular[K, VL, VR, VO any](left Stream[K, VL], right Stream[K, VR], o RegularJoin, name string,
	keys serde.Serde[K], lvalues serde.Serde[VL], rvalues serde.Serde[VR],
	joiner func(key K, l VL, r VR) VO) Stream[K, VO] {
	t := left.t
	if o.err != nil {
		t.failOn("JoinStreamsRegular "+name, left.n, "%w", o.err)
	}
	if left.keyChanged {
		left = Repartition(left, name+"-left", keys, lvalues)
	}
	if right.keyChanged {
		right = Repartition(right, name+"-right", keys, rvalues)
	}
	n := t.add("join-regular-"+name, left.n, right.n)
	t.addStore(name+"-left", n, 0, nil)
	t.addStore(name+"-right", n, 0, nil)
	n.build = func(b *taskBuild) error {
		out := &emitter[K, VO]{}
		b.out[n] = out
		lbuf, err := b.tc.Store(name + "-left")
		if err != nil {
			return err
		}
		rbuf, err := b.tc.Store(name + "-right")
		if err != nil {
			return err
		}
		j := &regularJoin[K, VL, VR, VO]{b: b, out: out, name: name, keys: keys, joiner: joiner, ttl: o.ttl,
			left:  newJoinSide(lbuf, lvalues, o.leftUnique, "left", "LeftUnique"),
			right: newJoinSide(rbuf, rvalues, o.rightUnique, "right", "RightUnique")}
		j.flipped = func(k K, r VR, l VL) VO { return joiner(k, l, r) }
		if j.ttl > 0 {
			b.streamPunctuators = append(b.streamPunctuators, &punctuator{interval: max(j.ttl/2, 1), fn: j.sweep})
		}
		lin := output[K, VL](b, left.n)
		lin.children = append(lin.children, receiverFunc[K, VL](j.fromLeft))
		rin := output[K, VR](b, right.n)
		rin.children = append(rin.children, receiverFunc[K, VR](j.fromRight))
		return nil
	}
	return Stream[K, VO]{t: t, n: n}
}

// regularJoin is one task's instance of a regular join.
//
// Store layout (both sides), after Flink's JoinRecordStateViews: the key
// of an entry starts with uvarint(len(k)) ‖ k, k the encoded join key, so
// a key's entries are one prefix and no key's prefix is another's.
//   - A side declared unique (Flink's JoinKeyContainsUniqueKey view): one
//     entry per key, the prefix alone → timestamp (8 bytes) ‖ value.
//   - Otherwise (Flink's InputSideHasNoUniqueKey view, a record → its
//     count): prefix ‖ timestamp (8 bytes, big-endian, sign bit flipped)
//     ‖ value → uvarint(count). Equal records are one entry, so no
//     sequence number is needed, and a key's records come in time order.
//
// Headers of stored records are not kept: a result carries the arriving
// record's.
type regularJoin[K, VL, VR, VO any] struct {
	b      *taskBuild
	out    *emitter[K, VO]
	name   string
	keys   serde.Serde[K]
	joiner func(K, VL, VR) VO
	// flipped is joiner with its value arguments swapped, for a right
	// record meeting left ones.
	flipped func(K, VR, VL) VO
	ttl     int64
	left    *joinSide[VL]
	right   *joinSide[VR]
	kbuf    []byte // the arriving record's encoded key
	pbuf    []byte // and its entries' prefix
}

// joinSide is one side's store and what the join keeps to read it.
type joinSide[V any] struct {
	buf    *state.StoreBuffer
	values serde.Serde[V]
	unique bool
	label  string // "left", "right"
	option string // the RegularJoin method that declares it unique
	ebuf   []byte // an entry's key or value being built
	cbuf   []byte // a count being written
	end    []byte // the end of a prefix scan
	// found are the records of the key find looked up.
	found []stored[V]
	// scan is find's callback, made once: a closure made per record
	// would allocate. It reads the prefix, the oldest live time and
	// whether to delete what it finds from scanPrefix, scanFrom and take.
	scan       func(k, b []byte) error
	scanPrefix []byte
	scanFrom   int64
	take       bool
}

// stored is a record of a side found in its store.
type stored[V any] struct {
	ts    int64
	v     V
	count uint64
}

const joinTimeBytes = 8

func newJoinSide[V any](buf *state.StoreBuffer, values serde.Serde[V], unique bool, label, option string) *joinSide[V] {
	s := &joinSide[V]{buf: buf, values: values, unique: unique, label: label, option: option}
	s.scan = s.scanned
	return s
}

// find sets s.found to the records of the key whose prefix is p with a
// timestamp of at least from (the live ones); with take, it also deletes
// them from the store, each as the scan passes it, while its entry is in
// the CPU cache (a million records dropped after the scan cost Nexmark q5
// a lookup each).
func (s *joinSide[V]) find(p []byte, from int64, take bool) error {
	s.found, s.take = s.found[:0], take
	if s.unique {
		b, ok, err := s.buf.Get(p)
		if err != nil || !ok {
			return err
		}
		if len(b) < joinTimeBytes {
			return fmt.Errorf("eddy: store %s: an entry of %d bytes, too short for a record", s.buf.Name(), len(b))
		}
		ts := int64(binary.BigEndian.Uint64(b))
		if ts < from {
			return nil
		}
		v, err := s.values.Deserialize(b[joinTimeBytes:])
		if err != nil {
			return fmt.Errorf("eddy: store %s: decode value: %w", s.buf.Name(), err)
		}
		s.found = append(s.found, stored[V]{ts: ts, v: v, count: 1})
		if take {
			s.buf.Delete(p)
		}
		return nil
	}
	s.scanPrefix, s.scanFrom = p, from
	s.end = appendPrefixEnd(s.end[:0], p)
	return s.buf.Scan(p, s.end, s.scan)
}

// scanned is find's callback for an entry of a non-unique side.
func (s *joinSide[V]) scanned(k, b []byte) error {
	p := s.scanPrefix
	if len(k) < len(p)+joinTimeBytes {
		return fmt.Errorf("eddy: store %s: an entry key of %d bytes, too short for a record", s.buf.Name(), len(k))
	}
	ts := int64(binary.BigEndian.Uint64(k[len(p):]) ^ 1<<63)
	if ts < s.scanFrom {
		return nil
	}
	count, n := binary.Uvarint(b)
	if n <= 0 || n != len(b) {
		return fmt.Errorf("eddy: store %s: an entry's count does not decode", s.buf.Name())
	}
	v, err := s.values.Deserialize(k[len(p)+joinTimeBytes:])
	if err != nil {
		return fmt.Errorf("eddy: store %s: decode value: %w", s.buf.Name(), err)
	}
	s.found = append(s.found, stored[V]{ts: ts, v: v, count: count})
	if s.take {
		s.buf.Delete(k)
	}
	return nil
}

// appendPrefixEnd appends to dst the smallest key after every key that
// starts with p (p's first byte, a length, is never 0xff).
func appendPrefixEnd(dst, p []byte) []byte {
	dst = append(dst, p...)
	for i := len(dst) - 1; i >= 0; i-- {
		if dst[i] != 0xff {
			dst[i]++
			return dst[:i+1]
		}
	}
	return nil
}

// add stores the record (ts, v) of the key whose prefix is p; stored
// records older than from are no longer live.
func (s *joinSide[V]) add(p []byte, ts int64, v V, from int64) error {
	var err error
	if s.unique {
		b, ok, err := s.buf.Get(p)
		if err != nil {
			return err
		}
		if ok && len(b) >= joinTimeBytes && int64(binary.BigEndian.Uint64(b)) >= from {
			return fmt.Errorf("eddy: join store %s: a second %s record of a key, which RegularJoin.%s declares unique; remove %s if keys repeat",
				s.buf.Name(), s.label, s.option, s.option)
		}
		s.ebuf = binary.BigEndian.AppendUint64(s.ebuf[:0], uint64(ts))
		if s.ebuf, err = s.values.Serialize(s.ebuf, v); err != nil {
			return fmt.Errorf("eddy: store %s: encode value: %w", s.buf.Name(), err)
		}
		if err := checkWrite(s.buf, p, s.ebuf); err != nil {
			return err
		}
		s.buf.Put(p, s.ebuf)
		return nil
	}
	s.ebuf = binary.BigEndian.AppendUint64(append(s.ebuf[:0], p...), uint64(ts)^1<<63)
	if s.ebuf, err = s.values.Serialize(s.ebuf, v); err != nil {
		return fmt.Errorf("eddy: store %s: encode value: %w", s.buf.Name(), err)
	}
	b, ok, err := s.buf.Get(s.ebuf)
	if err != nil {
		return err
	}
	count := uint64(1)
	if ok {
		c, n := binary.Uvarint(b)
		if n <= 0 {
			return fmt.Errorf("eddy: store %s: an entry's count does not decode", s.buf.Name())
		}
		count += c
	}
	s.cbuf = binary.AppendUvarint(s.cbuf[:0], count)
	if err := checkWrite(s.buf, s.ebuf, s.cbuf); err != nil {
		return err
	}
	s.buf.Put(s.ebuf, s.cbuf)
	return nil
}

// sweep deletes the side's records older than from.
func (s *joinSide[V]) sweep(from int64) error {
	var expired [][]byte
	err := s.buf.Scan(nil, nil, func(k, b []byte) error {
		var ts int64
		if s.unique {
			if len(b) < joinTimeBytes {
				return fmt.Errorf("eddy: store %s: an entry of %d bytes, too short for a record", s.buf.Name(), len(b))
			}
			ts = int64(binary.BigEndian.Uint64(b))
		} else {
			l, n := binary.Uvarint(k)
			if n <= 0 || uint64(len(k)-n) < l+joinTimeBytes {
				return fmt.Errorf("eddy: store %s: an entry key of %d bytes does not decode", s.buf.Name(), len(k))
			}
			ts = int64(binary.BigEndian.Uint64(k[n+int(l):]) ^ 1<<63)
		}
		if ts < from {
			expired = append(expired, append([]byte(nil), k...))
		}
		return nil
	})
	for _, k := range expired {
		s.buf.Delete(k)
	}
	return err
}

// from is the oldest timestamp of a stored record that still joins.
func (j *regularJoin[K, VL, VR, VO]) from() int64 {
	now := j.b.tc.StreamTime()
	if j.ttl <= 0 || now == state.NoStreamTime {
		return math.MinInt64
	}
	return now - j.ttl
}

func (j *regularJoin[K, VL, VR, VO]) sweep(int64) error {
	from := j.from()
	return errors.Join(j.left.sweep(from), j.right.sweep(from))
}

// prefix encodes k as its entries' key prefix, in j.pbuf.
func (j *regularJoin[K, VL, VR, VO]) prefix(k K) ([]byte, error) {
	var err error
	if j.kbuf, err = j.keys.Serialize(j.kbuf[:0], k); err != nil {
		return nil, fmt.Errorf("eddy: join %s: encode key: %w", j.name, err)
	}
	j.pbuf = append(binary.AppendUvarint(j.pbuf[:0], uint64(len(j.kbuf))), j.kbuf...)
	return j.pbuf, nil
}

func (j *regularJoin[K, VL, VR, VO]) fromLeft(r Record[K, VL]) error {
	return arrive(j, j.left, j.right, r, j.joiner)
}

func (j *regularJoin[K, VL, VR, VO]) fromRight(r Record[K, VR]) error {
	return arrive(j, j.right, j.left, r, j.flipped)
}

// arrive joins r, a record of side own, with the stored records of side
// other, then updates the state: r is stored unless the other side is
// unique and its record was found (the only partner r will ever have);
// if own is unique, the records found of the other side meet their only
// partner now and leave the join as they are found (so if emitting a
// result fails, the record fails with its partners gone: an abort brings
// them back, a policy that skips or dead-letters the record loses them
// with its results). pair makes a result from r's value and a partner's.
func arrive[K, VL, VR, VO, VA, VB any](j *regularJoin[K, VL, VR, VO], own *joinSide[VA], other *joinSide[VB], r Record[K, VA], pair func(K, VA, VB) VO) error {
	if r.Tombstone {
		return nil
	}
	p, err := j.prefix(r.Key)
	if err != nil {
		return err
	}
	from := j.from()
	if err := other.find(p, from, own.unique); err != nil {
		return err
	}
	for _, f := range other.found {
		for range f.count {
			if err := j.out.emit(Record[K, VO]{Key: r.Key, Value: pair(r.Key, r.Value, f.v), Timestamp: max(r.Timestamp, f.ts), Headers: r.Headers}); err != nil {
				return err
			}
		}
	}
	matched := len(other.found) > 0
	if other.unique && matched || r.Timestamp < from {
		return nil
	}
	return own.add(p, r.Timestamp, r.Value, from)
}
