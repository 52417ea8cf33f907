package serde

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
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

// String encodes strings as their UTF-8 bytes, as Kafka's StringSerializer.
func String() Serde[string] { return stringSerde{} }

type stringSerde struct{}

func (stringSerde) Serialize(dst []byte, v string) ([]byte, error) { return append(dst, v...), nil }
func (stringSerde) Deserialize(b []byte) (string, error)           { return string(b), nil }

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
func JSON[T any]() Serde[T] { return jsonSerde[T]{} }

type jsonSerde[T any] struct{}

func (jsonSerde[T]) Serialize(dst []byte, v T) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, fmt.Errorf("serde: json encode %T: %w", v, err)
	}
	return append(dst, b...), nil
}

func (jsonSerde[T]) Deserialize(b []byte) (T, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("serde: json decode %T: %w", v, err)
	}
	return v, nil
}

// StrictString is temporary (test first).
func StrictString() Serde[string] { return stringSerde{} }
