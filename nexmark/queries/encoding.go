package queries

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The result serdes of the queries write integers as zig-zag varints and a
// trailing string as the remaining bytes: compact, appended to the buffer
// they are given, no allocation to encode.

// errResult is wrapped by every error a result serde returns on bad input.
var errResult = errors.New("queries: malformed result")

// reader decodes varints from b, remembering the first failure.
type reader struct {
	b   []byte
	err error
}

func (r *reader) int(field string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: field %s: bad varint", errResult, field)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// rest returns the remaining bytes as a string (the trailing field).
func (r *reader) rest() string {
	if r.err != nil {
		return ""
	}
	s := string(r.b)
	r.b = nil
	return s
}

// done returns the first failure, or one for bytes left over.
func (r *reader) done(what string) error {
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%w: %s: %d bytes left over", errResult, what, len(r.b))
	}
	return r.err
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
		return unit{}, fmt.Errorf("%w: unit value of %d bytes, want 1", errResult, len(b))
	}
	return unit{}, nil
}
