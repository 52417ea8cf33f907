package eddy

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"

	"github.com/eddy-streams/eddy/serde"
)

// StoreKind is the kind of a state store, as interactive queries see it.
type StoreKind string

const (
	// KeyValueKind stores hold one value per key: Get, Prefix, Range.
	KeyValueKind StoreKind = "key-value"
	// WindowKind stores hold one value per key and window start: fetch a
	// key's windows in a time range.
	WindowKind StoreKind = "window"
	// SessionKind stores hold sessions: fetch a key's sessions that start
	// in a time range (the windows route), each with its end.
	SessionKind StoreKind = "session"
)

// storeQuery is what a store declaration tells interactive queries: how
// to turn a key given as text (a URL) into the store's key bytes, and the
// store's bytes back into Go values that encoding/json renders. The store
// specs implement it with their serdes.
type storeQuery interface {
	queryKind() StoreKind
	// parseKey encodes a key given as text: the text itself for string
	// and []byte keys, a number for integer and float keys, JSON for any
	// other type.
	parseKey(s string) ([]byte, error)
	// decodeKey decodes an encoded key (without any window prefix).
	decodeKey(b []byte) (any, error)
	// decodeValue decodes a stored value; ok is false for an entry that
	// expired at streamTime (a key-value store with a TTL).
	decodeValue(b []byte, streamTime int64) (v any, ok bool, err error)
	// windowSize is the size of a window store's windows in ms, 0 when
	// the declaration does not know it.
	windowSize() int64
	// sessionSegment is the segment size in ms of a store kept in the
	// session layout (sessions, sliding windows), 0 for the others.
	sessionSegment() int64
}

// parseTextKey turns text into a K and encodes it with keys.
func parseTextKey[K any](s string, keys serde.Serde[K]) ([]byte, error) {
	var k K
	rv := reflect.ValueOf(&k).Elem()
	var err error
	switch rv.Kind() {
	case reflect.String:
		rv.SetString(s)
	case reflect.Slice:
		if rv.Type().Elem().Kind() != reflect.Uint8 {
			err = json.Unmarshal([]byte(s), &k)
			break
		}
		rv.SetBytes([]byte(s))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var n int64
		if n, err = strconv.ParseInt(s, 10, rv.Type().Bits()); err == nil {
			rv.SetInt(n)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		var n uint64
		if n, err = strconv.ParseUint(s, 10, rv.Type().Bits()); err == nil {
			rv.SetUint(n)
		}
	case reflect.Float32, reflect.Float64:
		var f float64
		if f, err = strconv.ParseFloat(s, rv.Type().Bits()); err == nil {
			rv.SetFloat(f)
		}
	case reflect.Bool:
		var b bool
		if b, err = strconv.ParseBool(s); err == nil {
			rv.SetBool(b)
		}
	default:
		err = json.Unmarshal([]byte(s), &k)
	}
	if err != nil {
		return nil, fmt.Errorf("key %q is not a %T: %w", s, k, err)
	}
	b, err := keys.Serialize(nil, k)
	if err != nil {
		return nil, fmt.Errorf("key %q: encode: %w", s, err)
	}
	return b, nil
}

func decodeAny[T any](s serde.Serde[T], b []byte) (any, error) {
	v, err := s.Deserialize(b)
	if err != nil {
		return nil, err
	}
	return v, nil
}

func (s KeyValueStoreSpec[K, V]) queryKind() StoreKind { return KeyValueKind }
func (s KeyValueStoreSpec[K, V]) parseKey(text string) ([]byte, error) {
	return parseTextKey(text, s.keys)
}
func (s KeyValueStoreSpec[K, V]) decodeKey(b []byte) (any, error) { return decodeAny(s.keys, b) }
func (s KeyValueStoreSpec[K, V]) windowSize() int64               { return 0 }
func (s KeyValueStoreSpec[K, V]) sessionSegment() int64           { return 0 }
func (s KeyValueStoreSpec[K, V]) decodeValue(b []byte, streamTime int64) (any, bool, error) {
	if s.ttl > 0 {
		// As KeyValueStore.live: the value follows its expiry in stream time.
		if len(b) < 8 {
			return nil, false, fmt.Errorf("value of %d bytes has no expiry; was the store written without a TTL?", len(b))
		}
		if int64(binary.BigEndian.Uint64(b)) <= max(streamTime, 0) {
			return nil, false, nil
		}
		b = b[8:]
	}
	v, err := decodeAny(s.values, b)
	return v, err == nil, err
}

func (s WindowStoreSpec[K, V]) queryKind() StoreKind { return WindowKind }
func (s WindowStoreSpec[K, V]) parseKey(text string) ([]byte, error) {
	return parseTextKey(text, s.keys)
}
func (s WindowStoreSpec[K, V]) decodeKey(b []byte) (any, error) { return decodeAny(s.keys, b) }
func (s WindowStoreSpec[K, V]) windowSize() int64               { return s.size }
func (s WindowStoreSpec[K, V]) sessionSegment() int64           { return 0 }
func (s WindowStoreSpec[K, V]) decodeValue(b []byte, _ int64) (any, bool, error) {
	v, err := decodeAny(s.values, b)
	return v, err == nil, err
}

func (s SessionStoreSpec[K, V]) queryKind() StoreKind { return SessionKind }
func (s SessionStoreSpec[K, V]) parseKey(text string) ([]byte, error) {
	return parseTextKey(text, s.keys)
}
func (s SessionStoreSpec[K, V]) decodeKey(b []byte) (any, error) { return decodeAny(s.keys, b) }
func (s SessionStoreSpec[K, V]) windowSize() int64               { return 0 }
func (s SessionStoreSpec[K, V]) sessionSegment() int64           { return newSegments(s.keep).segment }
func (s SessionStoreSpec[K, V]) decodeValue(b []byte, _ int64) (any, bool, error) {
	v, err := decodeAny(s.values, b)
	return v, err == nil, err
}

// slidingQuery is a sliding aggregation's store as queries see it: a
// window store, as it was when sliding windows kept a window store, whose
// windows are read from the session layout they are kept in now, and
// whose values are the aggregates without the latest record's timestamp.
type slidingQuery[K, A any] struct {
	SessionStoreSpec[K, slidingAgg[A]]
	aggs serde.Serde[A]
}

func (s slidingQuery[K, A]) queryKind() StoreKind { return WindowKind }
func (s slidingQuery[K, A]) decodeValue(b []byte, _ int64) (any, bool, error) {
	v, err := (slidingAggSerde[A]{aggs: s.aggs}).Deserialize(b)
	if err != nil {
		return nil, false, err
	}
	return v.agg, true, nil
}

// slicedQuery is the store of a Sliced hopping aggregation: a window store
// whose entries are slices, not windows. Queries refuse it (see
// refuseSliced) rather than answer a slice for a window.
type slicedQuery[K, A any] struct{ WindowStoreSpec[K, A] }

// refuseSliced is the error of a query of a sliced store, nil for any
// other store.
func refuseSliced(q storeQuery) error {
	if s, ok := q.(interface{ slicedStore() string }); ok {
		return fmt.Errorf("eddy: store %s keeps slices of hopping windows (Sliced), not windows, and cannot be queried; to query the windows, drop Sliced (and reset the application), or materialize the aggregation's output in a store of its own", s.slicedStore())
	}
	return nil
}

func (s slicedQuery[K, A]) slicedStore() string { return s.name }
