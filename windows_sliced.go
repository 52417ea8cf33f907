package eddy

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"fmt"

	"github.com/eddy-streams/eddy/state"
)

// Sliced keeps the aggregates of hopping windows per slice rather than
// per window, as Flink's slicing window operators do: time is cut into
// slices of gcd(size, advance), a record updates the one slice that holds
// it (one store read and write, instead of one per window it falls in,
// size/advance of them), and a window's result is the merge of its
// slices, made once, when it closes. It needs EmitFinal (a window exists
// only when it closes) and a merge function that combines the aggregates
// of two runs of records as folding the second run into the first would
// (WindowCount has one); WindowAggregate refuses it otherwise, and on
// tumbling windows, which are their own slices. Records are folded in
// arrival order within a slice, and slices merged in time order: the
// aggregate must not depend on the arrival order of records in different
// slices (a count, a sum, a minimum or maximum do not).
//
// The store keeps slices, not windows: a store written without Sliced
// cannot be read with it, nor the reverse (the aggregation refuses to
// start; reset the application to switch), and interactive queries of
// the store are refused (QueryWindows, the HTTP windows route).
func (w TimeWindows) Sliced() TimeWindows {
	if w.advance == w.size && w.windowLimits.err == nil {
		w.windowLimits.err = fmt.Errorf("eddy: Sliced on tumbling windows (advance = size = %dms): each window is its own slice already; drop Sliced", w.size)
	}
	w.sliced = true
	return w
}

// slicedWindowing is the windowing of Sliced hopping windows: one
// aggregate per key and slice, in a window store keyed by slice start;
// windows (positioned by start, as timeWindowing's) are merged from their
// slices as they close.
type slicedWindowing[K, V, A any] struct {
	win    TimeWindows
	slice  int64 // ms: gcd(size, advance)
	fold   fold[K, V, A]
	store  *WindowStore[K, A]
	runs   sliceRuns[A] // a closing window's slices, reused
	layout layoutGuard  // see checkLayout
}

func newSlicedWindowing[K, V, A any](win TimeWindows, f fold[K, V, A], store *WindowStore[K, A]) *slicedWindowing[K, V, A] {
	return &slicedWindowing[K, V, A]{win: win, slice: gcd(win.size, win.advance), fold: f, store: store}
}

func (s *slicedWindowing[K, V, A]) add(_ *windowAggregator[K, V, A], r Record[K, V], now int64) (bool, error) {
	if err := s.checkLayout(); err != nil {
		return false, err
	}
	ts := r.Timestamp
	// The latest window holding ts closes last: r is late when it has
	// closed (or when no window holds ts: a negative timestamp). The
	// slice may also belong to windows that closed; they were emitted,
	// and are never again, so the slice's new aggregate cannot reach
	// them.
	last := ts - floorMod(ts, s.win.advance)
	if last < 0 || last+s.win.size+s.win.windowLimits.grace <= now {
		return false, nil
	}
	start := ts - floorMod(ts, s.slice)
	agg, ok, err := s.store.Get(r.Key, start)
	if err != nil {
		return false, err
	}
	if !ok {
		agg = s.fold.init()
	}
	if err := s.store.Put(r.Key, start, s.fold.add(r.Key, r.Value, agg)); err != nil {
		return false, err
	}
	s.markLayout()
	return true, nil
}

func (s *slicedWindowing[K, V, A]) closedBefore(now int64) int64 { return s.win.closedBefore(now) }

// closed merges the slices of each window that starts in [from, to), a
// window at a time: one scan of the window's slices (in slice order, then
// key order), merged per key in key order. Windows without slices are
// skipped by seeking the next stored slice.
func (s *slicedWindowing[K, V, A]) closed(from, to int64, fn func(k K, w Window, agg A) bool) error {
	if err := s.checkLayout(); err != nil {
		return err
	}
	size, adv := s.win.size, s.win.advance
	for start := alignUp(max(from, 0), adv); start < to; {
		if err := s.gather(start, start+size); err != nil {
			return err
		}
		if len(s.runs.ents) == 0 {
			// The window is empty: on to the first window holding the
			// next stored slice, if any.
			next, ok, err := s.firstSliceFrom(start + size)
			if err != nil || !ok {
				return err
			}
			start = max(start+adv, alignUp(next-size+1, adv))
			continue
		}
		stop := false
		err := s.runs.merge(func(key []byte, aggs []A) bool {
			k, err := s.store.keys.Deserialize(key)
			if err != nil {
				s.runs.err = fmt.Errorf("eddy: store %s: decode key: %w", s.store.buf.Name(), err)
				return false
			}
			agg := aggs[0]
			for _, b := range aggs[1:] {
				agg = s.fold.merge(k, agg, b)
			}
			stop = !fn(k, Window{Start: start, End: start + size}, agg)
			return !stop
		})
		if err != nil || stop {
			return err
		}
		start += adv
	}
	return nil
}

// gather reads the slices that start in [from, to) into s.runs: entries
// in slice order, then key order, a run per slice.
func (s *slicedWindowing[K, V, A]) gather(from, to int64) error {
	s.runs.reset()
	lo := binary.BigEndian.AppendUint64(nil, uint64(from))
	hi := binary.BigEndian.AppendUint64(nil, uint64(to))
	prev := int64(-1)
	return s.store.buf.Scan(lo, hi, func(kb, vb []byte) error {
		agg, err := s.store.values.Deserialize(vb)
		if err != nil {
			return fmt.Errorf("eddy: store %s: decode value: %w", s.store.buf.Name(), err)
		}
		start := int64(binary.BigEndian.Uint64(kb))
		if start != prev {
			s.runs.startRun()
			prev = start
		}
		s.runs.add(kb[8:], agg)
		return nil
	})
}

// firstSliceFrom is the start of the first stored slice at or after from.
func (s *slicedWindowing[K, V, A]) firstSliceFrom(from int64) (int64, bool, error) {
	var next int64
	found := false
	err := s.store.buf.Scan(binary.BigEndian.AppendUint64(nil, uint64(from)), []byte{windowMetaPrefix}, func(kb, _ []byte) error {
		next, found = int64(binary.BigEndian.Uint64(kb)), true
		return errStopScan
	})
	if err == errStopScan {
		err = nil
	}
	return next, found, err
}

// finalTimestamp: a time window's End is exclusive.
func (s *slicedWindowing[K, V, A]) finalTimestamp(w Window) int64 { return w.End - 1 }

func (s *slicedWindowing[K, V, A]) expire(now int64) { s.store.Expire(now) }

// metaSlice is the metadata of a sliced store: its slice length in ms.
// Its presence tells a sliced store from a store of windows.
const metaSlice = "slice"

// checkLayout refuses a store that does not hold slices of this length:
// one written without Sliced (windows, which merged as slices would count
// records several times) or with another slice length. A store with
// neither a marker nor a window or slice is new.
//
// The marker is written again in every transaction that writes slices
// (markLayout; see layoutGuard).
func (s *slicedWindowing[K, V, A]) checkLayout() error {
	buf := s.store.buf
	return s.layout.check(buf, func() error {
		v, ok, err := getMeta(buf, metaSlice)
		if err != nil {
			return err
		}
		if ok && v != s.slice {
			return fmt.Errorf("%w: store %s holds hopping-window slices of %dms; these windows (size %dms, advance %dms) slice by %dms: keep the windows that wrote it, or reset the application (delete its state directories and this store's changelog topic) to rebuild the windows from the input", state.ErrFormat, buf.Name(), v, s.win.size, s.win.advance, s.slice)
		}
		if ok {
			return nil
		}
		if has, err := holdsData(buf, []byte{windowMetaPrefix}); err != nil {
			return err
		} else if has {
			return fmt.Errorf("%w: store %s holds windows written without Sliced; a sliced aggregation cannot read them: drop Sliced, or reset the application (delete its state directories and this store's changelog topic) to rebuild the windows from the input", state.ErrFormat, buf.Name())
		}
		return nil
	})
}

// markLayout writes the layout marker once in the open transaction.
func (s *slicedWindowing[K, V, A]) markLayout() { s.layout.mark(s.store.buf, metaSlice, s.slice) }

// checkNotSliced refuses, for an aggregation of windows, a store that a
// Sliced aggregation wrote.
func (t *timeWindowing[K, V, A]) checkNotSliced() error {
	buf := t.store.buf
	return t.layout.check(buf, func() error {
		if v, ok, err := getMeta(buf, metaSlice); err != nil {
			return err
		} else if ok {
			return fmt.Errorf("%w: store %s holds hopping-window slices of %dms, written with Sliced; this aggregation keeps whole windows and cannot read them: add Sliced back, or reset the application (delete its state directories and this store's changelog topic) to rebuild the windows from the input", state.ErrFormat, buf.Name(), v)
		}
		return nil
	})
}

// sliceRuns is a closing window's slices: entries in scan order (slice,
// then key), each slice a run sorted by key encoding, merged by a k-way
// merge into one aggregate per key, in key order.
type sliceRuns[A any] struct {
	keys  []byte // the entries' key encodings, one after another
	ents  []sliceEntry[A]
	runs  []int // index in ents of each run's next entry
	ends  []int // index in ents past each run's last entry
	heads runHeap[A]
	group []A   // the aggregates of the key being merged
	err   error // a failure inside merge's callback
}

type sliceEntry[A any] struct {
	key0, key1 int // the key encoding: keys[key0:key1]
	agg        A
}

func (r *sliceRuns[A]) reset() {
	r.keys, r.ents, r.runs, r.ends, r.err = r.keys[:0], r.ents[:0], r.runs[:0], r.ends[:0], nil
}

func (r *sliceRuns[A]) startRun() {
	if n := len(r.runs); n > 0 {
		r.ends = append(r.ends, len(r.ents))
	}
	r.runs = append(r.runs, len(r.ents))
}

func (r *sliceRuns[A]) add(key []byte, agg A) {
	k0 := len(r.keys)
	r.keys = append(r.keys, key...)
	r.ents = append(r.ents, sliceEntry[A]{key0: k0, key1: len(r.keys), agg: agg})
}

func (r *sliceRuns[A]) key(i int) []byte { return r.keys[r.ents[i].key0:r.ents[i].key1] }

// merge calls emit for each key, in key order, with its aggregates in
// run (slice) order (a slice reused between calls); emit returning false
// stops it.
func (r *sliceRuns[A]) merge(emit func(key []byte, aggs []A) bool) error {
	if len(r.runs) > len(r.ends) {
		r.ends = append(r.ends, len(r.ents))
	}
	r.heads = runHeap[A]{r: r, idx: r.heads.idx[:0]}
	for i := range r.runs {
		r.heads.idx = append(r.heads.idx, i)
	}
	heap.Init(&r.heads)
	for r.heads.Len() > 0 {
		// The run with the smallest head key (the earliest slice on a
		// tie) starts the key's group; every run whose head is the same
		// key joins it, in slice order.
		e := r.runs[r.heads.idx[0]]
		key := r.key(e)
		r.group = append(r.group[:0], r.ents[e].agg)
		r.advance()
		for r.heads.Len() > 0 {
			i := r.runs[r.heads.idx[0]]
			if !bytes.Equal(r.key(i), key) {
				break
			}
			r.group = append(r.group, r.ents[i].agg)
			r.advance()
		}
		if !emit(key, r.group) {
			return r.err
		}
	}
	return nil
}

// advance moves the top run past its head, dropping it when done.
func (r *sliceRuns[A]) advance() {
	top := r.heads.idx[0]
	if r.runs[top]++; r.runs[top] == r.ends[top] {
		heap.Pop(&r.heads)
		return
	}
	heap.Fix(&r.heads, 0)
}

// runHeap orders the runs by their head's key encoding, then by run
// (slice) order, so a key's aggregates merge in slice order.
type runHeap[A any] struct {
	r   *sliceRuns[A]
	idx []int
}

func (h *runHeap[A]) Len() int { return len(h.idx) }
func (h *runHeap[A]) Less(i, j int) bool {
	a, b := h.idx[i], h.idx[j]
	if c := bytes.Compare(h.r.key(h.r.runs[a]), h.r.key(h.r.runs[b])); c != 0 {
		return c < 0
	}
	return a < b
}
func (h *runHeap[A]) Swap(i, j int) { h.idx[i], h.idx[j] = h.idx[j], h.idx[i] }
func (h *runHeap[A]) Push(x any)    { h.idx = append(h.idx, x.(int)) }
func (h *runHeap[A]) Pop() any {
	x := h.idx[len(h.idx)-1]
	h.idx = h.idx[:len(h.idx)-1]
	return x
}

// gcd is the greatest common divisor of two positive numbers.
func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// alignUp rounds t up to a multiple of m (t >= 0).
func alignUp(t, m int64) int64 { return t + floorMod(-t, m) }
