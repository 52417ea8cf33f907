package eddy

import (
	"encoding/binary"
	"fmt"
	"iter"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/state"
)

// Window is a time interval in ms since the epoch: [Start, End) for
// tumbling and hopping windows, [Start, End] (both inclusive, as in Kafka
// Streams) for sliding and session windows.
type Window struct {
	Start, End int64
}

// Windowed is a key within a window: the key of a windowed aggregate.
type Windowed[K any] struct {
	Key K
	Window
}

// WindowStoreSpec declares a window store: values per key and window start,
// kept for a retention period of stream time and dropped a whole time
// segment at a time once older (docs/design.md §5). Its changelog is
// "compact,delete" with a retention, since expired windows are never read
// again.
type WindowStoreSpec[K, V any] struct {
	name   string
	keys   serde.Serde[K]
	values serde.Serde[V]
	keep   time.Duration
	// size is the windows' size in ms when known (queries report each
	// window's end); see WithWindowSize.
	size int64
}

// NewWindowStoreSpec declares a window store named name that keeps each
// window for retention after its start, in stream time.
func NewWindowStoreSpec[K, V any](name string, retention time.Duration, keys serde.Serde[K], values serde.Serde[V]) WindowStoreSpec[K, V] {
	return WindowStoreSpec[K, V]{name: name, keys: keys, values: values, keep: retention}
}

// StoreName implements StoreSpec.
func (s WindowStoreSpec[K, V]) StoreName() string { return s.name }

func (s WindowStoreSpec[K, V]) retention() time.Duration { return s.keep }

// Open returns the task's instance of the store; see KeyValueStoreSpec.Open.
// Segments that expired before a restart are dropped on open.
func (s WindowStoreSpec[K, V]) Open(ctx storeOpener) (*WindowStore[K, V], error) {
	return openTimed(ctx, "window", s.name, s.keep, s.View)
}

// WithWindowSize records the size of the store's windows, so that
// queries report each window's end as well as its start. WindowAggregate
// sets it; a processor's own window store may.
func (s WindowStoreSpec[K, V]) WithWindowSize(size time.Duration) WindowStoreSpec[K, V] {
	s.size = size.Milliseconds()
	return s
}

// View returns a typed view of a task's raw store buffer (for tools; see
// KeyValueStoreSpec.View).
func (s WindowStoreSpec[K, V]) View(buf *state.StoreBuffer) *WindowStore[K, V] {
	return &WindowStore[K, V]{buf: buf, keys: s.keys, values: s.values, exp: newSegments(s.keep)}
}

// WindowStore is a task's typed view of a window store. Entries are keyed by
// window start, then key: a time range is one contiguous scan (closing
// windows, expiry), and a single window is one point read.
type WindowStore[K, V any] struct {
	buf    *state.StoreBuffer
	keys   serde.Serde[K]
	values serde.Serde[V]
	exp    segments
	kbuf   []byte
	vbuf   []byte
}

func (s *WindowStore[K, V]) expiry() *segments { return &s.exp }

// openTimed opens a window or session store (a kind) for a processor and
// makes its typed view, which then drops expired segments itself as the
// task's stream time passes.
func openTimed[T interface{ expiry() *segments }](ctx storeOpener, kind, name string, keep time.Duration, view func(*state.StoreBuffer) T) (T, error) {
	var zero T
	if keep <= 0 {
		return zero, fmt.Errorf("eddy: %s store %s: retention %v: set a positive retention", kind, name, keep)
	}
	buf, err := ctx.openStore(name)
	if err != nil {
		return zero, err
	}
	v := view(buf)
	v.expiry().now = ctx.task().tc.StreamTime
	return v, nil
}

// segments is the expiry of a window or session store: time is cut into
// segments of half the retention (at least 1s), and a segment is dropped
// whole, with one range deletion, once all of it expired.
type segments struct {
	// retention and segment are in ms; droppedBelow is the segment start
	// below which every segment has been dropped (-1: none yet).
	retention, segment, droppedBelow int64
	aborts                           uint64 // the buffer's Aborts when droppedBelow was set
	// now, set when a processor opened the store, reads stream time:
	// Put then expires old segments itself.
	now func() int64
}

func newSegments(keep time.Duration) segments {
	ret := keep.Milliseconds()
	return segments{retention: ret, segment: max(ret/2, 1000), droppedBelow: -1}
}

// expired returns the start of the first segment still live at
// streamTime, and whether the segments below it are still to drop; it then
// counts them as dropped.
func (g *segments) expired(buf *state.StoreBuffer, streamTime int64) (int64, bool) {
	if streamTime == state.NoStreamTime {
		return 0, false
	}
	live := streamTime - g.retention
	below := live - live%g.segment
	if g.aborts != buf.Aborts() {
		// A transaction aborted since the last drop: it may have
		// carried it. Dropping again is idempotent.
		g.aborts, g.droppedBelow = buf.Aborts(), -1
	}
	if live < 0 || below <= g.droppedBelow {
		return 0, false
	}
	g.droppedBelow = below
	return below, true
}

// Window store keys: the window start (big-endian, so byte order is time
// order; starts are never negative) followed by the encoded key. Store
// metadata lives under keys starting with 0xff, after every window.
const windowMetaPrefix = 0xff

func (s *WindowStore[K, V]) key(k K, start int64) ([]byte, error) {
	s.kbuf = binary.BigEndian.AppendUint64(s.kbuf[:0], uint64(start))
	var err error
	if s.kbuf, err = s.keys.Serialize(s.kbuf, k); err != nil {
		return nil, fmt.Errorf("eddy: store %s: encode key: %w", s.buf.Name(), err)
	}
	return s.kbuf, nil
}

// Get returns the value of k in the window starting at start.
func (s *WindowStore[K, V]) Get(k K, start int64) (V, bool, error) {
	var zero V
	kb, err := s.key(k, start)
	if err != nil {
		return zero, false, err
	}
	b, ok, err := s.buf.Get(kb)
	if err != nil || !ok {
		return zero, false, err
	}
	v, err := s.values.Deserialize(b)
	if err != nil {
		return zero, false, fmt.Errorf("eddy: store %s: decode value: %w", s.buf.Name(), err)
	}
	return v, true, nil
}

// Put sets the value of k in the window starting at start.
func (s *WindowStore[K, V]) Put(k K, start int64, v V) error {
	if start < 0 {
		return fmt.Errorf("eddy: store %s: window start %d is negative", s.buf.Name(), start)
	}
	kb, err := s.key(k, start)
	if err != nil {
		return err
	}
	if s.vbuf, err = s.values.Serialize(s.vbuf[:0], v); err != nil {
		return fmt.Errorf("eddy: store %s: encode value: %w", s.buf.Name(), err)
	}
	if err := checkWrite(s.buf, kb, s.vbuf); err != nil {
		return err
	}
	s.buf.Put(kb, s.vbuf)
	if s.exp.now != nil {
		s.Expire(s.exp.now())
	}
	return nil
}

// Delete removes k's value in the window starting at start.
func (s *WindowStore[K, V]) Delete(k K, start int64) error {
	kb, err := s.key(k, start)
	if err != nil {
		return err
	}
	s.buf.Delete(kb)
	return nil
}

// WindowEntry is one entry of a window store: Key's Value in the window
// that starts at Start.
type WindowEntry[K, V any] struct {
	Key   K
	Start int64
	Value V
}

// FetchAll returns every entry whose window starts in [from, to), in start
// order, then key order. A scan that fails (an undecodable entry, an I/O
// error) yields the error once and stops.
func (s *WindowStore[K, V]) FetchAll(from, to int64) iter.Seq2[WindowEntry[K, V], error] {
	return func(yield func(WindowEntry[K, V], error) bool) {
		err := s.fetchAll(from, to, func(k K, start int64, v V) bool {
			return yield(WindowEntry[K, V]{Key: k, Start: start, Value: v}, nil)
		})
		if err != nil {
			yield(WindowEntry[K, V]{}, err)
		}
	}
}

// Fetch returns k's entries whose window starts in [from, to), in start
// order; errors as in FetchAll. It scans every key's windows in the range
// and keeps k's: cheap for the few windows of a range that aggregations
// and queries ask.
func (s *WindowStore[K, V]) Fetch(k K, from, to int64) iter.Seq2[WindowEntry[K, V], error] {
	return func(yield func(WindowEntry[K, V], error) bool) {
		want, err := s.keys.Serialize(nil, k)
		if err != nil {
			yield(WindowEntry[K, V]{}, fmt.Errorf("eddy: store %s: encode key: %w", s.buf.Name(), err))
			return
		}
		var kb []byte
		var kerr error
		err = s.fetchAll(from, to, func(key K, start int64, v V) bool {
			if kb, kerr = s.keys.Serialize(kb[:0], key); kerr != nil {
				return false
			}
			if string(kb) != string(want) {
				return true
			}
			return yield(WindowEntry[K, V]{Key: key, Start: start, Value: v}, nil)
		})
		if kerr != nil {
			err = fmt.Errorf("eddy: store %s: encode key: %w", s.buf.Name(), kerr)
		}
		if err != nil {
			yield(WindowEntry[K, V]{}, err)
		}
	}
}

// fetchAll is FetchAll for the engine's own hot paths (closing windows,
// draining joins): a callback, no iterator closure; fn returning false
// stops the scan.
func (s *WindowStore[K, V]) fetchAll(from, to int64, fn func(k K, start int64, v V) bool) error {
	from, to = max(from, 0), max(to, 0)
	if from >= to {
		return nil
	}
	lo := binary.BigEndian.AppendUint64(nil, uint64(from))
	hi := binary.BigEndian.AppendUint64(nil, uint64(to))
	err := s.buf.Scan(lo, hi, func(kb, vb []byte) error {
		start := int64(binary.BigEndian.Uint64(kb))
		k, err := s.keys.Deserialize(kb[8:])
		if err != nil {
			return fmt.Errorf("eddy: store %s: decode key: %w", s.buf.Name(), err)
		}
		v, err := s.values.Deserialize(vb)
		if err != nil {
			return fmt.Errorf("eddy: store %s: decode value: %w", s.buf.Name(), err)
		}
		if !fn(k, start, v) {
			return errStopScan
		}
		return nil
	})
	if err == errStopScan {
		return nil
	}
	return err
}

// Expire drops every segment whose windows all started before
// streamTime - retention, with one range deletion; a window that expires
// is kept until its whole segment has. Call it as stream time advances.
func (s *WindowStore[K, V]) Expire(streamTime int64) {
	if below, ok := s.exp.expired(s.buf, streamTime); ok {
		s.buf.DeleteRange(nil, binary.BigEndian.AppendUint64(nil, uint64(below)))
	}
}

// getMeta and putMeta keep a window or session store's own metadata
// (int64s, logged like its data) under keys that start with 0xff, which no
// window or session key can take.
func getMeta(buf *state.StoreBuffer, name string) (int64, bool, error) {
	b, ok, err := buf.Get(append([]byte{windowMetaPrefix}, name...))
	if err != nil || !ok {
		return 0, false, err
	}
	if len(b) != 8 {
		return 0, false, fmt.Errorf("eddy: store %s: metadata %s has %d bytes, want 8", buf.Name(), name, len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), true, nil
}

func putMeta(buf *state.StoreBuffer, name string, v int64) {
	buf.Put(append([]byte{windowMetaPrefix}, name...), binary.BigEndian.AppendUint64(nil, uint64(v)))
}

// layoutGuard is the bookkeeping of a store's layout marker (a metadata
// entry saying what the store holds): checked once per task, and again
// after an abort, which may have dropped what the check relied on; and
// written again in every transaction that writes the store, because its
// changelog is compacted and deleted by age, and a marker written once
// would age out while later data stays.
type layoutGuard struct {
	checked  bool
	aborts   uint64 // buf.Aborts() when checked
	markedIn uint64 // the transaction that last wrote the marker
}

// check runs fn unless it passed since the last abort.
func (g *layoutGuard) check(buf *state.StoreBuffer, fn func() error) error {
	if g.checked && g.aborts == buf.Aborts() {
		return nil
	}
	if err := fn(); err != nil {
		return err
	}
	g.checked, g.aborts = true, buf.Aborts()
	return nil
}

// mark writes the marker name = v once in the open transaction.
func (g *layoutGuard) mark(buf *state.StoreBuffer, name string, v int64) {
	if g.markedIn != buf.Transaction() {
		putMeta(buf, name, v)
		g.markedIn = buf.Transaction()
	}
}

// holdsData reports whether buf has a key below upper (nil: any key).
func holdsData(buf *state.StoreBuffer, upper []byte) (bool, error) {
	found := false
	err := buf.Scan(nil, upper, func(_, _ []byte) error { found = true; return errStopScan })
	if err != nil && err != errStopScan {
		return false, err
	}
	return found, nil
}

// WindowedSerde encodes a windowed key for a topic: the key's encoding,
// then the window start and end (8 bytes each, big-endian), as Kafka
// Streams' time-windowed serde does (which writes the start only).
func WindowedSerde[K any](keys serde.Serde[K]) serde.Serde[Windowed[K]] {
	return windowedSerde[K]{keys: keys}
}

type windowedSerde[K any] struct{ keys serde.Serde[K] }

func (s windowedSerde[K]) Serialize(dst []byte, w Windowed[K]) ([]byte, error) {
	dst, err := s.keys.Serialize(dst, w.Key)
	if err != nil {
		return nil, err
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(w.Start))
	return binary.BigEndian.AppendUint64(dst, uint64(w.End)), nil
}

func (s windowedSerde[K]) Deserialize(b []byte) (Windowed[K], error) {
	var w Windowed[K]
	if len(b) < 16 {
		return w, fmt.Errorf("windowed key: %d bytes, want at least 16", len(b))
	}
	n := len(b) - 16
	k, err := s.keys.Deserialize(b[:n])
	if err != nil {
		return w, err
	}
	w.Key = k
	w.Start = int64(binary.BigEndian.Uint64(b[n:]))
	w.End = int64(binary.BigEndian.Uint64(b[n+8:]))
	return w, nil
}
