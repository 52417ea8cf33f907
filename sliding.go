package eddy

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/eddy-streams/eddy/serde"
)

// SlidingWindows are Kafka Streams' sliding windows: windows of a fixed
// time difference that slide with the records rather than with the clock.
// Each record r defines the window [r - d, r] that ends at it and, once a
// later record falls in it, the window [r + 1, r + 1 + d] that starts just
// after it; those are the only windows (every distinct set of records no
// more than d apart). Start and End are both inclusive.
type SlidingWindows struct {
	diff, grace int64 // ms
	err         error
}

// SlidingWindowsWithTimeDifference returns sliding windows of maximum time
// difference d, with no grace period (see WithGrace).
func SlidingWindowsWithTimeDifference(d time.Duration) SlidingWindows {
	w := SlidingWindows{diff: d.Milliseconds()}
	if w.diff <= 0 {
		w.err = fmt.Errorf("eddy: sliding window time difference %v: use at least 1ms", d)
	}
	return w
}

// WithGrace sets how long after its end a window accepts out-of-order
// records: a window [s, e] closes once stream time passes e + grace.
func (w SlidingWindows) WithGrace(grace time.Duration) SlidingWindows {
	if grace < 0 && w.err == nil {
		w.err = fmt.Errorf("eddy: sliding window grace %v: use zero or more", grace)
	}
	w.grace = grace.Milliseconds()
	return w
}

// SlidingWindowedStream is a grouped stream cut into sliding windows.
type SlidingWindowedStream[K, V any] struct {
	g       GroupedStream[K, V]
	windows SlidingWindows
	values  serde.Serde[V]
	emit    EmitStrategy
	late    *lateRecords
}

// SlidingWindowedBy cuts g into sliding windows. values encodes the
// records, which the aggregation keeps for the windows' life: a window's
// aggregate is computed from the records it holds (a fold cannot remove a
// record that slides out).
func SlidingWindowedBy[K, V any](g GroupedStream[K, V], w SlidingWindows, values serde.Serde[V]) SlidingWindowedStream[K, V] {
	if w.err != nil {
		g.s.t.fail("%w", w.err)
	}
	return SlidingWindowedStream[K, V]{g: g, windows: w, values: values, late: &lateRecords{}}
}

// Emit sets when the aggregations of w forward their results.
func (w SlidingWindowedStream[K, V]) Emit(e EmitStrategy) SlidingWindowedStream[K, V] {
	w.emit = e
	return w
}

// SlidingLateRecords returns the records that the aggregations of w drop
// as late.
func SlidingLateRecords[K, V any](w SlidingWindowedStream[K, V]) Stream[K, V] {
	return LateRecords(WindowedStream[K, V]{g: w.g, late: w.late})
}

// SlidingAggregate aggregates each key's records per sliding window. It
// uses two stores: store for the windows' aggregates and store + "-records"
// for the records.
func SlidingAggregate[K, V, A any](w SlidingWindowedStream[K, V], store string, init func() A, add func(key K, value V, agg A) A, aggs serde.Serde[A]) Table[Windowed[K], A] {
	t := w.g.s.t
	win := w.windows
	retention := time.Duration(win.diff+win.grace+1) * time.Millisecond
	aggSpec := NewWindowStoreSpec(store, retention, w.g.keys, aggs)
	recSpec := NewSessionStoreSpec(store+"-records", retention, w.g.keys, listSerde[V]{values: w.values})
	n := t.add("sliding-aggregate-"+store, w.g.s.n)
	t.addStore(store, n, retention, aggSpec)
	t.addStore(recSpec.name, n, retention, recSpec)
	emit, late := w.emit, w.late
	n.build = func(b *taskBuild) error {
		out := &emitter[Windowed[K], A]{}
		b.out[n] = out
		aggBuf, err := b.tc.Store(store)
		if err != nil {
			return err
		}
		recBuf, err := b.tc.Store(recSpec.name)
		if err != nil {
			return err
		}
		p := &slidingAggregator[K, V, A]{b: b, out: out, aggs: aggSpec.View(aggBuf), recs: recSpec.View(recBuf),
			win: win, emit: emit, init: init, add: add, late: late, name: store}
		in := output[K, V](b, w.g.s.n)
		in.children = append(in.children, p)
		return nil
	}
	return Table[Windowed[K], A]{t: t, n: n, store: store}
}

// SlidingCount counts each key's records per sliding window.
func SlidingCount[K, V any](w SlidingWindowedStream[K, V], store string) Table[Windowed[K], int64] {
	return SlidingAggregate(w, store, func() int64 { return 0 }, func(_ K, _ V, n int64) int64 { return n + 1 }, serde.Int64())
}

type slidingAggregator[K, V, A any] struct {
	b    *taskBuild
	out  *emitter[Windowed[K], A]
	aggs *WindowStore[K, A]
	recs *SessionStore[K, []V]
	win  SlidingWindows
	emit EmitStrategy
	init func() A
	add  func(K, V, A) A
	late *lateRecords
	name string

	emitted watermark
	lateOut *emitter[K, V]
	near    []timedValues[V]
	starts  []int64
}

type timedValues[V any] struct {
	ts     int64
	values []V
}

func (p *slidingAggregator[K, V, A]) receive(r Record[K, V]) error {
	if r.Tombstone {
		return nil
	}
	now, ts, d := p.b.tc.StreamTime(), r.Timestamp, p.win.diff
	open := now - d - p.win.grace // windows starting before it are closed
	if ts+1 <= open {             // even [ts, ts+d] is closed
		return dropLate(p.b, p.late, &p.lateOut, p.name, r, now)
	}
	// Store the record, then read the key's records that can share a
	// window with it: those within d + 1 on either side.
	var stored []V
	err := p.recs.find(r.Key, ts, ts, now, func(_ Window, vs []V) bool { stored = vs; return false })
	if err != nil {
		return err
	}
	if err := p.recs.Put(r.Key, Window{Start: ts, End: ts}, append(stored, r.Value)); err != nil {
		return err
	}
	p.near = p.near[:0]
	err = p.recs.find(r.Key, ts-d-1, ts+d+1, now, func(w Window, vs []V) bool {
		p.near = append(p.near, timedValues[V]{ts: w.Start, values: vs})
		return true
	})
	if err != nil {
		return err
	}
	// The windows that now hold the record: its own left window, the
	// left windows of later records within d, its right window if a later
	// record falls in it, and the right windows of earlier records within
	// d + 1.
	p.starts = append(p.starts[:0], ts-d)
	hasLater := false
	for _, o := range p.near {
		switch {
		case o.ts > ts && o.ts <= ts+d:
			p.starts = append(p.starts, o.ts-d)
			hasLater = true
		case o.ts == ts+d+1:
			hasLater = true
		case o.ts < ts && o.ts >= ts-d-1:
			p.starts = append(p.starts, o.ts+1)
		}
	}
	if hasLater {
		p.starts = append(p.starts, ts+1)
	}
	for i, s := range p.starts {
		// Windows that would start before time began are [0, d], as in
		// Kafka Streams.
		p.starts[i] = max(s, 0)
	}
	slices.Sort(p.starts)
	p.starts = slices.Compact(p.starts)
	for _, start := range p.starts {
		if start < open {
			continue // closed: final already
		}
		agg := p.init()
		for _, o := range p.near {
			if o.ts >= start && o.ts <= start+d {
				for _, v := range o.values {
					agg = p.add(r.Key, v, agg)
				}
			}
		}
		if err := p.aggs.Put(r.Key, start, agg); err != nil {
			return err
		}
		if p.emit == EmitEveryUpdate {
			wk := Windowed[K]{Key: r.Key, Window: Window{Start: start, End: start + d}}
			if err := p.out.emit(Record[Windowed[K], A]{Key: wk, Value: agg, Timestamp: ts, Headers: r.Headers}); err != nil {
				return err
			}
		}
	}
	if p.emit == EmitFinal {
		if err := p.emitClosed(open); err != nil {
			return err
		}
	}
	p.aggs.Expire(now)
	p.recs.Expire(now)
	return nil
}

func (p *slidingAggregator[K, V, A]) emitClosed(open int64) error {
	emitted, err := p.emitted.get(p.aggs.buf)
	if err != nil {
		return err
	}
	if open <= emitted {
		return nil
	}
	var ferr error
	err = p.aggs.fetchAll(emitted, open, func(k K, start int64, agg A) bool {
		wk := Windowed[K]{Key: k, Window: Window{Start: start, End: start + p.win.diff}}
		ferr = p.out.emit(Record[Windowed[K], A]{Key: wk, Value: agg, Timestamp: start + p.win.diff})
		return ferr == nil
	})
	if err != nil {
		return err
	}
	if ferr != nil {
		return ferr
	}
	p.emitted.set(p.aggs.buf, open)
	return nil
}

// listSerde encodes the values that share a timestamp: a uvarint count,
// then each value's uvarint length and encoding.
type listSerde[V any] struct{ values serde.Serde[V] }

func (s listSerde[V]) Serialize(dst []byte, vs []V) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(len(vs)))
	var enc []byte
	for _, v := range vs {
		var err error
		if enc, err = s.values.Serialize(enc[:0], v); err != nil {
			return nil, err
		}
		dst = binary.AppendUvarint(dst, uint64(len(enc)))
		dst = append(dst, enc...)
	}
	return dst, nil
}

func (s listSerde[V]) Deserialize(b []byte) ([]V, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("value list: bad count")
	}
	b = b[k:]
	vs := make([]V, 0, n)
	for i := uint64(0); i < n; i++ {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, fmt.Errorf("value list: bad length")
		}
		v, err := s.values.Deserialize(b[k : k+int(l)])
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
		b = b[k+int(l):]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("value list: trailing bytes")
	}
	return vs, nil
}
