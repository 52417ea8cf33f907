package eddy

import (
	"encoding/binary"
	"fmt"
	"iter"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/state"
)

// SessionWindows group a key's records into sessions: runs of records no
// more than the inactivity gap apart. A record that bridges two sessions
// merges them. A session is reported as Window{Start, End} with Start its
// first and End its last record's timestamp (both inclusive, as in Kafka
// Streams).
type SessionWindows struct {
	gap, grace int64 // ms
	err        error
}

// SessionWindowsWithGap returns session windows with the given inactivity
// gap and no grace period (see WithGrace).
func SessionWindowsWithGap(gap time.Duration) SessionWindows {
	w := SessionWindows{gap: gap.Milliseconds()}
	if w.gap <= 0 {
		w.err = fmt.Errorf("eddy: session gap %v: use at least 1ms", gap)
	}
	return w
}

// WithGrace sets how long a session still accepts out-of-order records
// after it could last have grown: a session closes once stream time passes
// its end + gap + grace; a record that would only extend closed sessions is
// late.
func (w SessionWindows) WithGrace(grace time.Duration) SessionWindows {
	if grace < 0 && w.err == nil {
		w.err = fmt.Errorf("eddy: session grace %v: use zero or more", grace)
	}
	w.grace = grace.Milliseconds()
	return w
}

// SessionWindowedStream is a grouped stream cut into sessions.
type SessionWindowedStream[K, V any] struct {
	g       GroupedStream[K, V]
	windows SessionWindows
	emit    EmitStrategy
	late    *lateRecords
}

// SessionWindowedBy cuts g into sessions.
func SessionWindowedBy[K, V any](g GroupedStream[K, V], w SessionWindows) SessionWindowedStream[K, V] {
	if w.err != nil {
		g.s.t.fail("%w", w.err)
	}
	return SessionWindowedStream[K, V]{g: g, windows: w, late: &lateRecords{}}
}

// Emit sets when the aggregations of w forward their results (default
// EmitEveryUpdate: each update, and a tombstone for each session that a
// merge replaced).
func (w SessionWindowedStream[K, V]) Emit(e EmitStrategy) SessionWindowedStream[K, V] {
	w.emit = e
	return w
}

// SessionLateRecords returns the records that the aggregations of w drop
// as late.
func SessionLateRecords[K, V any](w SessionWindowedStream[K, V]) Stream[K, V] {
	return LateRecords(WindowedStream[K, V]{g: w.g, late: w.late})
}

// SessionAggregate folds each key's records per session: init gives a new
// session's aggregate, add folds one record in, merge combines the
// aggregates of two sessions that a record joined. Sessions live in the
// session store named store until gap + grace after they end.
func SessionAggregate[K, V, A any](w SessionWindowedStream[K, V], store string, init func() A, add func(key K, value V, agg A) A, merge func(key K, a, b A) A, aggs serde.Serde[A]) Table[Windowed[K], A] {
	t := w.g.s.t
	win := w.windows
	// A record that is not late (ts >= now - gap - grace) reaches
	// sessions that ended at ts - gap: keep them that long.
	retention := time.Duration(2*win.gap+win.grace) * time.Millisecond
	spec := NewSessionStoreSpec(store, retention, w.g.keys, aggs)
	n := t.add("session-aggregate-"+store, w.g.s.n)
	t.addStore(store, n, retention, spec)
	emit, late := w.emit, w.late
	n.build = func(b *taskBuild) error {
		out := &emitter[Windowed[K], A]{}
		b.out[n] = out
		buf, err := b.tc.Store(store)
		if err != nil {
			return err
		}
		p := &sessionAggregator[K, V, A]{b: b, out: out, store: spec.View(buf), win: win, emit: emit,
			init: init, add: add, merge: merge, late: late, name: store}
		in := output[K, V](b, w.g.s.n)
		in.children = append(in.children, p)
		return nil
	}
	return Table[Windowed[K], A]{t: t, n: n, store: store}
}

// SessionCount counts each key's records per session.
func SessionCount[K, V any](w SessionWindowedStream[K, V], store string) Table[Windowed[K], int64] {
	return SessionAggregate(w, store, func() int64 { return 0 },
		func(_ K, _ V, n int64) int64 { return n + 1 },
		func(_ K, a, b int64) int64 { return a + b }, serde.Int64())
}

type sessionAggregator[K, V, A any] struct {
	b     *taskBuild
	out   *emitter[Windowed[K], A]
	store *SessionStore[K, A]
	win   SessionWindows
	emit  EmitStrategy
	init  func() A
	add   func(K, V, A) A
	merge func(K, A, A) A
	late  *lateRecords
	name  string

	emitted watermark // sessions ending before it were emitted (EmitFinal)
	lateOut *emitter[K, V]
	found   []session[A]
}

type session[A any] struct {
	Window
	agg A
}

func (p *sessionAggregator[K, V, A]) receive(r Record[K, V]) error {
	if r.Tombstone {
		return nil
	}
	now := p.b.tc.StreamTime()
	ts := r.Timestamp
	closeBefore := now - p.win.gap - p.win.grace // sessions ending before are closed
	p.found = p.found[:0]
	// With EmitFinal a closed session was emitted as final: a record
	// never merges into it (it may start a session beside it), or the
	// session would be emitted twice. With every update, as in Kafka
	// Streams, a record that is not late merges with any session in reach.
	earliest := ts - p.win.gap
	if p.emit == EmitFinal {
		earliest = max(earliest, closeBefore)
	}
	err := p.store.find(r.Key, earliest, ts+p.win.gap, now, func(w Window, agg A) bool {
		p.found = append(p.found, session[A]{Window: w, agg: agg})
		return true
	})
	if err != nil {
		return err
	}
	merged := Window{Start: ts, End: ts}
	for _, s := range p.found {
		merged.Start, merged.End = min(merged.Start, s.Start), max(merged.End, s.End)
	}
	if merged.End < closeBefore {
		return dropLate(p.b, p.late, &p.lateOut, p.name, r, now)
	}
	agg := p.init()
	for _, s := range p.found {
		agg = p.merge(r.Key, agg, s.agg)
		if err := p.store.Remove(r.Key, s.Window); err != nil {
			return err
		}
		if p.emit == EmitEveryUpdate && s.Window != merged {
			if err := p.out.emit(Record[Windowed[K], A]{Key: Windowed[K]{Key: r.Key, Window: s.Window}, Timestamp: ts, Tombstone: true}); err != nil {
				return err
			}
		}
	}
	agg = p.add(r.Key, r.Value, agg)
	if err := p.store.Put(r.Key, merged, agg); err != nil {
		return err
	}
	if p.emit == EmitEveryUpdate {
		if err := p.out.emit(Record[Windowed[K], A]{Key: Windowed[K]{Key: r.Key, Window: merged}, Value: agg, Timestamp: ts, Headers: r.Headers}); err != nil {
			return err
		}
	} else if err := p.emitClosed(closeBefore); err != nil {
		return err
	}
	p.store.Expire(now)
	return nil
}

// emitClosed forwards, in end order, the sessions that ended before
// closeBefore and were not forwarded yet.
func (p *sessionAggregator[K, V, A]) emitClosed(closeBefore int64) error {
	emitted, err := p.emitted.get(p.store.buf)
	if err != nil {
		return err
	}
	if closeBefore <= emitted {
		return nil
	}
	var ferr error
	err = p.store.fetchEnded(emitted, closeBefore, func(k K, w Window, agg A) bool {
		ferr = p.out.emit(Record[Windowed[K], A]{Key: Windowed[K]{Key: k, Window: w}, Value: agg, Timestamp: w.End})
		return ferr == nil
	})
	if err != nil {
		return err
	}
	if ferr != nil {
		return ferr
	}
	p.emitted.set(p.store.buf, closeBefore)
	return nil
}

// SessionStoreSpec declares a session store: per key, sessions
// (Window{Start, End}) and their values, kept for a retention of stream
// time after they end.
type SessionStoreSpec[K, V any] struct {
	name   string
	keys   serde.Serde[K]
	values serde.Serde[V]
	keep   time.Duration
}

// NewSessionStoreSpec declares a session store named name that keeps a session
// for retention after its end, in stream time.
func NewSessionStoreSpec[K, V any](name string, retention time.Duration, keys serde.Serde[K], values serde.Serde[V]) SessionStoreSpec[K, V] {
	return SessionStoreSpec[K, V]{name: name, keys: keys, values: values, keep: retention}
}

// StoreName implements StoreSpec.
func (s SessionStoreSpec[K, V]) StoreName() string { return s.name }

func (s SessionStoreSpec[K, V]) retention() time.Duration { return s.keep }

// Open returns the task's instance of the store; see KeyValueStoreSpec.Open.
func (s SessionStoreSpec[K, V]) Open(ctx storeOpener) (*SessionStore[K, V], error) {
	if s.keep <= 0 {
		return nil, fmt.Errorf("eddy: session store %s: retention %v: set a positive retention", s.name, s.keep)
	}
	buf, err := ctx.openStore(s.name)
	if err != nil {
		return nil, err
	}
	ss := s.View(buf)
	ss.now = ctx.task().tc.StreamTime
	return ss, nil
}

// View returns a typed view of a task's raw store buffer (for tools).
func (s SessionStoreSpec[K, V]) View(buf *state.StoreBuffer) *SessionStore[K, V] {
	ret := s.keep.Milliseconds()
	return &SessionStore[K, V]{buf: buf, keys: s.keys, values: s.values, retention: ret,
		segment: max(ret/2, 1000), droppedBelow: -1}
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
	buf                              *state.StoreBuffer
	keys                             serde.Serde[K]
	values                           serde.Serde[V]
	retention, segment, droppedBelow int64
	aborts                           uint64 // the buffer's Aborts when droppedBelow was set
	kbuf, ibuf, vbuf, kenc           []byte
	// now, set when a processor opened the store, reads stream time:
	// Put then expires old segments itself.
	now func() int64
}

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
	s.kbuf = s.keyPrefix(s.kbuf[:0], w.End-w.End%s.segment)
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
	s.buf.Put(data, s.vbuf)
	s.buf.Put(index, nil)
	if s.now != nil {
		s.Expire(s.now())
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
	var prefix []byte
	stop := false
	for seg := earliest - earliest%s.segment; !stop && seg <= maxEnd; seg += s.segment {
		prefix = s.keyPrefix(prefix[:0], seg)
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
	if streamTime == state.NoStreamTime {
		return
	}
	live := streamTime - s.retention
	below := live - live%s.segment
	if s.aborts != s.buf.Aborts() {
		// A transaction aborted since the last drop: it may have
		// carried it. Dropping again is idempotent.
		s.aborts, s.droppedBelow = s.buf.Aborts(), -1
	}
	if live < 0 || below <= s.droppedBelow {
		return
	}
	s.buf.DeleteRange(nil, binary.BigEndian.AppendUint64(nil, uint64(below)))
	s.buf.DeleteRange([]byte{sessionIndexPrefix}, binary.BigEndian.AppendUint64([]byte{sessionIndexPrefix}, uint64(below)))
	s.droppedBelow = below
}
