package registry

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/sr"
)

// HeaderSize is the size of the Confluent wire format's header: the magic
// byte 0 and the big-endian 4-byte schema id.
const HeaderSize = 5

// AppendHeader appends the Confluent header of schema id to dst.
func AppendHeader(dst []byte, id int) []byte {
	dst, _ = (*sr.ConfluentHeader)(nil).AppendEncode(dst, id, nil) // never fails
	return dst
}

// SplitHeader returns the schema id and the payload of a framed record,
// or an error saying why b is not one (the record's fault): shorter than
// the header, or a first byte that is not the magic byte 0 — a '{' there
// is plain JSON on a registry topic.
func SplitHeader(b []byte) (id int, payload []byte, err error) {
	if len(b) < HeaderSize {
		return 0, nil, fmt.Errorf("%d bytes, shorter than the %d-byte Confluent header (magic byte 0, schema id)", len(b), HeaderSize)
	}
	if b[0] != 0 {
		hint := ""
		if b[0] == '{' || b[0] == '[' || b[0] == '"' {
			hint = " (it looks like plain JSON, not a Confluent-framed record)"
		}
		return 0, nil, fmt.Errorf("magic byte 0x%02x, not 0: not the Confluent wire format%s", b[0], hint)
	}
	return int(binary.BigEndian.Uint32(b[1:HeaderSize])), b[HeaderSize:], nil
}
