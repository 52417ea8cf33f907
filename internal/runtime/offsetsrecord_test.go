package runtime

import (
	"errors"
	"maps"
	"testing"

	"github.com/eddy-streams/eddy/state"
)

func TestOffsetsRecordRoundTrip(t *testing.T) {
	for _, in := range []map[state.TopicPartition]int64{
		{},
		{{Topic: "payments", Partition: 3}: 42},
		{{Topic: "a", Partition: 0}: 0, {Topic: "b.with.dots", Partition: 7}: 1 << 40},
	} {
		got, err := decodeOffsetsRecord(appendOffsetsRecord(nil, in))
		if err != nil {
			t.Fatalf("decode %v: %v", in, err)
		}
		if !maps.Equal(got, in) {
			t.Fatalf("round trip: got %v, want %v", got, in)
		}
	}
}

func TestOffsetsRecordRejectsGarbage(t *testing.T) {
	good := appendOffsetsRecord(nil, map[state.TopicPartition]int64{{Topic: "t", Partition: 1}: 9})
	for name, b := range map[string][]byte{
		"empty":    nil,
		"version":  {9},
		"trailing": append(append([]byte(nil), good...), 0),
		"short":    good[:len(good)-1],
		"count":    {offsetsFormatV1, 200},
	} {
		if _, err := decodeOffsetsRecord(b); !errors.Is(err, errBadOffsetsRecord) {
			t.Errorf("%s: got %v, want errBadOffsetsRecord", name, err)
		}
	}
}

func FuzzDecodeOffsetsRecord(f *testing.F) {
	f.Add(appendOffsetsRecord(nil, map[state.TopicPartition]int64{{Topic: "t", Partition: 1}: 9}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeOffsetsRecord(b)
		if err != nil {
			return
		}
		again, err := decodeOffsetsRecord(appendOffsetsRecord(nil, m))
		if err != nil || !maps.Equal(again, m) {
			t.Fatalf("re-encoding %v: %v %v", m, again, err)
		}
	})
}
