package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/eddy-streams/eddy/state"
)

// The input offsets a transaction consumed travel inside it, as one record
// per store in the task's changelog partition (docs/design.md §6): the embedded
// broker can commit a transaction's records and lose its group offsets, and
// these records let a task resume from what its state reflects. The record
// has a fixed key, so compaction keeps only the newest one, and a header that
// marks it, so restore never mistakes it for a user key. Since format v2 it
// carries the task's stream time too, so a task restored on a machine
// without its database resumes with the stream time its state reflects
// (windows closed before the move stay closed).
const (
	offsetsHeaderKey   = "eddy.offsets"
	offsetsRecordKey   = "\x00eddy.offsets"
	offsetsFormatV1    = 1
	offsetsFormatV2    = 2
	maxOffsetsTopicLen = 1 << 15

	// offsetsFormatNewest is the version appendOffsetsRecord writes. Like
	// the task database's format it only grows: a record of a newer
	// version is refused (errOffsetsFormat), never read as if it were
	// one this eddy knows.
	offsetsFormatNewest = offsetsFormatV2
)

var (
	errBadOffsetsRecord = errors.New("eddy: malformed offsets record")
	// errOffsetsFormat is wrapped by the error for an offsets record of
	// a version newer than this eddy's: a newer eddy wrote the changelog.
	errOffsetsFormat = errors.New("eddy: unsupported changelog offsets record format")
)

// appendOffsetsRecord encodes the input offsets and the stream time: a
// version byte (2), the stream time (varint; state.NoStreamTime before the
// first record), the number of source partitions (uvarint), then per
// source partition the topic (uvarint length + bytes), partition and offset
// (varints). Version 1 is the same without the stream time.
func appendOffsetsRecord(dst []byte, input map[state.TopicPartition]int64, streamTime int64) []byte {
	dst = append(dst, offsetsFormatNewest)
	dst = binary.AppendVarint(dst, streamTime)
	dst = binary.AppendUvarint(dst, uint64(len(input)))
	for tp, off := range input {
		dst = binary.AppendUvarint(dst, uint64(len(tp.Topic)))
		dst = append(dst, tp.Topic...)
		dst = binary.AppendVarint(dst, int64(tp.Partition))
		dst = binary.AppendVarint(dst, off)
	}
	return dst
}

// decodeOffsetsRecord decodes both versions; a version 1 record (written
// before stream time was persisted) has state.NoStreamTime. A record of a
// newer version wraps errOffsetsFormat; one of no version eddy ever wrote
// (0) is malformed.
func decodeOffsetsRecord(b []byte) (input map[state.TopicPartition]int64, streamTime int64, err error) {
	switch {
	case len(b) == 0 || b[0] < offsetsFormatV1:
		return nil, 0, fmt.Errorf("%w: no version", errBadOffsetsRecord)
	case b[0] > offsetsFormatNewest:
		return nil, 0, fmt.Errorf("%w: the record is of format %d, newer than this eddy's (formats %d to %d): "+
			"run an eddy release that reads format %d (the one that wrote this changelog, or a later one)",
			errOffsetsFormat, b[0], offsetsFormatV1, offsetsFormatNewest, b[0])
	}
	version := b[0]
	b = b[1:]
	streamTime = state.NoStreamTime
	if version >= offsetsFormatV2 {
		st, k := binary.Varint(b)
		if k <= 0 {
			return nil, 0, fmt.Errorf("%w: bad stream time", errBadOffsetsRecord)
		}
		streamTime, b = st, b[k:]
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, 0, fmt.Errorf("%w: bad count", errBadOffsetsRecord)
	}
	b = b[k:]
	out := make(map[state.TopicPartition]int64, n)
	for i := uint64(0); i < n; i++ {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > maxOffsetsTopicLen || uint64(len(b)-k) < l {
			return nil, 0, fmt.Errorf("%w: bad topic", errBadOffsetsRecord)
		}
		topic := string(b[k : k+int(l)])
		b = b[k+int(l):]
		p, k := binary.Varint(b)
		if k <= 0 {
			return nil, 0, fmt.Errorf("%w: bad partition", errBadOffsetsRecord)
		}
		b = b[k:]
		off, k := binary.Varint(b)
		if k <= 0 {
			return nil, 0, fmt.Errorf("%w: bad offset", errBadOffsetsRecord)
		}
		b = b[k:]
		out[state.TopicPartition{Topic: topic, Partition: int32(p)}] = off
	}
	if len(b) != 0 {
		return nil, 0, fmt.Errorf("%w: trailing bytes", errBadOffsetsRecord)
	}
	return out, streamTime, nil
}
