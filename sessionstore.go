package eddy

import (
	"encoding/binary"
	"fmt"
	"iter"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/state"
)

// SessionStoreSpec declares a session store: per key, sessions
// (Window{Start, End}) and their values, kept for a retention of stream
// time after they end.
type SessionStoreSpec[K, V any] struct {
	name   string
	keys   serde.Serde[K]
	values serde.Serde[V]
	keep   time.Duration
}

// NewSessionStoreSpec declares a session store named name that keeps a
// session for retention after its end, in stream time.
func NewSessionStoreSpec[K, V any](name string, retention time.Duration, keys serde.Serde[K], values serde.Serde[V]) SessionStoreSpec[K, V] {
	return SessionStoreSpec[K, V]{name: name, keys: keys, values: values, keep: retention}
}

// StoreName implements StoreSpec.
func (s SessionStoreSpec[K, V]) StoreName() string { return s.name }

func (s SessionStoreSpec[K, V]) retention() time.Duration { return s.keep }

// Open returns the task's instance of the store; see KeyValueStoreSpec.Open.
func (s SessionStoreSpec[K, V]) Open(ctx storeOpener) (*SessionStore[K, V], error) {
	return openTimed(ctx, "session", s.name, s.keep, s.View)
}

// View returns a typed view of a task's raw store buffer (for tools).
func (s SessionStoreSpec[K, V]) View(buf *state.StoreBuffer) *SessionStore[K, V] {
	return &SessionStore[K, V]{buf: buf, keys: s.keys, values: s.values, exp: newSegments(s.keep)}
}

// SessionStore is a task's typed view of a session store. A session is written
// twice: under [segment of its end][key length][key][start] with its end
// before its value, so a key's sessions near a time are a few prefix
// scans, and under an index [0xfe][end][key][start], so the sessions that
// ended in a time range are one scan. Expiry drops whole segments of both.
// The end is not in the data key because a session grows at its end with
// nearly every record: a key that changed each time would leave a deleted
// key per record in the transaction's write buffer, which every later scan
// of that key must step over (a hot key's scans grew with the
// transaction). A key's sessions must therefore have distinct starts, as
// session windows (disjoint per key), sliding windows and stream-stream
// joins (start = end) have: a Put with the start of another of the key's
// sessions in the same segment replaces that session's value (Remove the
// old session first, as the aggregations do).
type SessionStore[K, V any] struct {
	buf    *state.StoreBuffer
	keys   serde.Serde[K]
	values serde.Serde[V]
	exp    segments
	kbuf   []byte
	ibuf   []byte
	vbuf   []byte
	kenc   []byte
}

func (s *SessionStore[K, V]) expiry() *segments { return &s.exp }

const sessionIndexPrefix = 0xfe

func (s *SessionStore[K, V]) encodeKey(k K) error {
	var err error
	if s.kenc, err = s.keys.Serialize(s.kenc[:0], k); err != nil {
		return fmt.Errorf("eddy: store %s: encode key: %w", s.buf.Name(), err)
	}
	return nil
}

// keyPrefix is [segment start of end][uvarint key length][key].
func (s *SessionStore[K, V]) keyPrefix(dst []byte, segStart int64) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(segStart))
	dst = binary.AppendUvarint(dst, uint64(len(s.kenc)))
	return append(dst, s.kenc...)
}

func (s *SessionStore[K, V]) keys2(w Window) (data, index []byte) {
	s.kbuf = s.keyPrefix(s.kbuf[:0], w.End-w.End%s.exp.segment)
	s.kbuf = binary.BigEndian.AppendUint64(s.kbuf, uint64(w.Start))
	s.ibuf = append(s.ibuf[:0], sessionIndexPrefix)
	s.ibuf = binary.BigEndian.AppendUint64(s.ibuf, uint64(w.End))
	s.ibuf = binary.AppendUvarint(s.ibuf, uint64(len(s.kenc)))
	s.ibuf = append(s.ibuf, s.kenc...)
	s.ibuf = binary.BigEndian.AppendUint64(s.ibuf, uint64(w.Start))
	return s.kbuf, s.ibuf
}

// Put sets the value of k's session w. k's sessions must have distinct
// starts (see SessionStore).
func (s *SessionStore[K, V]) Put(k K, w Window, v V) error {
	if w.Start < 0 || w.End < w.Start {
		return fmt.Errorf("eddy: store %s: session [%d, %d] is not a valid window", s.buf.Name(), w.Start, w.End)
	}
	if err := s.encodeKey(k); err != nil {
		return err
	}
	var err error
	if s.vbuf, err = s.values.Serialize(binary.BigEndian.AppendUint64(s.vbuf[:0], uint64(w.End)), v); err != nil {
		return fmt.Errorf("eddy: store %s: encode value: %w", s.buf.Name(), err)
	}
	data, index := s.keys2(w)
	if err := checkWrite(s.buf, data, s.vbuf); err != nil {
		return err
	}
	if err := checkWrite(s.buf, index, nil); err != nil {
		return err
	}
	s.buf.Put(data, s.vbuf)
	s.buf.Put(index, nil)
	if s.exp.now != nil {
		s.Expire(s.exp.now())
	}
	return nil
}

// Remove deletes k's session w.
func (s *SessionStore[K, V]) Remove(k K, w Window) error {
	if err := s.encodeKey(k); err != nil {
		return err
	}
	data, index := s.keys2(w)
	s.buf.Delete(data)
	s.buf.Delete(index)
	return nil
}

// get returns k's session w, if the store has it: one point read, where
// Find scans all of the key's sessions in w's segment (the stream-stream
// join adds each record to the list at its key and timestamp with it).
func (s *SessionStore[K, V]) get(k K, w Window) (V, bool, error) {
	var zero V
	if err := s.encodeKey(k); err != nil {
		return zero, false, err
	}
	data, _ := s.keys2(w)
	vb, ok, err := s.buf.Get(data)
	if err != nil || !ok {
		return zero, false, err
	}
	if len(vb) < 8 {
		return zero, false, fmt.Errorf("eddy: store %s: session value of %d bytes has no end", s.buf.Name(), len(vb))
	}
	if int64(binary.BigEndian.Uint64(vb)) != w.End {
		return zero, false, nil // k's session that starts at w.Start ends elsewhere
	}
	v, err := s.values.Deserialize(vb[8:])
	if err != nil {
		return zero, false, fmt.Errorf("eddy: store %s: decode value: %w", s.buf.Name(), err)
	}
	return v, true, nil
}

// Find returns k's sessions that end at or after earliest and start at or
// before latest, in end order. maxEnd bounds the ends the store holds (the
// stream time), so the scan knows where to stop. A scan that fails (an
// undecodable entry, an I/O error) yields the error once and stops.
func (s *SessionStore[K, V]) Find(k K, earliest, latest, maxEnd int64) iter.Seq2[KeyValue[Windowed[K], V], error] {
	return func(yield func(KeyValue[Windowed[K], V], error) bool) {
		err := s.find(k, earliest, latest, maxEnd, func(w Window, v V) bool {
			return yield(KeyValue[Windowed[K], V]{Key: Windowed[K]{Key: k, Window: w}, Value: v}, nil)
		})
		if err != nil {
			yield(KeyValue[Windowed[K], V]{}, err)
		}
	}
}

// find is Find for the engine's hot paths: a callback, no iterator
// closure; fn returning false stops the scan.
func (s *SessionStore[K, V]) find(k K, earliest, latest, maxEnd int64, fn func(w Window, v V) bool) error {
	if err := s.encodeKey(k); err != nil {
		return err
	}
	earliest = max(earliest, 0)
	// The prefix is built once, a copy of the key's encoding: fn may
	// encode other keys into s.kenc (a Find loop that writes), and only
	// the segment, its first 8 bytes, changes from one segment to the next.
	first := earliest - earliest%s.exp.segment
	prefix := s.keyPrefix(nil, first)
	stop := false
	for seg := first; !stop && seg <= maxEnd; seg += s.exp.segment {
		binary.BigEndian.PutUint64(prefix, uint64(seg))
		err := s.buf.PrefixScan(prefix, func(kb, vb []byte) error {
			rest := kb[len(prefix):]
			if len(rest) != 8 {
				return nil // a longer key that shares the prefix
			}
			if len(vb) < 8 {
				return fmt.Errorf("eddy: store %s: session value of %d bytes has no end", s.buf.Name(), len(vb))
			}
			w := Window{Start: int64(binary.BigEndian.Uint64(rest)), End: int64(binary.BigEndian.Uint64(vb))}
			if w.End < earliest || w.Start > latest {
				return nil
			}
			v, err := s.values.Deserialize(vb[8:])
			if err != nil {
				return fmt.Errorf("eddy: store %s: decode value: %w", s.buf.Name(), err)
			}
			if !fn(w, v) {
				stop = true
				return errStopScan
			}
			return nil
		})
		if err != nil && err != errStopScan {
			return err
		}
	}
	return nil
}

// FetchEnded returns every session (any key) that ended in [from, to), in
// end order; errors as in Find.
func (s *SessionStore[K, V]) FetchEnded(from, to int64) iter.Seq2[KeyValue[Windowed[K], V], error] {
	return func(yield func(KeyValue[Windowed[K], V], error) bool) {
		err := s.fetchEnded(from, to, func(k K, w Window, v V) bool {
			return yield(KeyValue[Windowed[K], V]{Key: Windowed[K]{Key: k, Window: w}, Value: v}, nil)
		})
		if err != nil {
			yield(KeyValue[Windowed[K], V]{}, err)
		}
	}
}

// fetchEnded is FetchEnded for the engine's hot paths; fn returning false
// stops the scan.
func (s *SessionStore[K, V]) fetchEnded(from, to int64, fn func(k K, w Window, v V) bool) error {
	from, to = max(from, 0), max(to, 0)
	if from >= to {
		return nil
	}
	lo := binary.BigEndian.AppendUint64([]byte{sessionIndexPrefix}, uint64(from))
	hi := binary.BigEndian.AppendUint64([]byte{sessionIndexPrefix}, uint64(to))
	type entry struct {
		k    K
		w    Window
		kenc []byte
	}
	var entries []entry
	err := s.buf.Scan(lo, hi, func(ib, _ []byte) error {
		end := int64(binary.BigEndian.Uint64(ib[1:]))
		l, n := binary.Uvarint(ib[9:])
		if n <= 0 || len(ib) != 9+n+int(l)+8 {
			return fmt.Errorf("eddy: store %s: malformed session index key", s.buf.Name())
		}
		kenc := ib[9+n : 9+n+int(l)]
		k, err := s.keys.Deserialize(kenc)
		if err != nil {
			return fmt.Errorf("eddy: store %s: decode key: %w", s.buf.Name(), err)
		}
		start := int64(binary.BigEndian.Uint64(ib[9+n+int(l):]))
		entries = append(entries, entry{k: k, w: Window{Start: start, End: end}, kenc: append([]byte(nil), kenc...)})
		return nil
	})
	if err != nil {
		return err
	}
	for _, e := range entries {
		s.kenc = append(s.kenc[:0], e.kenc...)
		data, _ := s.keys2(e.w)
		vb, ok, err := s.buf.Get(data)
		if err != nil {
			return err
		}
		if !ok || len(vb) < 8 || int64(binary.BigEndian.Uint64(vb)) != e.w.End {
			return fmt.Errorf("eddy: store %s: session index names a missing session", s.buf.Name())
		}
		v, err := s.values.Deserialize(vb[8:])
		if err != nil {
			return fmt.Errorf("eddy: store %s: decode value: %w", s.buf.Name(), err)
		}
		if !fn(e.k, e.w, v) {
			return nil
		}
	}
	return nil
}

// Expire drops the segments whose sessions all ended before
// streamTime - retention: two range deletions, one for the sessions and one
// for their index entries.
func (s *SessionStore[K, V]) Expire(streamTime int64) {
	if below, ok := s.exp.expired(s.buf, streamTime); ok {
		s.buf.DeleteRange(nil, binary.BigEndian.AppendUint64(nil, uint64(below)))
		s.buf.DeleteRange([]byte{sessionIndexPrefix}, binary.BigEndian.AppendUint64([]byte{sessionIndexPrefix}, uint64(below)))
	}
}
