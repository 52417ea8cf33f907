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

// maxMessageIndexes bounds the message indexes a record may claim: deeper
// than any real nesting of messages.
const maxMessageIndexes = 64

// SplitMessageIndexes reads the message indexes that Confluent's Protobuf
// framing puts after the header (the path of the record's message in its
// schema's file: the single byte 0 for the file's first message, else
// their count and each index, as zig-zag varints) and returns them and
// the payload after them, or an error saying why b does not start with
// them (the record's fault).
func SplitMessageIndexes(b []byte) (indexes []int, payload []byte, err error) {
	n, k := binary.Varint(b)
	if k <= 0 || n < 0 || n > maxMessageIndexes {
		return nil, nil, fmt.Errorf("message indexes unreadable after the header (count %d): not Confluent's Protobuf framing", n)
	}
	b = b[k:]
	if n == 0 { // the shortcut for [0]
		return []int{0}, b, nil
	}
	indexes = make([]int, n)
	for i := range indexes {
		x, k := binary.Varint(b)
		if k <= 0 || x < 0 {
			return nil, nil, fmt.Errorf("message index %d of %d unreadable: not Confluent's Protobuf framing", i+1, n)
		}
		indexes[i] = int(x)
		b = b[k:]
	}
	return indexes, b, nil
}
