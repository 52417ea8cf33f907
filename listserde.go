package eddy

import (
	"encoding/binary"
	"fmt"

	"github.com/eddy-streams/eddy/serde"
)

// listSerde encodes the values that share a timestamp: a uvarint count,
// then each value's uvarint length and encoding.
type listSerde[V any] struct{ values serde.Serde[V] }

func (s listSerde[V]) Serialize(dst []byte, vs []V) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(len(vs)))
	var enc []byte
	for _, v := range vs {
		var err error
		if enc, err = s.values.Serialize(enc[:0], v); err != nil {
			return nil, err
		}
		dst = binary.AppendUvarint(dst, uint64(len(enc)))
		dst = append(dst, enc...)
	}
	return dst, nil
}

func (s listSerde[V]) Deserialize(b []byte) ([]V, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("value list: bad count")
	}
	b = b[k:]
	vs := make([]V, 0, n)
	for i := uint64(0); i < n; i++ {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, fmt.Errorf("value list: bad length")
		}
		v, err := s.values.Deserialize(b[k : k+int(l)])
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
		b = b[k+int(l):]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("value list: trailing bytes")
	}
	return vs, nil
}
