package eddy

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/state"
)

// SlidingWindows are Kafka Streams' sliding windows: windows of a fixed
// time difference that slide with the records rather than with the clock.
// Each record r defines the window [r - d, r] that ends at it and, once a
// later record falls in it, the window [r + 1, r + 1 + d] that starts just
// after it; those are the only windows (every distinct set of records no
// more than d apart). Start and End are both inclusive.
type SlidingWindows struct {
	diff int64 // ms
	windowLimits
}

// SlidingWindowsWithTimeDifference returns sliding windows of maximum time
// difference d, with no grace period (see WithGrace).
func SlidingWindowsWithTimeDifference(d time.Duration) SlidingWindows {
	return SlidingWindows{diff: d.Milliseconds(), windowLimits: atLeastOneMs("sliding window time difference", d)}
}

// WithGrace sets how long after its end a window accepts out-of-order
// records: a window [s, e] closes once stream time passes e + grace.
func (w SlidingWindows) WithGrace(grace time.Duration) SlidingWindows {
	w.windowLimits.setGrace("sliding window", grace)
	return w
}

// slidingWindowing keeps each sliding window's aggregate, with its latest
// record's timestamp, and derives a new window's aggregate from the
// windows beside it, as Kafka Streams' KStreamSlidingWindowAggregate does:
// the records themselves are not kept. The windows live in a session store
// (Window{start, start + d}), which keeps a key's windows together, so the
// windows near a record are a few prefix scans.
//
// Every window a record in time falls in is updated, closed ones too
// (silently: their result was final), so that every stored window holds
// exactly its records and can seed a new one.
type slidingWindowing[K, V, A any] struct {
	win    SlidingWindows
	fold   fold[K, V, A]
	store  *SessionStore[K, slidingAgg[A]]
	near   []slidingWindow[A] // the key's windows near the record, by start
	write  []slidingWindow[A] // the windows the record changes, by start
	layout layoutGuard
}

// slidingLayout is the version of what a sliding-window store holds: 2,
// window aggregates with their latest record's timestamp in a session
// store. Layout 1 (eddy before versioned formats) kept the records
// themselves beside a window store of aggregates; it is not readable as
// layout 2, and nothing can convert it without the records' history.
const slidingLayout = 2

const metaLayout = "layout"

// checkLayout refuses a store written in another layout, before anything
// reads it as this one; a store with no marker and no data is new. The
// marker is written again in every transaction that writes windows
// (markLayout; see layoutGuard): one aged out of the changelog would make
// a restore take the store for layout 1.
func (s *slidingWindowing[K, V, A]) checkLayout() error {
	buf := s.store.buf
	return s.layout.check(buf, func() error {
		v, ok, err := getMeta(buf, metaLayout)
		if err != nil {
			return err
		}
		if ok && v != slidingLayout {
			return fmt.Errorf("%w: store %s holds sliding windows in layout %d; this eddy reads layout %d: run the eddy that wrote it, or reset the application (delete its state directories and this store's changelog topic) to rebuild the windows from the input", state.ErrFormat, buf.Name(), v, slidingLayout)
		}
		if ok {
			return nil
		}
		if has, err := holdsData(buf, nil); err != nil {
			return err
		} else if has {
			return fmt.Errorf("%w: store %s holds sliding windows in layout 1 (an eddy before versioned formats, which kept the records); this eddy keeps window aggregates (layout %d) and cannot read it: reset the application (delete its state directories and this store's changelog topic) to rebuild the windows from the input", state.ErrFormat, buf.Name(), slidingLayout)
		}
		return nil
	})
}

// markLayout writes the layout marker once in the open transaction.
func (s *slidingWindowing[K, V, A]) markLayout() {
	s.layout.mark(s.store.buf, metaLayout, slidingLayout)
}

// slidingAgg is a sliding window's stored value.
type slidingAgg[A any] struct {
	last int64 // the timestamp of the window's latest record
	agg  A
}

type slidingWindow[A any] struct {
	start int64
	slidingAgg[A]
	unchanged bool // stored as it is
}

func (s *slidingWindowing[K, V, A]) add(p *windowAggregator[K, V, A], r Record[K, V], now int64) (bool, error) {
	if err := s.checkLayout(); err != nil {
		return false, err
	}
	ts, d := r.Timestamp, s.win.diff
	open := now - d - s.win.windowLimits.grace // windows that start before it are closed
	if ts < open {                             // even [ts, ts + d] is closed
		return false, nil
	}
	// The key's windows that start in [ts - 2d, ts + 1]: those holding
	// ts, the one its left window builds on, and its right window.
	s.near = s.near[:0]
	err := s.store.find(r.Key, ts-d, ts+1, ts+1+d, func(w Window, v slidingAgg[A]) bool {
		s.near = append(s.near, slidingWindow[A]{start: w.Start, slidingAgg: v})
		return true
	})
	if err != nil {
		return false, err
	}
	// Windows that would start before time began are [0, d], as in
	// Kafka Streams.
	left := max(ts-d, 0)
	var (
		base     = -1 // the latest window starting before left
		cover    = -1 // the latest window holding ts and ending after it
		prev     = int64(-1)
		hasLeft  bool
		hasRight bool
	)
	s.write = s.write[:0]
	for i, w := range s.near {
		if w.last < ts {
			prev = max(prev, w.last) // the latest record before ts
		}
		switch {
		case w.start < left:
			base = i
		case w.start <= ts: // holds ts
			hasLeft = hasLeft || w.start == left
			if w.start+d > ts {
				cover = i
			}
			s.write = append(s.write, slidingWindow[A]{start: w.start,
				slidingAgg: slidingAgg[A]{last: max(w.last, ts), agg: s.fold.add(r.Key, r.Value, w.agg)}})
		case w.start == ts+1:
			// ts's right window does not hold ts: unchanged, but
			// forwarded again with every update, as it always was.
			hasRight = true
			s.write = append(s.write, slidingWindow[A]{start: w.start, slidingAgg: w.slidingAgg, unchanged: true})
		}
	}
	if !hasLeft {
		// [left, ts] holds ts and the records in [left, ts): if there
		// are any, exactly those of the latest window that starts
		// before left (a later record there would have its own window
		// between them).
		agg := s.fold.init()
		if base >= 0 && s.near[base].last >= left {
			agg = s.near[base].agg
		}
		s.write = append(s.write, slidingWindow[A]{start: left, slidingAgg: slidingAgg[A]{last: ts, agg: s.fold.add(r.Key, r.Value, agg)}})
	}
	if prev >= 0 && prev+1+d >= ts && prev+1 > left && !s.has(prev+1) {
		// The previous record's right window did not exist: it was
		// empty, and now holds ts alone.
		s.write = append(s.write, slidingWindow[A]{start: prev + 1,
			slidingAgg: slidingAgg[A]{last: ts, agg: s.fold.add(r.Key, r.Value, s.fold.init())}})
	}
	if !hasRight && cover >= 0 && s.near[cover].last > ts {
		// ts's right window holds the later records: exactly those of
		// the latest window holding ts, before ts joined it. Read again,
		// as the fold may have changed that aggregate in place.
		c := s.near[cover]
		v, ok, err := s.store.get(r.Key, Window{Start: c.start, End: c.start + d})
		if err != nil {
			return false, err
		}
		if !ok {
			return false, fmt.Errorf("eddy: store %s: sliding window [%d, %d] vanished", s.store.buf.Name(), c.start, c.start+d)
		}
		s.write = append(s.write, slidingWindow[A]{start: ts + 1, slidingAgg: v})
	}
	slices.SortFunc(s.write, func(a, b slidingWindow[A]) int { return cmp.Compare(a.start, b.start) })
	s.markLayout()
	for _, w := range s.write {
		win := Window{Start: w.start, End: w.start + d}
		if !w.unchanged {
			if err := s.store.Put(r.Key, win, w.slidingAgg); err != nil {
				return false, err
			}
		}
		if w.start >= open {
			if err := p.updated(r, win, w.agg); err != nil {
				return false, err
			}
		}
	}
	return true, nil
}

// has reports whether the record's changes include the window that starts
// at start, or the key had it already.
func (s *slidingWindowing[K, V, A]) has(start int64) bool {
	for _, w := range s.near {
		if w.start == start {
			return true
		}
	}
	for _, w := range s.write {
		if w.start == start {
			return true
		}
	}
	return false
}

// closedBefore: windows that ended before it (end + grace < now) are
// closed; windows are positioned by their end.
func (s *slidingWindowing[K, V, A]) closedBefore(now int64) int64 {
	return now - s.win.windowLimits.grace
}

func (s *slidingWindowing[K, V, A]) closed(from, to int64, fn func(k K, w Window, agg A) bool) error {
	if err := s.checkLayout(); err != nil {
		return err
	}
	return s.store.fetchEnded(from, to, func(k K, w Window, v slidingAgg[A]) bool { return fn(k, w, v.agg) })
}

// finalTimestamp: a sliding window's End is inclusive.
func (s *slidingWindowing[K, V, A]) finalTimestamp(w Window) int64 { return w.End }

func (s *slidingWindowing[K, V, A]) expire(now int64) { s.store.Expire(now) }

// slidingAggSerde encodes a sliding window's value: its latest record's
// timestamp (8 bytes, big-endian), then the aggregate.
type slidingAggSerde[A any] struct{ aggs serde.Serde[A] }

func (s slidingAggSerde[A]) Serialize(dst []byte, v slidingAgg[A]) ([]byte, error) {
	return s.aggs.Serialize(binary.BigEndian.AppendUint64(dst, uint64(v.last)), v.agg)
}

func (s slidingAggSerde[A]) Deserialize(b []byte) (slidingAgg[A], error) {
	if len(b) < 8 {
		return slidingAgg[A]{}, fmt.Errorf("sliding window value of %d bytes has no timestamp", len(b))
	}
	agg, err := s.aggs.Deserialize(b[8:])
	return slidingAgg[A]{last: int64(binary.BigEndian.Uint64(b)), agg: agg}, err
}
