package pebble

import (
	"bytes"
	"errors"
	"maps"
	"math"
	"testing"

	"github.com/eddy-streams/eddy/state"
)

func TestOffsetsRoundTrip(t *testing.T) {
	tests := []state.Offsets{
		{},
		{Input: map[state.TopicPartition]int64{{Topic: "in", Partition: 0}: 1}},
		{Changelog: map[string]int64{"counts": 7}},
		{
			Input: map[state.TopicPartition]int64{
				{Topic: "", Partition: 0}:                   0,
				{Topic: "a\x00b\xff", Partition: -1}:        -1,
				{Topic: "in", Partition: math.MaxInt32}:     math.MaxInt64,
				{Topic: "in", Partition: math.MinInt32}:     math.MinInt64,
				{Topic: "ünïcödé-topic", Partition: 123456}: 1 << 40,
			},
			Changelog: map[string]int64{"": 0, "s\xff": -5, "windows": math.MaxInt64},
		},
	}
	for _, o := range tests {
		enc := appendOffsets(nil, o)
		got, err := decodeOffsets(enc)
		if err != nil {
			t.Fatalf("decode(encode(%v)): %v", o, err)
		}
		if !maps.Equal(got.Input, o.Input) || !maps.Equal(got.Changelog, o.Changelog) {
			t.Fatalf("decode(encode(%v)) = %v", o, got)
		}
		// Map order must not leak into the bytes.
		if again := appendOffsets(nil, o.Clone()); !bytes.Equal(again, enc) {
			t.Fatalf("encoding of %v is not deterministic", o)
		}
	}
}

func TestDecodeOffsetsRejects(t *testing.T) {
	valid := appendOffsets(nil, state.Offsets{
		Input:     map[state.TopicPartition]int64{{Topic: "in", Partition: 3}: 10},
		Changelog: map[string]int64{"s": 4},
	})
	tests := map[string][]byte{
		"empty":             nil,
		"unknown version":   {2, 0, 0},
		"version only":      {offsetsVersion},
		"truncated":         valid[:len(valid)-1],
		"trailing bytes":    append(bytes.Clone(valid), 0),
		"huge count":        {offsetsVersion, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"string too long":   {offsetsVersion, 1, 100, 'a', 0, 0, 0},
		"partition too big": {offsetsVersion, 1, 0, 0x80, 0x80, 0x80, 0x80, 0x20, 0, 0},
		"duplicate input":   {offsetsVersion, 2, 1, 'a', 0, 0, 1, 'a', 0, 2, 0},
		"duplicate store":   {offsetsVersion, 0, 2, 1, 's', 0, 1, 's', 2},
	}
	for name, enc := range tests {
		if o, err := decodeOffsets(enc); !errors.Is(err, errBadOffsets) {
			t.Errorf("%s: decode(%x) = %v, %v; want errBadOffsets", name, enc, o, err)
		}
	}
}

func FuzzDecodeOffsets(f *testing.F) {
	f.Add(appendOffsets(nil, state.Offsets{}))
	f.Add(appendOffsets(nil, state.Offsets{
		Input:     map[state.TopicPartition]int64{{Topic: "in", Partition: 3}: 10, {Topic: "x", Partition: -1}: -7},
		Changelog: map[string]int64{"s": 4, "t": math.MaxInt64},
	}))
	f.Add([]byte{offsetsVersion, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := decodeOffsets(data)
		if err != nil {
			if !errors.Is(err, errBadOffsets) {
				t.Fatalf("error %v does not wrap errBadOffsets", err)
			}
			return
		}
		// The decoder accepts entries in any order, so compare values, not
		// bytes: whatever decodes must survive a round trip.
		again, err := decodeOffsets(appendOffsets(nil, o))
		if err != nil {
			t.Fatalf("decode(%x) = %v, which does not round-trip: %v", data, o, err)
		}
		if !maps.Equal(again.Input, o.Input) || !maps.Equal(again.Changelog, o.Changelog) {
			t.Fatalf("decode(%x) = %v round-trips to %v", data, o, again)
		}
	})
}
