package eddy

import (
	"fmt"
	"time"
)

// TimeWindows are fixed-size windows aligned to the epoch: tumbling (the
// advance equals the size, each record in one window) or hopping (windows
// overlap, each record in size/advance windows). Window [start, end) with
// end = start + size.
type TimeWindows struct {
	size, advance int64 // ms
	sliced        bool  // see Sliced
	windowLimits
}

// TumblingWindows returns non-overlapping windows of the given size, with
// no grace period (see WithGrace).
func TumblingWindows(size time.Duration) TimeWindows { return HoppingWindows(size, size) }

// HoppingWindows returns windows of the given size that start every
// advance, with no grace period (see WithGrace).
func HoppingWindows(size, advance time.Duration) TimeWindows {
	w := TimeWindows{size: size.Milliseconds(), windowLimits: atLeastOneMs("window size", size)}
	if w.advance = advance.Milliseconds(); (w.advance <= 0 || w.advance > w.size) && w.windowLimits.err == nil {
		w.windowLimits.err = fmt.Errorf("eddy: window advance %v: use at least 1ms and at most the size %v", advance, size)
	}
	return w
}

// WithGrace sets how long after a window's end it still accepts records
// that arrive out of order: a record is late, and dropped, once the stream
// time reached its window's end + grace.
func (w TimeWindows) WithGrace(grace time.Duration) TimeWindows {
	w.windowLimits.setGrace("window", grace)
	return w
}

// timeWindowing assigns a record to the fixed windows that hold its
// timestamp, and keeps their aggregates in a window store by start.
type timeWindowing[K, V, A any] struct {
	win    TimeWindows
	fold   fold[K, V, A]
	store  *WindowStore[K, A]
	layout layoutGuard // see checkNotSliced
}

func (t *timeWindowing[K, V, A]) add(p *windowAggregator[K, V, A], r Record[K, V], now int64) (bool, error) {
	if err := t.checkNotSliced(); err != nil {
		return false, err
	}
	ts, size, adv := r.Timestamp, t.win.size, t.win.advance
	// Windows [s, s+size) with s a multiple of adv and s <= ts < s+size,
	// in start order.
	first := max(0, ts-size-floorMod(ts-size, adv)+adv)
	accepted := false
	for start := first; start <= ts; start += adv {
		if start+size+t.win.windowLimits.grace <= now {
			continue // closed: late for this window
		}
		accepted = true
		agg, ok, err := t.store.Get(r.Key, start)
		if err != nil {
			return false, err
		}
		if !ok {
			agg = t.fold.init()
		}
		agg = t.fold.add(r.Key, r.Value, agg)
		if err := t.store.Put(r.Key, start, agg); err != nil {
			return false, err
		}
		if err := p.updated(r, Window{Start: start, End: start + size}, agg); err != nil {
			return false, err
		}
	}
	return accepted, nil
}

func (t *timeWindowing[K, V, A]) closedBefore(now int64) int64 { return t.win.closedBefore(now) }

// closedBefore is the first window start still open (end + grace > now),
// rounded up to a window start: no start lies between, and an unchanged
// bound leaves the store unread.
func (w TimeWindows) closedBefore(now int64) int64 {
	hi := now - w.windowLimits.grace - w.size + 1
	return hi + floorMod(-hi, w.advance)
}

func (t *timeWindowing[K, V, A]) closed(from, to int64, fn func(k K, w Window, agg A) bool) error {
	if err := t.checkNotSliced(); err != nil {
		return err
	}
	return t.store.fetchAll(from, to, func(k K, start int64, agg A) bool {
		return fn(k, Window{Start: start, End: start + t.win.size}, agg)
	})
}

// finalTimestamp: a time window's End is exclusive.
func (t *timeWindowing[K, V, A]) finalTimestamp(w Window) int64 { return w.End - 1 }

func (t *timeWindowing[K, V, A]) expire(now int64) { t.store.Expire(now) }

// floorMod is the non-negative remainder of a / m.
func floorMod(a, m int64) int64 {
	r := a % m
	if r < 0 {
		r += m
	}
	return r
}
