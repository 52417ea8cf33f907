package eddy

import (
	"fmt"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/state"
)

// This file is the one windowed aggregation engine (after Kafka Streams'
// AbstractKStreamTimeWindowAggregateProcessor): stream time, late records,
// emit-on-update and emit-final, the emitted watermark and expiry are here,
// once. What differs between kinds of windows (which windows a record
// falls in, how they merge, where they are stored) is a windowing,
// in windows.go (tumbling and hopping), sliding.go and sessions.go.

// Windows is how WindowedBy cuts a grouped stream: TimeWindows (tumbling
// or hopping), SlidingWindows or SessionWindows. Only this package
// implements it.
type Windows interface {
	// windowsErr reports a definition that cannot be used (a size of
	// zero, a negative grace).
	windowsErr() error
}

// windowLimits is what every window definition has: a grace period, and
// the first error in the definition, reported when the topology is built.
type windowLimits struct {
	grace int64 // ms
	err   error
}

// windowsErr is the first problem of the window kind's settings.
func (l windowLimits) windowsErr() error { return l.err }

// setGrace sets the grace period of a window kind, refusing a negative one.
func (l *windowLimits) setGrace(kind string, grace time.Duration) {
	if grace < 0 && l.err == nil {
		l.err = fmt.Errorf("eddy: %s grace %v: use zero or more", kind, grace)
	}
	l.grace = grace.Milliseconds()
}

// atLeastOneMs starts the limits of a window kind whose what (a size, a
// gap) is d, refusing a d under 1ms.
func atLeastOneMs(what string, d time.Duration) windowLimits {
	if d.Milliseconds() <= 0 {
		return windowLimits{err: fmt.Errorf("eddy: %s %v: use at least 1ms", what, d)}
	}
	return windowLimits{}
}

// EmitStrategy says when a windowed aggregation sends its results on.
type EmitStrategy int

const (
	// EmitEveryUpdate forwards a window's new aggregate after each record
	// (Kafka Streams' onWindowUpdate), with the timestamp of that record.
	// Session windows also forward a tombstone for each session that a
	// merge replaced.
	EmitEveryUpdate EmitStrategy = iota
	// EmitFinal forwards each window once, with its final aggregate, when
	// it closes (Kafka Streams' onWindowClose): a time window once stream
	// time reaches its end + grace, a sliding window once stream time
	// passes its end + grace, a session once stream time passes its end +
	// gap + grace. Nothing is emitted before, and nothing twice, through
	// crashes and restarts. The output record's timestamp is the last
	// millisecond the window covers: End - 1 for time windows (whose End
	// is exclusive), End for sliding and session windows.
	EmitFinal
)

// WindowedStream is a grouped stream cut into windows, ready to aggregate
// with WindowAggregate or WindowCount.
type WindowedStream[K, V any] struct {
	g       GroupedStream[K, V]
	windows Windows
	emit    EmitStrategy
	late    *lateRecords
}

// lateRecords is shared by the copies of one WindowedStream: the node, if
// any, that receives its late records.
type lateRecords struct{ n *node }

// WindowedBy cuts g into windows: TumblingWindows, HoppingWindows,
// SlidingWindowsWithTimeDifference or SessionWindowsWithGap.
func WindowedBy[K, V any](g GroupedStream[K, V], w Windows) WindowedStream[K, V] {
	if w == nil {
		g.s.t.failOn("WindowedBy", g.s.n, "no windows given; pass TumblingWindows, HoppingWindows, SlidingWindowsWithTimeDifference or SessionWindowsWithGap")
	} else if err := w.windowsErr(); err != nil {
		g.s.t.failOn("WindowedBy", g.s.n, "%w", err)
	}
	return WindowedStream[K, V]{g: g, windows: w, late: &lateRecords{}}
}

// Emit sets when the aggregations of w forward their results (default
// EmitEveryUpdate).
func (w WindowedStream[K, V]) Emit(e EmitStrategy) WindowedStream[K, V] {
	w.emit = e
	return w
}

// LateRecords returns the records that the aggregations of w drop as late
// (every window they fall in had closed), to send to a topic of late
// records; each keeps its own timestamp. Late records are counted whether
// or not this stream is used.
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

// WindowAggregate folds each key's records per window into an aggregate:
// init gives a window's first aggregate, add folds one record in, merge
// combines two aggregates: of two sessions that a record joins (session
// windows need it), or of two slices of a window, earlier first (Sliced
// hopping windows need it; merge(k, a, b) must equal folding b's records
// into a). Other windows never merge and ignore it: pass nil. Records are
// folded in the order they arrive. The aggregates live in the state store
// named store for as long as a record in time can still reach their
// window: a window store (by window start; by slice start when Sliced)
// for time windows, a session store (a key's windows together) for
// sliding and session windows.
//
// The result is a table keyed by key and window, forwarded as w's emit
// strategy says: with EmitEveryUpdate each update carries the timestamp of
// the record that made it; with EmitFinal each window's one result carries
// the last millisecond the window covers (End - 1 for time windows, End
// for sliding and session windows).
func WindowAggregate[K, V, A any](w WindowedStream[K, V], store string, init func() A, add func(key K, value V, agg A) A, merge func(key K, a, b A) A, aggs serde.Serde[A]) Table[Windowed[K], A] {
	t := w.g.s.t
	fold := fold[K, V, A]{init: init, add: add, merge: merge}
	var kind string
	var spec StoreSpec
	var retention time.Duration
	var open func(buf *state.StoreBuffer) windowing[K, V, A]
	// closeAt is the stream time at which a window is final (EmitFinal's
	// rule), carried on the table for Suppress's UntilWindowCloses.
	var closeAt func(w Window) int64
	switch win := w.windows.(type) {
	case TimeWindows:
		kind, retention = "window", time.Duration(win.size+win.windowLimits.grace)*time.Millisecond
		closeAt = func(w Window) int64 { return w.End + win.windowLimits.grace }
		s := NewWindowStoreSpec(store, retention, w.g.keys, aggs).WithWindowSize(time.Duration(win.size) * time.Millisecond)
		spec = s
		open = func(buf *state.StoreBuffer) windowing[K, V, A] {
			return &timeWindowing[K, V, A]{win: win, fold: fold, store: s.View(buf)}
		}
		if win.sliced {
			// Slices (of gcd(size, advance)) are kept as long as a window
			// that holds them can be open: each starts at or after its
			// windows' starts, so size + grace from its own start.
			switch {
			case w.emit != EmitFinal:
				t.fail("eddy: window aggregate %q: sliced windows exist only when they close; call Emit(EmitFinal) on the windowed stream, or drop Sliced", store)
			case merge == nil:
				t.fail("eddy: window aggregate %q: sliced windows merge their slices' aggregates; pass a merge function, or drop Sliced", store)
			}
			spec = slicedQuery[K, A]{s}
			open = func(buf *state.StoreBuffer) windowing[K, V, A] {
				return newSlicedWindowing(win, fold, s.View(buf))
			}
		}
	case SlidingWindows:
		// A record in time (ts >= stream time - diff - grace) builds on
		// windows that start from ts - 2 × diff, which end diff later.
		kind, retention = "sliding", time.Duration(2*win.diff+win.windowLimits.grace+1)*time.Millisecond
		closeAt = func(w Window) int64 { return w.End + win.windowLimits.grace + 1 }
		s := NewSessionStoreSpec(store, retention, w.g.keys, slidingAggSerde[A]{aggs: aggs})
		spec = slidingQuery[K, A]{SessionStoreSpec: s, aggs: aggs} // queried as a window store
		open = func(buf *state.StoreBuffer) windowing[K, V, A] {
			return &slidingWindowing[K, V, A]{win: win, fold: fold, store: s.View(buf)}
		}
	case SessionWindows:
		if merge == nil {
			t.fail("eddy: window aggregate %q: session windows merge sessions; pass a merge function", store)
		}
		// A record that is not late (ts >= now - gap - grace) reaches
		// sessions that ended at ts - gap: keep them that long.
		kind, retention = "session", time.Duration(2*win.gap+win.windowLimits.grace)*time.Millisecond
		closeAt = func(w Window) int64 { return w.End + win.gap + win.windowLimits.grace + 1 }
		s := NewSessionStoreSpec(store, retention, w.g.keys, aggs)
		spec = s
		open = func(buf *state.StoreBuffer) windowing[K, V, A] {
			return &sessionWindowing[K, V, A]{win: win, fold: fold, store: s.View(buf)}
		}
	default:
		// WindowedBy reported it.
		return Table[Windowed[K], A]{t: t, n: w.g.s.n, store: store}
	}
	if init == nil || add == nil {
		t.fail("eddy: window aggregate %q: pass init and add functions", store)
	}
	n := t.add(kind+"-aggregate-"+store, w.g.s.n)
	t.addStore(store, n, retention, spec)
	emit, late := w.emit, w.late
	n.build = func(b *taskBuild) error {
		out := &emitter[Windowed[K], A]{}
		b.out[n] = out
		buf, err := b.tc.Store(store)
		if err != nil {
			return err
		}
		p := &windowAggregator[K, V, A]{b: b, out: out, windows: open(buf), buf: buf,
			final: emit == EmitFinal, late: late, name: store}
		if !p.final {
			// Every update goes through the table cache (EmitFinal emits
			// once per window already): it keys held updates by the
			// windowed key's encoding and sizes them by the aggregate's.
			p.cache, p.keys, p.aggs = newTableCache(b, out), WindowedSerde(w.g.keys), aggs
		}
		in := output[K, V](b, w.g.s.n)
		in.children = append(in.children, p)
		if p.final {
			b.atEndOfInput(p.emitClosed)
		}
		return nil
	}
	return Table[Windowed[K], A]{t: t, n: n, store: store, closeAt: func(k Windowed[K]) int64 { return closeAt(k.Window) }}
}

// WindowCount counts each key's records per window; see WindowAggregate
// for the store and the output timestamps.
func WindowCount[K, V any](w WindowedStream[K, V], store string) Table[Windowed[K], int64] {
	return WindowAggregate(w, store, func() int64 { return 0 },
		func(_ K, _ V, n int64) int64 { return n + 1 },
		func(_ K, a, b int64) int64 { return a + b }, serde.Int64())
}

// fold is the user's aggregation: how a window's aggregate starts, takes
// a record, and (sessions) merges with another.
type fold[K, V, A any] struct {
	init  func() A
	add   func(K, V, A) A
	merge func(K, A, A) A
}

// windowing is what a kind of window adds to the engine.
type windowing[K, V, A any] interface {
	// add folds r into the windows it falls in that are still open at
	// stream time now, reporting each new aggregate (and each session a
	// merge replaced) to p. It returns false, having changed nothing that
	// is visible, when every window r falls in had closed: r is late.
	add(p *windowAggregator[K, V, A], r Record[K, V], now int64) (bool, error)
	// closedBefore is the position below which windows are final at
	// stream time now. A position orders windows by their closing: the
	// window start for time windows, the window end otherwise.
	closedBefore(now int64) int64
	// closed calls fn for the stored windows with a position in
	// [from, to), in position order, then key order; fn returning false
	// stops it.
	closed(from, to int64, fn func(k K, w Window, agg A) bool) error
	// finalTimestamp is the timestamp of w's final result: the last
	// millisecond it covers.
	finalTimestamp(w Window) int64
	// expire drops the windows no record in time can reach any more.
	expire(now int64)
}

// windowAggregator is one task's instance of a windowed aggregation.
type windowAggregator[K, V, A any] struct {
	b       *taskBuild
	out     *emitter[Windowed[K], A]
	windows windowing[K, V, A]
	buf     *state.StoreBuffer // the windows' store, which also keeps emitted
	final   bool               // EmitFinal
	late    *lateRecords
	name    string

	// emitted: with EmitFinal, every window positioned before it has been
	// forwarded; kept in the store so a restart never emits twice.
	emitted watermark
	lateOut *emitter[K, V]

	// cache forwards every update with EmitEveryUpdate (the table cache,
	// when the task has one); kbuf and vbuf are the encodings it keys and
	// sizes held updates by, reused.
	cache      *tableCache[Windowed[K], A]
	keys       serde.Serde[Windowed[K]]
	aggs       serde.Serde[A]
	kbuf, vbuf []byte
}

func (p *windowAggregator[K, V, A]) receive(r Record[K, V]) error {
	if r.Tombstone {
		return nil
	}
	now := p.b.tc.StreamTime()
	// Windows closed at stream time now are final before r is folded in:
	// r can only be late for them.
	if p.final {
		if err := p.emitClosed(now); err != nil {
			return err
		}
	}
	accepted, err := p.windows.add(p, r, now)
	if err != nil {
		return err
	}
	if !accepted {
		return p.dropLate(r, now)
	}
	p.windows.expire(now)
	return nil
}

// updated forwards window w's new aggregate, made by r, when every update
// is emitted.
func (p *windowAggregator[K, V, A]) updated(r Record[K, V], w Window, agg A) error {
	if p.final {
		return nil
	}
	return p.forward(Record[Windowed[K], A]{Key: Windowed[K]{Key: r.Key, Window: w}, Value: agg, Timestamp: r.Timestamp, Headers: r.Headers})
}

// replaced forwards a tombstone for window w, which r merged into another,
// when every update is emitted.
func (p *windowAggregator[K, V, A]) replaced(r Record[K, V], w Window) error {
	if p.final {
		return nil
	}
	return p.forward(Record[Windowed[K], A]{Key: Windowed[K]{Key: r.Key, Window: w}, Timestamp: r.Timestamp, Tombstone: true})
}

// forward passes an update of EmitEveryUpdate to the table cache, which
// holds it or forwards it.
func (p *windowAggregator[K, V, A]) forward(rec Record[Windowed[K], A]) error {
	if p.cache.budget == nil || p.cache.budget.Suspended() {
		return p.out.emit(rec) // no cache: nothing to encode
	}
	var err error
	if p.kbuf, err = p.keys.Serialize(p.kbuf[:0], rec.Key); err != nil {
		return err
	}
	p.vbuf = p.vbuf[:0]
	if !rec.Tombstone {
		if p.vbuf, err = p.aggs.Serialize(p.vbuf, rec.Value); err != nil {
			return err
		}
	}
	return p.cache.update(p.kbuf, len(p.vbuf), rec)
}

// emitClosed forwards the windows that closed since the last call.
func (p *windowAggregator[K, V, A]) emitClosed(now int64) error {
	emitted, err := p.emitted.get(p.buf)
	if err != nil {
		return err
	}
	to := p.windows.closedBefore(now)
	if to <= emitted {
		return nil // nothing closed: the store is not read
	}
	var ferr error
	err = p.windows.closed(emitted, to, func(k K, w Window, agg A) bool {
		ferr = p.out.emit(Record[Windowed[K], A]{Key: Windowed[K]{Key: k, Window: w}, Value: agg, Timestamp: p.windows.finalTimestamp(w)})
		return ferr == nil
	})
	if err != nil {
		return err
	}
	if ferr != nil {
		return ferr
	}
	p.emitted.set(p.buf, to)
	return nil
}

// dropLate counts a late record and passes it to the late-records stream,
// if the topology has one (found on first use: it may be built after the
// aggregation).
func (p *windowAggregator[K, V, A]) dropLate(r Record[K, V], now int64) error {
	p.b.countLate("store "+p.name, r.Timestamp, now)
	if p.late.n == nil {
		return nil
	}
	if p.lateOut == nil {
		p.lateOut = output[K, V](p.b, p.late.n)
	}
	return p.lateOut.emit(r)
}

const metaEmitted = "emitted"

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
