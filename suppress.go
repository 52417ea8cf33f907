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

// This file is Suppress (Kafka Streams' KIP-328, after its
// KTableSuppressProcessor and time-ordered key-value buffer): a table's
// updates held back in a logged buffer, the latest per key, and forwarded
// once their time comes, driven by the task's stream time.

// Suppressed says how long Suppress holds a table's updates: until their
// window closes (UntilWindowCloses) or for a time limit (UntilTimeLimit).
// The zero value is not valid: make one with those functions.
type Suppressed struct {
	untilWindowCloses bool
	limit             time.Duration
	buffer            BufferConfig
	set               bool
}

// UntilWindowCloses holds each window's updates until the window closes
// (its end + the grace period of the windowed aggregation that made the
// table; for sliding and session windows, as for EmitFinal, the first
// millisecond after that, and for sessions their gap on top), then
// forwards its final value once: Kafka Streams'
// Suppressed.untilWindowCloses. Only for a windowed aggregation's table
// (or a FilterTable or MapTableValues of one), and only with
// ShutDownWhenFull: emitting early would not be a final result.
func UntilWindowCloses(b BufferConfig) Suppressed {
	return Suppressed{untilWindowCloses: true, buffer: b, set: true}
}

// UntilTimeLimit holds each key's updates until stream time reaches the
// time of its first held update + d, then forwards the key's latest
// value (Kafka Streams' Suppressed.untilTimeLimit): a later update of a
// held key replaces its value but keeps its time, so a key that keeps
// changing is still forwarded every d or so.
func UntilTimeLimit(d time.Duration, b BufferConfig) Suppressed {
	return Suppressed{limit: d, buffer: b, set: true}
}

// BufferConfig bounds Suppress's buffer, and says what happens when an
// update would exceed the bound.
type BufferConfig struct {
	// MaxRecords is how many keys the buffer holds at most; 0 is no bound.
	MaxRecords int
	// MaxBytes is how many bytes the buffer holds at most: each held
	// key's encoding plus its entry (the encoded value, the timestamp and
	// the headers); 0 is no bound.
	MaxBytes int64
	// WhenFull is what happens when an update makes the buffer exceed a
	// bound.
	WhenFull FullPolicy
}

// FullPolicy is what Suppress does when its buffer exceeds a bound.
type FullPolicy int

const (
	// ShutDownWhenFull stops the app with an error wrapping
	// ErrSuppressBufferFull: the transaction that overflowed the buffer
	// aborts, so nothing is forwarded twice. Give the buffer room (or a
	// bound of 0) and start the app again.
	ShutDownWhenFull FullPolicy = iota
	// EmitEarlyWhenFull forwards the held updates in time order, oldest
	// first, until the buffer fits its bounds again: a key may then be
	// forwarded more than once.
	EmitEarlyWhenFull
)

// ErrSuppressBufferFull is wrapped by the error that stops an app whose
// Suppress buffer, with ShutDownWhenFull, exceeded a bound. No error
// policy skips it: the record that overflowed the buffer is not at fault.
var ErrSuppressBufferFull = errors.New("eddy: suppress buffer full")

// Suppress holds back the updates of t, forwarding per key only the
// latest, when s says (Kafka Streams' KTable.suppress). The held updates
// live in the state store named store, logged to its changelog like any
// store's writes in the task's transaction: a crash or an abort rolls the
// buffer back with the records that filled it, so each held update is
// forwarded exactly once. keys and values encode the buffer's entries;
// for a windowed table keys is WindowedSerde(the key serde).
//
// Updates are forwarded in the order of their time (the window's close,
// or the key's first held update), then of their encoded keys, as stream
// time (the task's, as for EmitFinal) reaches it, whether or not a record
// reaches Suppress then. Each forwarded record is the key's latest
// update as it came: its timestamp and headers (Kafka Streams forwards
// the buffered record's context). A tombstone is held like a value and
// replaces it: UntilTimeLimit forwards it, UntilWindowCloses drops it
// (a deleted window, such as a session a merge replaced, has no final
// result), as Kafka Streams does.
//
// The result is a table that is not kept in a store (the buffer holds
// pending updates, not rows): write it out with ToStream, or keep it
// with ToTable.
func Suppress[K, V any](t Table[K, V], store string, s Suppressed, keys serde.Serde[K], values serde.Serde[V]) Table[K, V] {
	topo := t.t
	fail := func(format string, args ...any) {
		topo.failOn("Suppress", t.n, "suppress %q: "+format, append([]any{store}, args...)...)
	}
	switch {
	case !s.set:
		fail("no Suppressed given; use eddy.UntilWindowCloses or eddy.UntilTimeLimit")
	case s.untilWindowCloses && t.closeAt == nil:
		fail("UntilWindowCloses needs the table of a windowed aggregation (WindowAggregate, WindowCount, CogroupWindowAggregate); use UntilTimeLimit for other tables")
	case s.untilWindowCloses && s.buffer.WhenFull == EmitEarlyWhenFull:
		fail("UntilWindowCloses forwards final results only: use ShutDownWhenFull, not EmitEarlyWhenFull")
	case !s.untilWindowCloses && s.limit < 0:
		fail("time limit %v: use zero or more", s.limit)
	case s.buffer.MaxRecords < 0 || s.buffer.MaxBytes < 0:
		fail("buffer bounds %d records, %d bytes: use zero (no bound) or more", s.buffer.MaxRecords, s.buffer.MaxBytes)
	case s.buffer.WhenFull != ShutDownWhenFull && s.buffer.WhenFull != EmitEarlyWhenFull:
		fail("unknown FullPolicy %d: use ShutDownWhenFull or EmitEarlyWhenFull", s.buffer.WhenFull)
	case keys == nil || values == nil:
		fail("pass the key and value serdes that encode the buffer")
	}
	n := topo.add("suppress-"+store, t.n)
	topo.addStore(store, n, 0, nil)
	due := func(r Record[K, V]) int64 { return satAdd(r.Timestamp, s.limit.Milliseconds()) }
	if s.untilWindowCloses {
		due = func(r Record[K, V]) int64 { return t.closeAt(r.Key) }
	}
	cfg := s.buffer
	dropTombstones := s.untilWindowCloses
	n.build = func(b *taskBuild) error {
		out := &emitter[K, V]{}
		b.out[n] = out
		buf, err := b.tc.Store(store)
		if err != nil {
			return err
		}
		p := &suppressor[K, V]{buf: buf, out: out, keys: keys, values: values, due: due, cfg: cfg,
			dropTombstones: dropTombstones, now: b.tc.StreamTime}
		in := output[K, V](b, t.n)
		in.children = append(in.children, p)
		// Stream time may pass a held update's time on a record that
		// never reaches Suppress (a tombstone its aggregation skipped, a
		// record a Filter before it dropped): a punctuator at every
		// advance forwards what is due then.
		b.streamPunctuators = append(b.streamPunctuators, &punctuator{interval: 1, fn: p.evictDue})
		b.atEndOfInput(p.evictDue)
		return nil
	}
	return Table[K, V]{t: topo, n: n, closeAt: t.closeAt}
}

// satAdd is a + b, held at the int64 bounds.
func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// The buffer's layout in its store: each held update under
// suppressByTime + its time (ordered, see orderedTime) + the encoded key,
// so that a scan from the start meets them in time order; under
// suppressByKey + the encoded key, the time it is held under, to find a
// key's entry; the held records and bytes as store metadata (windowMeta
// keys, after both), so the bounds hold across restarts.
const (
	suppressByTime = 0x00
	suppressByKey  = 0x01
	metaRecords    = "suppress-records"
	metaBytes      = "suppress-bytes"
	// suppressBatch is how many due entries one scan collects.
	suppressBatch = 256
)

// orderedTime encodes a time so that byte order is time order, negative
// times included.
func orderedTime(dst []byte, t int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(t)^(1<<63))
}

// heldTime reads back a time that orderedTime wrote at the start of b.
func heldTime(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }

// suppressor is one task's instance of Suppress.
type suppressor[K, V any] struct {
	buf            *state.StoreBuffer
	out            *emitter[K, V]
	keys           serde.Serde[K]
	values         serde.Serde[V]
	due            func(Record[K, V]) int64
	cfg            BufferConfig
	dropTombstones bool
	now            func() int64

	// counts are the buffer's held records and bytes, and minDue the
	// earliest time held (math.MaxInt64: none), cached from the store;
	// aborts is the buffer's Aborts when they were read: an abort rolls
	// the store back, so they are read again.
	counts  struct{ records, bytes int64 }
	minDue  int64
	loaded  bool
	aborts  uint64
	kbuf    []byte
	ebuf    []byte
	scratch []heldEntry
}

// heldEntry is a held update read by a scan: its keys in the store (by
// time; the by-key one is derived) and its encoded entry.
type heldEntry struct {
	timeKey []byte
	entry   []byte
}

// load reads the counts and the earliest held time from the store, unless
// the cache is still good.
func (p *suppressor[K, V]) load() error {
	if p.loaded && p.aborts == p.buf.Aborts() {
		return nil
	}
	records, _, err := getMeta(p.buf, metaRecords)
	if err != nil {
		return err
	}
	bytes, _, err := getMeta(p.buf, metaBytes)
	if err != nil {
		return err
	}
	p.minDue = math.MaxInt64
	err = p.buf.Scan([]byte{suppressByTime}, []byte{suppressByKey}, func(k, _ []byte) error {
		if len(k) < 9 {
			return fmt.Errorf("eddy: suppress store %s: entry key of %d bytes", p.buf.Name(), len(k))
		}
		p.minDue = heldTime(k[1:])
		return errStopScan
	})
	if err != nil && err != errStopScan {
		return err
	}
	p.counts.records, p.counts.bytes = records, bytes
	p.loaded, p.aborts = true, p.buf.Aborts()
	return nil
}

func (p *suppressor[K, V]) saveCounts() {
	putMeta(p.buf, metaRecords, p.counts.records)
	putMeta(p.buf, metaBytes, p.counts.bytes)
}

// receive holds r as its key's latest update, then forwards what is due
// and enforces the bounds, as Kafka Streams' suppress processor does.
func (p *suppressor[K, V]) receive(r Record[K, V]) error {
	ok := false
	defer p.reloadUnless(&ok)
	err := p.hold(r)
	ok = err == nil
	return err
}

// reloadUnless drops the cache unless *ok: the call it follows failed or
// panicked (in a processor downstream) half-way, so the cache may be
// ahead of or behind the store, and an error policy that goes on keeps
// the store's writes without an abort.
func (p *suppressor[K, V]) reloadUnless(ok *bool) {
	if !*ok {
		p.loaded = false
	}
}

func (p *suppressor[K, V]) hold(r Record[K, V]) error {
	if err := p.load(); err != nil {
		return err
	}
	kb, err := p.keys.Serialize(p.kbuf[:0], r.Key)
	if err != nil {
		return fmt.Errorf("eddy: suppress store %s: encode key: %w", p.buf.Name(), err)
	}
	p.kbuf = kb
	byKey := append([]byte{suppressByKey}, kb...)
	due := p.due(r)
	old, held, err := p.buf.Get(byKey)
	if err != nil {
		return err
	}
	if held {
		if len(old) != 8 {
			return fmt.Errorf("eddy: suppress store %s: index entry of %d bytes, want 8", p.buf.Name(), len(old))
		}
		// A held key keeps its place (Kafka Streams' non-resetting
		// buffer): its time is that of its first held update.
		due = heldTime(old)
	}
	timeKey := orderedTime([]byte{suppressByTime}, due)
	timeKey = append(timeKey, kb...)
	if held {
		prev, ok, err := p.buf.Get(timeKey)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("eddy: suppress store %s: a held key has no entry", p.buf.Name())
		}
		p.counts.records--
		p.counts.bytes -= int64(len(kb) + len(prev))
	}
	if p.ebuf, err = p.encode(p.ebuf[:0], r); err != nil {
		return err
	}
	if err := checkWrite(p.buf, timeKey, p.ebuf); err != nil {
		return err
	}
	p.buf.Put(timeKey, p.ebuf)
	if !held {
		p.buf.Put(byKey, orderedTime(nil, due))
	}
	p.counts.records++
	p.counts.bytes += int64(len(kb) + len(p.ebuf))
	p.saveCounts()
	p.minDue = min(p.minDue, due)
	if now := p.now(); now != state.NoStreamTime {
		if err := p.evictDue(now); err != nil {
			return err
		}
	}
	return p.enforceBounds()
}

// over reports whether the buffer exceeds a bound.
func (p *suppressor[K, V]) over(records, bytes int64) bool {
	return p.cfg.MaxRecords > 0 && records > int64(p.cfg.MaxRecords) || p.cfg.MaxBytes > 0 && bytes > p.cfg.MaxBytes
}

// enforceBounds applies the full policy when the buffer exceeds a bound.
func (p *suppressor[K, V]) enforceBounds() error {
	if !p.over(p.counts.records, p.counts.bytes) {
		return nil
	}
	if p.cfg.WhenFull == ShutDownWhenFull {
		return fmt.Errorf("eddy: suppress store %s: %d records and %d bytes held, over the bound of %s: %w",
			p.buf.Name(), p.counts.records, p.counts.bytes, p.bounds(), ErrSuppressBufferFull)
	}
	records, bytes := p.counts.records, p.counts.bytes
	return p.evict(func(e heldEntry) bool {
		if !p.over(records, bytes) {
			return false
		}
		records--
		bytes -= int64(len(e.timeKey) - 9 + len(e.entry))
		return true
	})
}

func (p *suppressor[K, V]) bounds() string {
	switch {
	case p.cfg.MaxRecords > 0 && p.cfg.MaxBytes > 0:
		return fmt.Sprintf("MaxRecords %d, MaxBytes %d", p.cfg.MaxRecords, p.cfg.MaxBytes)
	case p.cfg.MaxRecords > 0:
		return fmt.Sprintf("MaxRecords %d", p.cfg.MaxRecords)
	}
	return fmt.Sprintf("MaxBytes %d", p.cfg.MaxBytes)
}

// evictDue forwards the held updates whose time stream time now reached.
func (p *suppressor[K, V]) evictDue(now int64) error {
	if err := p.load(); err != nil {
		return err
	}
	if p.minDue > now {
		return nil // nothing due: the store is not read
	}
	ok := false
	defer p.reloadUnless(&ok)
	err := p.evict(func(e heldEntry) bool {
		return heldTime(e.timeKey[1:]) <= now
	})
	ok = err == nil
	return err
}

// evict removes and forwards the held updates, in time order, while take
// accepts them; it leaves minDue at the first one it did not take.
func (p *suppressor[K, V]) evict(take func(heldEntry) bool) error {
	for {
		batch := p.scratch[:0]
		p.minDue = math.MaxInt64
		err := p.buf.Scan([]byte{suppressByTime}, []byte{suppressByKey}, func(k, v []byte) error {
			if len(k) < 9 {
				return fmt.Errorf("eddy: suppress store %s: entry key of %d bytes", p.buf.Name(), len(k))
			}
			e := heldEntry{timeKey: k, entry: v}
			if len(batch) == suppressBatch || !take(e) {
				p.minDue = heldTime(k[1:])
				return errStopScan
			}
			batch = append(batch, heldEntry{timeKey: append([]byte(nil), k...), entry: append([]byte(nil), v...)})
			return nil
		})
		p.scratch = batch[:0]
		if err != nil && err != errStopScan {
			return err
		}
		for _, e := range batch {
			if err := p.forward(e); err != nil {
				return err
			}
		}
		if len(batch) < suppressBatch {
			return nil
		}
	}
}

// forward removes a held update from the buffer and forwards it (unless
// it is a tombstone that need not be).
func (p *suppressor[K, V]) forward(e heldEntry) error {
	kb := e.timeKey[9:]
	p.buf.Delete(e.timeKey)
	p.buf.Delete(append([]byte{suppressByKey}, kb...))
	p.counts.records--
	p.counts.bytes -= int64(len(kb) + len(e.entry))
	p.saveCounts()
	r, err := p.decode(kb, e.entry)
	if err != nil {
		return err
	}
	if r.Tombstone && p.dropTombstones {
		return nil
	}
	return p.out.emit(r)
}

// A held update is encoded as its timestamp (8 bytes, big-endian), a
// flag byte (1: a tombstone), the number of headers and each header's
// key and value, each a uvarint length then the bytes, then the encoded
// value (none for a tombstone).
func (p *suppressor[K, V]) encode(dst []byte, r Record[K, V]) ([]byte, error) {
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.Timestamp))
	flag := byte(0)
	if r.Tombstone {
		flag = 1
	}
	dst = append(dst, flag)
	dst = binary.AppendUvarint(dst, uint64(len(r.Headers)))
	for _, h := range r.Headers {
		dst = binary.AppendUvarint(dst, uint64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = binary.AppendUvarint(dst, uint64(len(h.Value)))
		dst = append(dst, h.Value...)
	}
	if r.Tombstone {
		return dst, nil
	}
	dst, err := p.values.Serialize(dst, r.Value)
	if err != nil {
		return nil, fmt.Errorf("eddy: suppress store %s: encode value: %w", p.buf.Name(), err)
	}
	return dst, nil
}

func (p *suppressor[K, V]) decode(kb, b []byte) (Record[K, V], error) {
	var r Record[K, V]
	size := len(b)
	corrupt := func() error {
		return fmt.Errorf("eddy: suppress store %s: held entry of %d bytes is corrupt", p.buf.Name(), size)
	}
	k, err := p.keys.Deserialize(kb)
	if err != nil {
		return r, fmt.Errorf("eddy: suppress store %s: decode key: %w", p.buf.Name(), err)
	}
	r.Key = k
	if len(b) < 9 || b[8] > 1 {
		return r, corrupt()
	}
	r.Timestamp, r.Tombstone = int64(binary.BigEndian.Uint64(b)), b[8] == 1
	b = b[9:]
	count, w := binary.Uvarint(b)
	if w <= 0 || count > uint64(len(b)) {
		return r, corrupt()
	}
	b = b[w:]
	field := func() ([]byte, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < n {
			return nil, false
		}
		f := b[w : w+int(n)]
		b = b[w+int(n):]
		return f, true
	}
	for range count {
		hk, ok := field()
		if !ok {
			return r, corrupt()
		}
		hv, ok := field()
		if !ok {
			return r, corrupt()
		}
		r.Headers = append(r.Headers, Header{Key: string(hk), Value: append([]byte(nil), hv...)})
	}
	if r.Tombstone {
		return r, nil
	}
	if r.Value, err = p.values.Deserialize(b); err != nil {
		return r, fmt.Errorf("eddy: suppress store %s: decode value: %w", p.buf.Name(), err)
	}
	return r, nil
}
