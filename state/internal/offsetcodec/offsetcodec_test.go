package offsetcodec

import (
	"bytes"
	"errors"
	"maps"
	"math"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/state"
)

// offsetsEqual compares decoded offsets; a nil map equals an empty one,
// since decoding always makes both maps.
func offsetsEqual(a, b state.Offsets) bool {
	return maps.Equal(a.Input, b.Input) && maps.Equal(a.Changelog, b.Changelog) && a.StreamTime == b.StreamTime
}

func TestOffsetsRoundTrip(t *testing.T) {
	tests := []state.Offsets{
		{},
		state.NewOffsets(),
		{Input: map[state.TopicPartition]int64{{Topic: "in", Partition: 0}: 1}},
		{Changelog: map[string]int64{"counts": 7}},
		{StreamTime: 1_700_000_000_123},
		{StreamTime: -1},
		{StreamTime: math.MaxInt64},
		{
			Input: map[state.TopicPartition]int64{
				{Topic: "", Partition: 0}:                   0,
				{Topic: "a\x00b\xff", Partition: -1}:        -1,
				{Topic: "in", Partition: math.MaxInt32}:     math.MaxInt64,
				{Topic: "in", Partition: math.MinInt32}:     math.MinInt64,
				{Topic: "ünïcödé-topic", Partition: 123456}: 1 << 40,
			},
			Changelog:  map[string]int64{"": 0, "s\xff": -5, "windows": math.MaxInt64},
			StreamTime: state.NoStreamTime,
		},
	}
	for _, o := range tests {
		enc := Append(nil, o)
		got, err := Decode(enc)
		if err != nil {
			t.Fatalf("decode(encode(%v)): %v", o, err)
		}
		if !offsetsEqual(got, o) {
			t.Fatalf("decode(encode(%v)) = %v", o, got)
		}
		// Map order must not leak into the bytes.
		if again := Append(nil, o.Clone()); !bytes.Equal(again, enc) {
			t.Fatalf("encoding of %v is not deterministic", o)
		}
	}
}

// TestDecodeOffsetsVersion1 decodes an encoding written by hand the way
// version 1 wrote it, before the stream time existed: databases written then
// must still open, with no stream time.
func TestDecodeOffsetsVersion1(t *testing.T) {
	v1 := []byte{
		Version1,
		2,                          // two inputs
		2, 'i', 'n', 6, 0x80, 0x01, // "in"/3 at 64
		1, 'x', 1, 13, // "x"/-1 at -7
		1,         // one store
		1, 's', 8, // "s" at 4
	}
	got, err := Decode(v1)
	if err != nil {
		t.Fatalf("decode(v1): %v", err)
	}
	want := state.Offsets{
		Input:      map[state.TopicPartition]int64{{Topic: "in", Partition: 3}: 64, {Topic: "x", Partition: -1}: -7},
		Changelog:  map[string]int64{"s": 4},
		StreamTime: state.NoStreamTime,
	}
	if !offsetsEqual(got, want) {
		t.Fatalf("decode(v1) = %+v; want %+v", got, want)
	}
	// The same content in version 2 is version 1 plus the stream time.
	v2 := Append(nil, want)
	if v2[0] != Version || !bytes.Equal(v2[1:len(v2)-10], v1[1:]) {
		t.Fatalf("encode = %x; want version %d, then %x, then the stream time", v2, Version, v1[1:])
	}
	// A version 1 encoding with a stream time appended has trailing bytes.
	if _, err := Decode(append(bytes.Clone(v1), 0)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("decode(v1 + 1 byte): %v; want ErrMalformed", err)
	}
}

func TestDecodeOffsetsRejects(t *testing.T) {
	valid := Append(nil, state.Offsets{
		Input:      map[state.TopicPartition]int64{{Topic: "in", Partition: 3}: 10},
		Changelog:  map[string]int64{"s": 4},
		StreamTime: 1000,
	})
	tests := []struct {
		name string
		enc  []byte
		why  string // in the error, so each case fails for its own reason
	}{
		{"empty", nil, "version"},
		{"version 0", []byte{0, 0, 0, 0}, "unknown version 0"},
		{"unknown version", []byte{Version + 1, 0, 0, 0}, "unknown version 3"},
		{"version only", []byte{Version}, "count"},
		{"v1 version only", []byte{Version1}, "count"},
		{"truncated", valid[:len(valid)-1], "varint"},
		{"no stream time", []byte{Version, 0, 0}, "varint"},
		{"trailing bytes", append(bytes.Clone(valid), 0), "1 trailing bytes"},
		{"v1 trailing bytes", []byte{Version1, 0, 0, 0}, "1 trailing bytes"},
		{"huge count", []byte{Version, 0xff, 0xff, 0xff, 0xff, 0x0f}, "count"},
		{"string too long", []byte{Version, 1, 100, 'a', 0, 0, 0, 0}, "string"},
		{"partition too big", []byte{Version, 1, 0, 0x80, 0x80, 0x80, 0x80, 0x20, 0, 0, 0}, "partition"},
		{"duplicate input", []byte{Version, 2, 1, 'a', 0, 0, 1, 'a', 0, 2, 0, 0}, "duplicate input"},
		{"duplicate store", []byte{Version, 0, 2, 1, 's', 0, 1, 's', 2, 0}, "duplicate store"},
	}
	for _, tt := range tests {
		o, err := Decode(tt.enc)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.why) {
			t.Errorf("%s: decode(%x) = %v, %v; want ErrMalformed about %q", tt.name, tt.enc, o, err, tt.why)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Append(nil, state.Offsets{}))
	f.Add(Append(nil, state.Offsets{
		Input:     map[state.TopicPartition]int64{{Topic: "in", Partition: 3}: 10, {Topic: "x", Partition: -1}: -7},
		Changelog: map[string]int64{"s": 4, "t": math.MaxInt64},
	}))
	f.Add(Append(nil, state.Offsets{StreamTime: state.NoStreamTime}))
	f.Add([]byte{Version1, 1, 1, 'x', 1, 13, 1, 1, 's', 8})
	f.Add([]byte{Version, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		// The decoder accepts entries in any order, so compare values, not
		// bytes: whatever decodes must survive a round trip.
		again, err := Decode(Append(nil, o))
		if err != nil {
			t.Fatalf("decode(%x) = %v, which does not round-trip: %v", data, o, err)
		}
		if !offsetsEqual(again, o) {
			t.Fatalf("decode(%x) = %v round-trips to %v", data, o, again)
		}
	})
}
