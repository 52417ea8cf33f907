package serde

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func roundTrip[T any](t *testing.T, s Serde[T], v T, eq func(a, b T) bool) {
	t.Helper()
	prefix := []byte("prefix")
	b, err := s.Serialize(append([]byte(nil), prefix...), v)
	if err != nil {
		t.Fatalf("serialize %v: %v", v, err)
	}
	if !bytes.HasPrefix(b, prefix) {
		t.Fatalf("serialize must append to dst, got %q", b)
	}
	got, err := s.Deserialize(b[len(prefix):])
	if err != nil {
		t.Fatalf("deserialize %v: %v", v, err)
	}
	if !eq(got, v) {
		t.Fatalf("round trip: got %v, want %v", got, v)
	}
}

func TestBytes(t *testing.T) {
	for _, v := range [][]byte{{}, []byte("x"), {0, 0xff, 0}} {
		roundTrip(t, Bytes(), v, bytes.Equal)
	}
	src := []byte("abc")
	got, _ := Bytes().Deserialize(src)
	src[0] = 'z'
	if string(got) != "abc" {
		t.Fatalf("Deserialize must copy: got %q after the source changed", got)
	}
	if got, _ := Bytes().Deserialize(nil); got != nil {
		t.Fatalf("nil must stay nil, got %v", got)
	}
}

func TestString(t *testing.T) {
	for _, v := range []string{"", "account-1", "ünïcode"} {
		roundTrip(t, String(), v, func(a, b string) bool { return a == b })
	}
}

func TestInt64(t *testing.T) {
	for _, v := range []int64{0, 1, -1, math.MaxInt64, math.MinInt64} {
		roundTrip(t, Int64(), v, func(a, b int64) bool { return a == b })
	}
	b, _ := Int64().Serialize(nil, 1)
	if !bytes.Equal(b, []byte{0, 0, 0, 0, 0, 0, 0, 1}) {
		t.Fatalf("int64 must be big-endian like Kafka's LongSerializer, got %v", b)
	}
	if _, err := Int64().Deserialize([]byte{1, 2, 3}); err == nil {
		t.Fatal("3 bytes must not decode as int64")
	}
}

type payment struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
}

func TestJSON(t *testing.T) {
	roundTrip(t, JSON[payment](), payment{"p1", -5}, func(a, b payment) bool { return a == b })
	b, _ := JSON[payment]().Serialize(nil, payment{"p1", 7})
	if string(b) != `{"id":"p1","amount":7}` {
		t.Fatalf("unexpected encoding %s", b)
	}
	if _, err := JSON[payment]().Deserialize([]byte("{not json")); err == nil {
		t.Fatal("invalid JSON must be an error")
	}
	if _, err := JSON[chan int]().Serialize(nil, make(chan int)); err == nil {
		t.Fatal("an unencodable value must be an error")
	}
}

func FuzzInt64(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Int64().Deserialize(b)
		if err != nil {
			return
		}
		out, _ := Int64().Serialize(nil, v)
		if !bytes.Equal(out, b) {
			t.Fatalf("re-encoding %v gave %v", b, out)
		}
	})
}

func FuzzJSON(f *testing.F) {
	type payment struct {
		ID     string `json:"id"`
		Amount int64  `json:"amount"`
	}
	s := JSON[payment]()
	f.Add([]byte(`{"id":"p1","amount":5}`))
	f.Add([]byte(`{"id":`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := s.Deserialize(b)
		if err != nil {
			return
		}
		if !utf8.Valid(b) {
			t.Fatalf("%q is not valid UTF-8 and decoded to %+v", b, v)
		}
		out, err := s.Serialize(nil, v)
		if err != nil {
			t.Fatalf("%q decoded to %+v, which does not encode: %v", b, v, err)
		}
		back, err := s.Deserialize(out)
		if err != nil || back != v {
			t.Fatalf("%q: %+v re-encoded to %q, decoded to %+v (%v)", b, v, out, back, err)
		}
	})
}

// TestJSONRefusesInvalidUnicode: encoding/json replaces invalid UTF-8 and
// escaped lone surrogates with U+FFFD, so two different inputs decode to
// one value; serde.JSON refuses them instead, naming the byte.
func TestJSONRefusesInvalidUnicode(t *testing.T) {
	s := JSON[payment]()
	for _, tc := range []struct{ in, err string }{
		{"{\"id\":\"x-\xff\",\"amount\":1}", "invalid UTF-8 at byte 9"},
		{"{\"id\":\"x-\xc0\x80\",\"amount\":1}", "invalid UTF-8 at byte 9"},
		{"{\"id\":\"\xed\xa0\x80\"}", "invalid UTF-8 at byte 7"}, // an encoded surrogate
		{`{"id":"\ud800","amount":1}`, `lone surrogate \ud800 at byte 7`},
		{`{"id":"a\uDC00"}`, `lone surrogate \uDC00 at byte 8`},
		{`{"id":"\ud800\u0041"}`, `lone surrogate \ud800 at byte 7`},
		{`{"id":"\\\ud800"}`, `lone surrogate \ud800 at byte 9`},
	} {
		_, err := s.Deserialize([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.err)
		}
	}
	for in, want := range map[string]string{
		`{"id":"\ud83d\ude00"}`: "\U0001F600",
		`{"id":"\\ud800"}`:      `\ud800`, // an escaped backslash, not an escape
		`{"id":"\ufffd"}`:       "\uFFFD",
		"{\"id\":\"\uFFFD\"}":   "\uFFFD",
		`{"id":"\u00e9\/"}`:     "é/",
	} {
		v, err := s.Deserialize([]byte(in))
		if err != nil || v.ID != want {
			t.Errorf("%q: decoded %q, %v; want %q", in, v.ID, err, want)
		}
	}
}

func TestJSONRefusesToEncodeInvalidUTF8(t *testing.T) {
	s := JSON[payment]()
	if _, err := s.Serialize(nil, payment{ID: "x-\xff"}); err == nil || !strings.Contains(err.Error(), "invalid UTF-8") {
		t.Errorf("a string with invalid UTF-8 encoded (error %v); encoding/json would have replaced it with U+FFFD", err)
	}
	m := JSON[map[string]int]()
	if _, err := m.Serialize(nil, map[string]int{"\xc0": 1}); err == nil {
		t.Error("a map key with invalid UTF-8 encoded")
	}
	for _, id := range []string{`\ufffd`, `\\ufffd`, "\uFFFD", "é"} {
		b, err := s.Serialize(nil, payment{ID: id})
		if err != nil {
			t.Errorf("%q: %v", id, err)
			continue
		}
		if back, err := s.Deserialize(b); err != nil || back.ID != id {
			t.Errorf("%q encoded to %s, decoded to %q (%v)", id, b, back.ID, err)
		}
	}
}

func TestStrictString(t *testing.T) {
	for _, v := range []string{"", "account-1", "ünïcode", "\uFFFD"} {
		roundTrip(t, StrictString(), v, func(a, b string) bool { return a == b })
	}
	if _, err := StrictString().Deserialize([]byte("ab\xffc")); err == nil || !strings.Contains(err.Error(), "invalid UTF-8 at byte 2") {
		t.Errorf("decode of invalid UTF-8: %v", err)
	}
	if _, err := StrictString().Serialize(nil, "ab\xffc"); err == nil || !strings.Contains(err.Error(), "invalid UTF-8 at byte 2") {
		t.Errorf("encode of invalid UTF-8: %v", err)
	}
	// String stays lossless: any bytes go through unchanged.
	roundTrip(t, String(), "ab\xffc", func(a, b string) bool { return a == b })
}

func FuzzStrictString(f *testing.F) {
	f.Add([]byte("acct-1"))
	f.Add([]byte("x-\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := StrictString().Deserialize(b)
		if (err == nil) != utf8.Valid(b) {
			t.Fatalf("%q: error %v, valid UTF-8 %v", b, err, utf8.Valid(b))
		}
		if err == nil && v != string(b) {
			t.Fatalf("%q decoded to %q", b, v)
		}
	})
}

func TestList(t *testing.T) {
	eq := func(a, b []string) bool { return slices.Equal(a, b) }
	for _, v := range [][]string{{}, {""}, {"a", "", strings.Repeat("x", 300)}} {
		roundTrip(t, List(String()), v, eq)
	}
	b, _ := List(String()).Serialize(nil, []string{"ab", "c"})
	if want := []byte{2, 2, 'a', 'b', 1, 'c'}; !bytes.Equal(b, want) {
		t.Fatalf("encoding %v, want %v (a uvarint count, then each length and value)", b, want)
	}
	for n := range len(b) {
		if _, err := List(String()).Deserialize(b[:n]); err == nil {
			t.Errorf("%d of %d bytes decoded", n, len(b))
		}
	}
	if _, err := List(Int64()).Deserialize([]byte{1, 2, 0, 1}); err == nil || !strings.Contains(err.Error(), "value 0") {
		t.Errorf("a bad value: %v, want an error naming value 0", err)
	}
}
