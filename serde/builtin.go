package serde

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Bytes passes byte slices through. Deserialize copies, because the runtime
// reuses the buffers it decodes from.
func Bytes() Serde[[]byte] { return bytesSerde{} }

type bytesSerde struct{}

func (bytesSerde) Serialize(dst []byte, v []byte) ([]byte, error) { return append(dst, v...), nil }

func (bytesSerde) Deserialize(b []byte) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	return append([]byte(nil), b...), nil
}

// String encodes strings as their bytes, as Kafka's StringSerializer, and
// decodes any bytes, unchanged: a Go string holds any bytes, so String is
// lossless where Kafka's StringDeserializer replaces invalid UTF-8 with
// U+FFFD. Use StrictString where text must be valid UTF-8 (a key that ends
// up in JSON, whose encoders replace invalid bytes).
func String() Serde[string] { return stringSerde{} }

type stringSerde struct{}

func (stringSerde) Serialize(dst []byte, v string) ([]byte, error) { return append(dst, v...), nil }
func (stringSerde) Deserialize(b []byte) (string, error)           { return string(b), nil }

// StrictString is String for text that must be valid UTF-8: it refuses to
// encode or decode anything else, with an error naming the first invalid
// byte, so bytes that are not text (x-\xff and x-\xc0 alike) never become
// U+FFFD further on and merge.
func StrictString() Serde[string] { return strictStringSerde{} }

type strictStringSerde struct{}

func (strictStringSerde) Serialize(dst []byte, v string) ([]byte, error) {
	if !utf8.ValidString(v) {
		return dst, fmt.Errorf("serde: string: invalid UTF-8 at byte %d", invalidUTF8([]byte(v)))
	}
	return append(dst, v...), nil
}

func (strictStringSerde) Deserialize(b []byte) (string, error) {
	if !utf8.Valid(b) {
		return "", fmt.Errorf("serde: string: invalid UTF-8 at byte %d", invalidUTF8(b))
	}
	return string(b), nil
}

// Int64 encodes int64 as 8 big-endian bytes, as Kafka's LongSerializer, so
// eddy's topics read the same from a JVM client.
func Int64() Serde[int64] { return int64Serde{} }

type int64Serde struct{}

func (int64Serde) Serialize(dst []byte, v int64) ([]byte, error) {
	return binary.BigEndian.AppendUint64(dst, uint64(v)), nil
}

func (int64Serde) Deserialize(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("serde: int64 needs 8 bytes, got %d", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// JSON encodes T with encoding/json. It is the convenient choice for
// interoperable topics; a hand-written Serde is faster on hot paths.
//
// It is strict where encoding/json is lossy: encoding/json replaces, in
// both directions, invalid UTF-8 (and, decoding, a \u escape of a lone
// UTF-16 surrogate) with U+FFFD, so different strings silently become one.
// JSON refuses to decode such a document (CheckJSONUnicode) and to encode a
// value with a string that is not valid UTF-8.
func JSON[T any]() Serde[T] { return jsonSerde[T]{} }

type jsonSerde[T any] struct{}

func (jsonSerde[T]) Serialize(dst []byte, v T) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, fmt.Errorf("serde: json encode %T: %w", v, err)
	}
	if replacedInvalidUTF8(b) {
		return dst, fmt.Errorf("serde: json encode %T: a string holds invalid UTF-8 (encoding/json would write U+FFFD in its place)", v)
	}
	return append(dst, b...), nil
}

func (jsonSerde[T]) Deserialize(b []byte) (T, error) {
	var v T
	if err := CheckJSONUnicode(b); err != nil {
		return v, fmt.Errorf("serde: json decode %T: %w", v, err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("serde: json decode %T: %w", v, err)
	}
	return v, nil
}

// List encodes a slice of values: a uvarint count, then each value's
// uvarint length and its encoding by values. What eddy stores and sends
// for a list of rows (TopN's tables, a stream-stream join's records of one
// timestamp).
func List[T any](values Serde[T]) Serde[[]T] { return listSerde[T]{values: values} }

type listSerde[T any] struct{ values Serde[T] }

func (s listSerde[T]) Serialize(dst []byte, vs []T) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(len(vs)))
	for _, v := range vs {
		// The value goes after room for its length, which is then
		// written in front of it: no scratch buffer, no allocation.
		at := len(dst)
		var err error
		if dst, err = s.values.Serialize(dst, v); err != nil {
			return nil, err
		}
		n := len(dst) - at
		var l [binary.MaxVarintLen64]byte
		w := binary.PutUvarint(l[:], uint64(n))
		dst = append(dst, l[:w]...)
		copy(dst[at+w:], dst[at:at+n])
		copy(dst[at:], l[:w])
	}
	return dst, nil
}

func (s listSerde[T]) Deserialize(b []byte) ([]T, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("serde: list: bad count")
	}
	b = b[k:]
	vs := make([]T, 0, n)
	for i := uint64(0); i < n; i++ {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, fmt.Errorf("serde: list: bad length of value %d", i)
		}
		v, err := s.values.Deserialize(b[k : k+int(l)])
		if err != nil {
			return nil, fmt.Errorf("serde: list: value %d: %w", i, err)
		}
		vs = append(vs, v)
		b = b[k+int(l):]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("serde: list: %d trailing bytes", len(b))
	}
	return vs, nil
}
