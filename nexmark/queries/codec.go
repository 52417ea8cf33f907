package queries

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The queries' own records (results and the intermediate values they keep
// in stores or send through repartition topics) use the same compact
// binary form as nexmark's event serdes: integers as zig-zag varints,
// strings as a uvarint length and the bytes, appended to the caller's
// buffer, so encoding allocates nothing.

// errCorrupt is wrapped by every decoding error of this package.
var errCorrupt = errors.New("nexmark/queries: corrupt encoding")

func appendInt(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// reader decodes what the append functions wrote. The first error sticks
// and later reads return zero values, so a decoder reads every field and
// checks once, in done.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s with %d bytes left", errCorrupt, what, len(r.b))
	}
}

func (r *reader) int() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// string copies the bytes: a serde must not retain its input.
func (r *reader) string() string {
	if r.err != nil {
		return ""
	}
	n, w := binary.Uvarint(r.b)
	if w <= 0 || n > uint64(len(r.b)-w) {
		r.fail("bad string length")
		return ""
	}
	s := string(r.b[w : w+int(n)])
	r.b = r.b[w+int(n):]
	return s
}

// done reports the first error, or trailing bytes.
func (r *reader) done() error {
	if r.err == nil && len(r.b) > 0 {
		r.fail("trailing bytes")
	}
	return r.err
}

// rest returns the remaining bytes as a string: a trailing field needs no
// length.
func (r *reader) rest() string {
	if r.err != nil {
		return ""
	}
	s := string(r.b)
	r.b = nil
	return s
}

// unit is the value of a record whose key and timestamp are all that a
// query needs downstream of a repartition.
type unit struct{}

// unitSerde encodes unit as one byte: an empty value could be taken for
// a null one (a tombstone) by a client.
type unitSerde struct{}

func (unitSerde) Serialize(dst []byte, _ unit) ([]byte, error) { return append(dst, 0), nil }

func (unitSerde) Deserialize(b []byte) (unit, error) {
	if len(b) != 1 {
		return unit{}, fmt.Errorf("%w: unit value of %d bytes, want 1", errCorrupt, len(b))
	}
	return unit{}, nil
}
