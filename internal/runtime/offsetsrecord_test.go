package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/state"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestOffsetsRecordRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		in         map[state.TopicPartition]int64
		streamTime int64
	}{
		{map[state.TopicPartition]int64{}, state.NoStreamTime},
		{map[state.TopicPartition]int64{{Topic: "payments", Partition: 3}: 42}, 1_700_000_000_000},
		{map[state.TopicPartition]int64{{Topic: "a", Partition: 0}: 0, {Topic: "b.with.dots", Partition: 7}: 1 << 40}, -5},
	} {
		got, st, err := decodeOffsetsRecord(appendOffsetsRecord(nil, tc.in, tc.streamTime))
		if err != nil {
			t.Fatalf("decode %v: %v", tc.in, err)
		}
		if !maps.Equal(got, tc.in) || st != tc.streamTime {
			t.Fatalf("round trip: got %v %d, want %v %d", got, st, tc.in, tc.streamTime)
		}
	}
}

// appendOffsetsRecordV1 is the encoder of format 1, as written before the
// stream time was carried: records of it stay in changelogs.
func appendOffsetsRecordV1(dst []byte, input map[state.TopicPartition]int64) []byte {
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

func TestOffsetsRecordDecodesV1(t *testing.T) {
	in := map[state.TopicPartition]int64{{Topic: "in", Partition: 1}: 17, {Topic: "other", Partition: 1}: 3}
	got, st, err := decodeOffsetsRecord(appendOffsetsRecordV1(nil, in))
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, in) || st != state.NoStreamTime {
		t.Fatalf("got %v %d, want %v and no stream time", got, st, in)
	}
}

func TestOffsetsRecordRejectsGarbage(t *testing.T) {
	good := appendOffsetsRecord(nil, map[state.TopicPartition]int64{{Topic: "t", Partition: 1}: 9}, 77)
	goodV1 := appendOffsetsRecordV1(nil, map[state.TopicPartition]int64{{Topic: "t", Partition: 1}: 9})
	for name, b := range map[string][]byte{
		"empty":       nil,
		"version 0":   {0, 0, 0},
		"trailing":    append(append([]byte(nil), good...), 0),
		"short":       good[:len(good)-1],
		"count":       {offsetsFormatV2, 0, 200},
		"stream time": {offsetsFormatV2, 0x80},
		"v1 trailing": append(append([]byte(nil), goodV1...), 0),
		"v1 short":    goodV1[:len(goodV1)-1],
	} {
		if _, _, err := decodeOffsetsRecord(b); !errors.Is(err, errBadOffsetsRecord) {
			t.Errorf("%s: got %v, want errBadOffsetsRecord", name, err)
		}
	}
}

// TestOffsetsRecordNewerFormat: a record of a version this eddy does not
// know is refused with an error that names it and what to do, not read as
// one of the known versions.
func TestOffsetsRecordNewerFormat(t *testing.T) {
	good := appendOffsetsRecord(nil, map[state.TopicPartition]int64{{Topic: "t", Partition: 1}: 9}, 77)
	for _, v := range []byte{offsetsFormatNewest + 1, 9, 255} {
		b := append([]byte{v}, good[1:]...)
		_, _, err := decodeOffsetsRecord(b)
		if !errors.Is(err, errOffsetsFormat) || errors.Is(err, errBadOffsetsRecord) {
			t.Fatalf("version %d: %v; want errOffsetsFormat", v, err)
		}
		for _, want := range []string{"eddy: ", fmt.Sprintf("format %d,", v), fmt.Sprintf("formats 1 to %d", offsetsFormatNewest), "run an eddy release"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("version %d: %q does not say %q", v, err, want)
			}
		}
	}
}

func FuzzDecodeOffsetsRecord(f *testing.F) {
	f.Add(appendOffsetsRecord(nil, map[state.TopicPartition]int64{{Topic: "t", Partition: 1}: 9}, 5))
	f.Add(appendOffsetsRecordV1(nil, map[state.TopicPartition]int64{{Topic: "t", Partition: 1}: 9}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, st, err := decodeOffsetsRecord(b)
		if err != nil {
			return
		}
		again, st2, err := decodeOffsetsRecord(appendOffsetsRecord(nil, m, st))
		if err != nil || !maps.Equal(again, m) || st2 != st {
			t.Fatalf("re-encoding %v %d: %v %d %v", m, st, again, st2, err)
		}
	})
}

// TestNewerOffsetsRecordStopsTheApp: a changelog whose offsets record was
// written by a newer eddy (an unknown format) stops the app with the
// error that names the format, instead of a new session meeting it again
// and again.
func TestNewerOffsetsRecordStopsTheApp(t *testing.T) {
	h := newHarness(t)
	changelog := ChangelogTopic("count", "counts")
	h.createTopics(kafka.TopicSpec{Name: changelog, Partitions: 2})
	h.produceRecords(&kgo.Record{Topic: changelog, Partition: 0, Key: []byte(offsetsRecordKey), Value: []byte{9, 1, 2, 3},
		Headers: []kgo.RecordHeader{{Key: offsetsHeaderKey, Value: []byte{9}}}})
	cfg := h.config(t.TempDir(), io.Discard)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := Run(ctx, cfg, counting())
	if !errors.Is(err, errOffsetsFormat) || !strings.Contains(err.Error(), "format 9") {
		t.Fatalf("Run: %v; want it to stop on the offsets record of format 9", err)
	}
}
