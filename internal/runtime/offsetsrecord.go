package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/eddy-streams/eddy/state"
)

// The input offsets a transaction consumed travel inside it, as one record
// per store in the task's changelog partition (DESIGN.md §6): the embedded
// broker can commit a transaction's records and lose its group offsets, and
// these records let a task resume from what its state reflects. The record
// has a fixed key, so compaction keeps only the newest one, and a header that
// marks it, so restore never mistakes it for a user key.
const (
	offsetsHeaderKey   = "eddy.offsets"
	offsetsRecordKey   = "\x00eddy.offsets"
	offsetsFormatV1    = 1
	maxOffsetsTopicLen = 1 << 15
)

var errBadOffsetsRecord = errors.New("runtime: malformed offsets record")

// appendOffsetsRecord encodes the input offsets: a version byte, then per
// source partition the topic (uvarint length + bytes), partition and offset
// (varints).
func appendOffsetsRecord(dst []byte, input map[state.TopicPartition]int64) []byte {
	dst = append(dst, offsetsFormatV1)
	dst = binary.AppendUvarint(dst, uint64(len(input)))
	for tp, off := range input {
		dst = binary.AppendUvarint(dst, uint64(len(tp.Topic)))
		dst = append(dst, tp.Topic...)
		dst = binary.AppendVarint(dst, int64(tp.Partition))
		dst = binary.AppendVarint(dst, off)
	}
	return dst
}

func decodeOffsetsRecord(b []byte) (map[state.TopicPartition]int64, error) {
	if len(b) == 0 || b[0] != offsetsFormatV1 {
		return nil, fmt.Errorf("%w: unknown version", errBadOffsetsRecord)
	}
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: bad count", errBadOffsetsRecord)
	}
	b = b[k:]
	out := make(map[state.TopicPartition]int64, n)
	for i := uint64(0); i < n; i++ {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > maxOffsetsTopicLen || uint64(len(b)-k) < l {
			return nil, fmt.Errorf("%w: bad topic", errBadOffsetsRecord)
		}
		topic := string(b[k : k+int(l)])
		b = b[k+int(l):]
		p, k := binary.Varint(b)
		if k <= 0 {
			return nil, fmt.Errorf("%w: bad partition", errBadOffsetsRecord)
		}
		b = b[k:]
		off, k := binary.Varint(b)
		if k <= 0 {
			return nil, fmt.Errorf("%w: bad offset", errBadOffsetsRecord)
		}
		b = b[k:]
		out[state.TopicPartition{Topic: topic, Partition: int32(p)}] = off
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: trailing bytes", errBadOffsetsRecord)
	}
	return out, nil
}
