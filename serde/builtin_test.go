package serde

import (
	"bytes"
	"math"
	"testing"
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
