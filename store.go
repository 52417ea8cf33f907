package eddy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/state"
)

// StoreSpec names a state store for Process.
type StoreSpec interface {
	StoreName() string
}

// KeyValueStoreSpec declares a typed key-value store. Declare it once, pass
// it to Process, and open it in the processor's Init with Open.
type KeyValueStoreSpec[K, V any] struct {
	name   string
	keys   serde.Serde[K]
	values serde.Serde[V]
	ttl    time.Duration
}

// NewKeyValueStoreSpec declares a key-value store named name: its changelog topic
// is "<app-id>-<name>-changelog".
func NewKeyValueStoreSpec[K, V any](name string, keys serde.Serde[K], values serde.Serde[V]) KeyValueStoreSpec[K, V] {
	return KeyValueStoreSpec[K, V]{name: name, keys: keys, values: values}
}

// StoreName implements StoreSpec.
func (s KeyValueStoreSpec[K, V]) StoreName() string { return s.name }

// Open returns the task's instance of the store. ctx is the processor's
// context (any ProcessorContext); the store must be one of those passed to
// Process for this processor, or Open returns an error.
func (s KeyValueStoreSpec[K, V]) Open(ctx storeOpener) (*KeyValueStore[K, V], error) {
	buf, err := ctx.openStore(s.name)
	if err != nil {
		return nil, err
	}
	b := ctx.task()
	kv := s.view(buf, b.tc.StreamTime)
	if kv.ttl > 0 {
		// Sweep expired entries as stream time passes each half TTL, so
		// keys never read again do not stay forever.
		b.streamPunctuators = append(b.streamPunctuators, &punctuator{interval: max(kv.ttl/2, 1), fn: kv.sweep})
	} else if s.ttl != 0 {
		return nil, fmt.Errorf("eddy: store %s: TTL %v: use at least 1ms", s.name, s.ttl)
	}
	return kv, nil
}

// WithTTL makes entries expire ttl of stream time after they were last
// written: reads no longer see them, and a periodic sweep deletes them
// (through the changelog, like any delete). Stream time, not the wall
// clock, makes expiry deterministic: a replay after a crash expires the
// same entries.
func (s KeyValueStoreSpec[K, V]) WithTTL(ttl time.Duration) KeyValueStoreSpec[K, V] {
	s.ttl = ttl
	return s
}

// View returns a typed view of a task's raw store buffer. Processors use
// Open; View is for tools that hold the buffer themselves (eddytest), and
// sees a store with a TTL at stream time now.
func (s KeyValueStoreSpec[K, V]) View(buf *state.StoreBuffer, now func() int64) *KeyValueStore[K, V] {
	return s.view(buf, now)
}

func (s KeyValueStoreSpec[K, V]) view(buf *state.StoreBuffer, now func() int64) *KeyValueStore[K, V] {
	return &KeyValueStore[K, V]{buf: buf, keys: s.keys, values: s.values, ttl: s.ttl.Milliseconds(), now: now}
}

// KeyValueStore is a task's typed view of a key-value store. Reads see the task's
// own uncommitted writes; writes reach the database only once the
// transaction that made them committed.
type KeyValueStore[K, V any] struct {
	buf    *state.StoreBuffer
	keys   serde.Serde[K]
	values serde.Serde[V]
	kbuf   []byte
	vbuf   []byte
	// ttl (ms), when positive, prefixes each stored value with its
	// expiry in stream time (8 bytes, big-endian); now reads stream time.
	ttl int64
	now func() int64
}

// live strips the expiry prefix of a stored value, reporting false for an
// expired entry.
func (s *KeyValueStore[K, V]) live(b []byte) ([]byte, bool, error) {
	if s.ttl <= 0 {
		return b, true, nil
	}
	if len(b) < 8 {
		return nil, false, fmt.Errorf("eddy: store %s: value of %d bytes has no expiry; was the store written without a TTL?", s.buf.Name(), len(b))
	}
	return b[8:], int64(binary.BigEndian.Uint64(b)) > s.streamTime(), nil
}

func (s *KeyValueStore[K, V]) streamTime() int64 {
	if t := s.now(); t != state.NoStreamTime {
		return t
	}
	return 0
}

// sweep deletes the expired entries.
func (s *KeyValueStore[K, V]) sweep(int64) error {
	var expired [][]byte
	err := s.buf.Scan(nil, nil, func(k, v []byte) error {
		_, ok, err := s.live(v)
		if err == nil && !ok {
			expired = append(expired, append([]byte(nil), k...))
		}
		return err
	})
	for _, k := range expired {
		s.buf.Delete(k)
	}
	return err
}

// Get returns the value of k, and whether it exists.
func (s *KeyValueStore[K, V]) Get(k K) (V, bool, error) {
	var zero V
	var err error
	if s.kbuf, err = s.keys.Serialize(s.kbuf[:0], k); err != nil {
		return zero, false, fmt.Errorf("eddy: store %s: encode key: %w", s.buf.Name(), err)
	}
	b, ok, err := s.buf.Get(s.kbuf)
	if err != nil || !ok {
		return zero, false, err
	}
	if b, ok, err = s.live(b); err != nil || !ok {
		return zero, false, err
	}
	v, err := s.values.Deserialize(b)
	if err != nil {
		return zero, false, fmt.Errorf("eddy: store %s: decode value: %w", s.buf.Name(), err)
	}
	return v, true, nil
}

// Put sets k to v.
func (s *KeyValueStore[K, V]) Put(k K, v V) error {
	var err error
	if s.kbuf, err = s.keys.Serialize(s.kbuf[:0], k); err != nil {
		return fmt.Errorf("eddy: store %s: encode key: %w", s.buf.Name(), err)
	}
	s.vbuf = s.vbuf[:0]
	if s.ttl > 0 {
		s.vbuf = binary.BigEndian.AppendUint64(s.vbuf, uint64(s.streamTime()+s.ttl))
	}
	if s.vbuf, err = s.values.Serialize(s.vbuf, v); err != nil {
		return fmt.Errorf("eddy: store %s: encode value: %w", s.buf.Name(), err)
	}
	if err := checkWrite(s.buf, s.kbuf, s.vbuf); err != nil {
		return err
	}
	s.buf.Put(s.kbuf, s.vbuf)
	return nil
}

// checkWrite refuses a write to buf whose key and value would make a
// changelog record larger than Config.MaxRecordBytes. Accepted, it would
// fail the commit, and again after every restart: a poison pill. Refused
// here, the error wraps ErrRecordTooLarge, so Config.OnProduceError
// decides what happens to the record that made it.
func checkWrite(buf *state.StoreBuffer, key, value []byte) error {
	if limit, n := buf.MaxWrite(), len(key)+len(value); limit > 0 && n > limit {
		return fmt.Errorf("eddy: store %s: a write of %d bytes of key and value, more than MaxRecordBytes (%d) allows its changelog record: %w", buf.Name(), n, limit, ErrRecordTooLarge)
	}
	return nil
}

// Delete removes k.
func (s *KeyValueStore[K, V]) Delete(k K) error {
	var err error
	if s.kbuf, err = s.keys.Serialize(s.kbuf[:0], k); err != nil {
		return fmt.Errorf("eddy: store %s: encode key: %w", s.buf.Name(), err)
	}
	s.buf.Delete(s.kbuf)
	return nil
}

// Range returns the entries with from <= encoded key < to, in the byte
// order of the encoded keys. A scan that fails (an undecodable entry, an
// I/O error) yields the error once and stops:
//
//	for kv, err := range store.Range(from, to) {
//		if err != nil {
//			return err
//		}
//		use(kv.Key, kv.Value)
//	}
func (s *KeyValueStore[K, V]) Range(from, to K) iter.Seq2[KeyValue[K, V], error] {
	return func(yield func(KeyValue[K, V], error) bool) {
		lo, err := s.keys.Serialize(nil, from)
		if err != nil {
			yield(KeyValue[K, V]{}, fmt.Errorf("eddy: store %s: encode key: %w", s.buf.Name(), err))
			return
		}
		hi, err := s.keys.Serialize(nil, to)
		if err != nil {
			yield(KeyValue[K, V]{}, fmt.Errorf("eddy: store %s: encode key: %w", s.buf.Name(), err))
			return
		}
		s.scan(func(visit func(k, v []byte) error) error { return s.buf.Scan(lo, hi, visit) }, yield)
	}
}

// Prefix returns the entries whose encoded key starts with the encoding of
// prefix (with string keys: the keys that start with prefix), in key
// order; errors as in Range.
func (s *KeyValueStore[K, V]) Prefix(prefix K) iter.Seq2[KeyValue[K, V], error] {
	return func(yield func(KeyValue[K, V], error) bool) {
		p, err := s.keys.Serialize(nil, prefix)
		if err != nil {
			yield(KeyValue[K, V]{}, fmt.Errorf("eddy: store %s: encode key: %w", s.buf.Name(), err))
			return
		}
		s.scan(func(visit func(k, v []byte) error) error { return s.buf.PrefixScan(p, visit) }, yield)
	}
}

// All returns every entry in key order; errors as in Range.
func (s *KeyValueStore[K, V]) All() iter.Seq2[KeyValue[K, V], error] {
	return func(yield func(KeyValue[K, V], error) bool) {
		s.scan(func(visit func(k, v []byte) error) error { return s.buf.Scan(nil, nil, visit) }, yield)
	}
}

// errStopScan ends a store scan early (the consumer stopped); it never
// reaches a caller.
var errStopScan = errors.New("eddy: scan stopped")

// scan decodes the live entries that run visits and yields them, then the
// scan's error, if any.
func (s *KeyValueStore[K, V]) scan(run func(visit func(k, v []byte) error) error, yield func(KeyValue[K, V], error) bool) {
	err := run(func(kb, vb []byte) error {
		vb, ok, err := s.live(vb)
		if err != nil || !ok {
			return err
		}
		k, err := s.keys.Deserialize(kb)
		if err != nil {
			return fmt.Errorf("eddy: store %s: decode key: %w", s.buf.Name(), err)
		}
		v, err := s.values.Deserialize(vb)
		if err != nil {
			return fmt.Errorf("eddy: store %s: decode value: %w", s.buf.Name(), err)
		}
		if !yield(KeyValue[K, V]{Key: k, Value: v}, nil) {
			return errStopScan
		}
		return nil
	})
	if err != nil && err != errStopScan {
		yield(KeyValue[K, V]{}, err)
	}
}
