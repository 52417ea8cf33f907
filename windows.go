package eddy

import (
	"fmt"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/state"
)

// TimeWindows are fixed-size windows aligned to the epoch: tumbling (the
// advance equals the size, each record in one window) or hopping (windows
// overlap, each record in size/advance windows). Window [start, end) with
// end = start + size.
type TimeWindows struct {
	size, advance, grace int64 // ms
	err                  error
}

// TumblingWindows returns non-overlapping windows of the given size, with
// no grace period (see WithGrace).
func TumblingWindows(size time.Duration) TimeWindows { return HoppingWindows(size, size) }

// HoppingWindows returns windows of the given size that start every
// advance, with no grace period (see WithGrace).
func HoppingWindows(size, advance time.Duration) TimeWindows {
	w := TimeWindows{size: size.Milliseconds(), advance: advance.Milliseconds()}
	switch {
	case w.size <= 0:
		w.err = fmt.Errorf("eddy: window size %v: use at least 1ms", size)
	case w.advance <= 0 || w.advance > w.size:
		w.err = fmt.Errorf("eddy: window advance %v: use at least 1ms and at most the size %v", advance, size)
	}
	return w
}

// WithGrace sets how long after a window's end it still accepts records
// that arrive out of order: a record is late, and dropped, once the stream
// time reached its window's end + grace.
func (w TimeWindows) WithGrace(grace time.Duration) TimeWindows {
	if grace < 0 && w.err == nil {
		w.err = fmt.Errorf("eddy: window grace %v: use zero or more", grace)
	}
	w.grace = grace.Milliseconds()
	return w
}

// EmitStrategy says when a windowed aggregation sends its results on.
type EmitStrategy int

const (
	// EmitEveryUpdate forwards a window's new aggregate after each record
	// (Kafka Streams' onWindowUpdate).
	EmitEveryUpdate EmitStrategy = iota
	// EmitFinal forwards each window once, with its final aggregate, when
	// it closes: once stream time reaches the window's end + grace
	// (Kafka Streams' onWindowClose). Nothing is emitted before, and
	// nothing twice, through crashes and restarts.
	EmitFinal
)

// WindowedStream is a grouped stream cut into windows, ready to aggregate.
type WindowedStream[K, V any] struct {
	g       GroupedStream[K, V]
	windows TimeWindows
	emit    EmitStrategy
	late    *lateRecords
}

// lateRecords is shared by the copies of one WindowedStream: the node, if
// any, that receives its late records.
type lateRecords struct{ n *node }

// WindowedBy cuts g into time windows.
func WindowedBy[K, V any](g GroupedStream[K, V], w TimeWindows) WindowedStream[K, V] {
	if w.err != nil {
		g.s.t.fail("%w", w.err)
	}
	return WindowedStream[K, V]{g: g, windows: w, late: &lateRecords{}}
}

// Emit sets when the aggregations of w forward their results (default
// EmitEveryUpdate).
func (w WindowedStream[K, V]) Emit(e EmitStrategy) WindowedStream[K, V] {
	w.emit = e
	return w
}

// LateRecords returns the records that the aggregations of w drop as late,
// to send to a topic of late records. Late records are counted whether or
// not this stream is used.
func LateRecords[K, V any](w WindowedStream[K, V]) Stream[K, V] {
	if w.late.n != nil {
		return Stream[K, V]{t: w.g.s.t, n: w.late.n}
	}
	n := w.g.s.t.add("late-records", w.g.s.n)
	n.build = func(b *taskBuild) error {
		b.out[n] = &emitter[K, V]{}
		return nil
	}
	w.late.n = n
	return Stream[K, V]{t: w.g.s.t, n: n}
}

// WindowAggregate folds each key's records per window into an aggregate,
// kept in the window store named store for the window's size + grace:
// init gives a window's first aggregate, add folds one record in. The
// result is a table keyed by key and window, whose updates are forwarded
// as w's emit strategy says.
func WindowAggregate[K, V, A any](w WindowedStream[K, V], store string, init func() A, add func(key K, value V, agg A) A, aggs serde.Serde[A]) Table[Windowed[K], A] {
	t := w.g.s.t
	win := w.windows
	retention := time.Duration(win.size+win.grace) * time.Millisecond
	spec := NewWindowStoreSpec(store, retention, w.g.keys, aggs).WithWindowSize(time.Duration(win.size) * time.Millisecond)
	n := t.add("window-aggregate-"+store, w.g.s.n)
	t.addStore(store, n, retention, spec)
	emit := w.emit
	late := w.late
	n.build = func(b *taskBuild) error {
		out := &emitter[Windowed[K], A]{}
		b.out[n] = out
		buf, err := b.tc.Store(store)
		if err != nil {
			return err
		}
		p := &windowAggregator[K, V, A]{b: b, out: out, store: spec.View(buf), win: win, emit: emit,
			init: init, add: add, late: late, name: store}
		in := output[K, V](b, w.g.s.n)
		in.children = append(in.children, p)
		return nil
	}
	return Table[Windowed[K], A]{t: t, n: n, store: store}
}

// WindowCount counts each key's records per window.
func WindowCount[K, V any](w WindowedStream[K, V], store string) Table[Windowed[K], int64] {
	return WindowAggregate(w, store, func() int64 { return 0 }, func(_ K, _ V, n int64) int64 { return n + 1 }, serde.Int64())
}

// windowAggregator is one task's instance of a time-window aggregation.
type windowAggregator[K, V, A any] struct {
	b     *taskBuild
	out   *emitter[Windowed[K], A]
	store *WindowStore[K, A]
	win   TimeWindows
	emit  EmitStrategy
	init  func() A
	add   func(K, V, A) A
	late  *lateRecords
	name  string

	// emitted: every window starting before it has been forwarded (with
	// EmitFinal); kept in the store so a restart never emits twice.
	emitted watermark
	lateOut *emitter[K, V]
}

const metaEmitted = "emitted"

func (p *windowAggregator[K, V, A]) receive(r Record[K, V]) error {
	if r.Tombstone {
		return nil
	}
	now := p.b.tc.StreamTime()
	ts, size, adv := r.Timestamp, p.win.size, p.win.advance
	// Windows [s, s+size) with s a multiple of adv and s <= ts < s+size,
	// in start order.
	first := max(0, ts-size-floorMod(ts-size, adv)+adv)
	accepted := false
	for start := first; start <= ts; start += adv {
		if start+size+p.win.grace <= now {
			continue // closed: late for this window
		}
		accepted = true
		agg, ok, err := p.store.Get(r.Key, start)
		if err != nil {
			return err
		}
		if !ok {
			agg = p.init()
		}
		agg = p.add(r.Key, r.Value, agg)
		if err := p.store.Put(r.Key, start, agg); err != nil {
			return err
		}
		if p.emit == EmitEveryUpdate {
			wk := Windowed[K]{Key: r.Key, Window: Window{Start: start, End: start + size}}
			if err := p.out.emit(Record[Windowed[K], A]{Key: wk, Value: agg, Timestamp: ts, Headers: r.Headers}); err != nil {
				return err
			}
		}
	}
	if !accepted {
		if err := dropLate(p.b, p.late, &p.lateOut, p.name, r, now); err != nil {
			return err
		}
	}
	if p.emit == EmitFinal {
		if err := p.emitClosed(now); err != nil {
			return err
		}
	}
	p.store.Expire(now)
	return nil
}

// floorMod is the non-negative remainder of a / m.
func floorMod(a, m int64) int64 {
	r := a % m
	if r < 0 {
		r += m
	}
	return r
}

// emitClosed forwards the windows that closed since the last call: those
// with end + grace <= stream time, that is start <= now - grace - size.
func (p *windowAggregator[K, V, A]) emitClosed(now int64) error {
	emitted, err := p.emitted.get(p.store.buf)
	if err != nil {
		return err
	}
	hi := now - p.win.grace - p.win.size + 1 // first start still open
	// The first window start at or after emitted: if it is still open,
	// nothing closed and the store is not read.
	next := emitted + floorMod(-emitted, p.win.advance)
	if next >= hi {
		return nil
	}
	var ferr error
	err = p.store.fetchAll(emitted, hi, func(k K, start int64, agg A) bool {
		wk := Windowed[K]{Key: k, Window: Window{Start: start, End: start + p.win.size}}
		ferr = p.out.emit(Record[Windowed[K], A]{Key: wk, Value: agg, Timestamp: start + p.win.size - 1})
		return ferr == nil
	})
	if err != nil {
		return err
	}
	if ferr != nil {
		return ferr
	}
	p.emitted.set(p.store.buf, hi)
	return nil
}

// watermark is a position kept in a store's metadata (so it commits and
// aborts with the data it describes) and cached in memory. The cache is
// dropped after an abort: it may hold the aborted transaction's value, and
// trusting it would skip what the replay must emit again.
type watermark struct {
	v      int64
	loaded bool
	aborts uint64
}

func (w *watermark) get(buf *state.StoreBuffer) (int64, error) {
	if w.loaded && w.aborts == buf.Aborts() {
		return w.v, nil
	}
	v, _, err := getMeta(buf, metaEmitted)
	if err != nil {
		return 0, err
	}
	w.v, w.loaded, w.aborts = v, true, buf.Aborts()
	return v, nil
}

func (w *watermark) set(buf *state.StoreBuffer, v int64) {
	w.v = v
	putMeta(buf, metaEmitted, v)
}

// dropLate counts a late record and passes it to the late-records stream,
// if the topology has one (found on first use: it may be built after the
// aggregation).
func dropLate[K, V any](b *taskBuild, late *lateRecords, out **emitter[K, V], store string, r Record[K, V], now int64) error {
	b.countLate("store "+store, r.Timestamp, now)
	if late.n == nil {
		return nil
	}
	if *out == nil {
		*out = output[K, V](b, late.n)
	}
	return (*out).emit(r)
}
