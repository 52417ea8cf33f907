package nexmark

import (
	"errors"
	"reflect"
	"testing"

	"github.com/eddy-streams/eddy/serde"
)

func TestSerdeRoundTrip(t *testing.T) {
	g := newGen(t, Config{Seed: 11})
	es := EventSerde()
	var buf []byte
	for i := range int64(500) {
		e := g.Event(i)
		var err error
		buf, err = es.Serialize(buf[:0], e)
		if err != nil {
			t.Fatal(err)
		}
		// The kind's own serde writes the same bytes as the event's.
		var own []byte
		switch e.Kind {
		case KindPerson:
			own, err = PersonSerde().Serialize(nil, e.Person)
		case KindAuction:
			own, err = AuctionSerde().Serialize(nil, e.Auction)
		case KindBid:
			own, err = BidSerde().Serialize(nil, e.Bid)
		}
		if err != nil || string(own) != string(buf) {
			t.Fatalf("event %d: kind serde wrote %x (%v), event serde %x", i, own, err, buf)
		}
		got, err := es.Deserialize(buf)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		// Decoding must not retain the input: scribble over it.
		for k := range buf {
			buf[k] = 0xff
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("event %d: round trip\n got %+v\nwant %+v", i, got, e)
		}
	}
}

func TestSerdeKinds(t *testing.T) {
	g := newGen(t, Config{})
	person, err := PersonSerde().Serialize(nil, g.Event(0).Person)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := PersonSerde().Deserialize(person); err != nil || p.ID != FirstPersonID {
		t.Fatalf("person %+v, %v", p, err)
	}
	// A person is not a bid, and a cut record is not a person.
	if _, err := BidSerde().Deserialize(person); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("person decoded as a bid: %v", err)
	}
	if _, err := PersonSerde().Deserialize(person[:len(person)-1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated person: %v", err)
	}
	if _, err := PersonSerde().Deserialize(append(person, 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("person with a trailing byte: %v", err)
	}
	if _, err := EventSerde().Serialize(nil, Event{}); err == nil {
		t.Fatal("encoded an event without a kind")
	}
	for _, b := range [][]byte{nil, {0}, {9}, {byte(KindBid), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}} {
		if _, err := EventSerde().Deserialize(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%x: %v", b, err)
		}
	}
}

// fuzzSerde checks that a decoder never panics and that whatever it accepts
// re-encodes to a record that decodes to the same value.
func fuzzSerde[T any](f *testing.F, s serde.Serde[T], seeds func(*Generator) []T) {
	g, err := New(Config{Seed: 1})
	if err != nil {
		f.Fatal(err)
	}
	for _, v := range seeds(g) {
		b, err := s.Serialize(nil, v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := s.Deserialize(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		again, err := s.Serialize(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		w, err := s.Deserialize(again)
		if err != nil || !reflect.DeepEqual(v, w) {
			t.Fatalf("re-encoding changed %+v to %+v (%v)", v, w, err)
		}
	})
}

func FuzzPersonSerde(f *testing.F) {
	fuzzSerde(f, PersonSerde(), func(g *Generator) []Person { return []Person{g.Event(0).Person, g.Event(50).Person} })
}

func FuzzAuctionSerde(f *testing.F) {
	fuzzSerde(f, AuctionSerde(), func(g *Generator) []Auction { return []Auction{g.Event(1).Auction, g.Event(53).Auction} })
}

func FuzzBidSerde(f *testing.F) {
	fuzzSerde(f, BidSerde(), func(g *Generator) []Bid { return []Bid{g.Event(4).Bid, g.Event(99).Bid} })
}

func FuzzEventSerde(f *testing.F) {
	fuzzSerde(f, EventSerde(), func(g *Generator) []Event { return []Event{g.Event(0), g.Event(1), g.Event(4)} })
}

// BenchmarkSerde compares the binary encoding with serde.JSON on bids, the
// 92% of the stream; it is the measurement behind choosing binary.
func BenchmarkSerde(b *testing.B) {
	g := newGen(b, Config{})
	bids := make([]Bid, 0, 1000)
	for i := int64(0); len(bids) < cap(bids); i++ {
		if e := g.Event(i); e.Kind == KindBid {
			bids = append(bids, e.Bid)
		}
	}
	for _, c := range []struct {
		name string
		s    serde.Serde[Bid]
	}{{"binary", BidSerde()}, {"json", serde.JSON[Bid]()}} {
		var size int
		enc := make([][]byte, len(bids))
		for k, v := range bids {
			var err error
			if enc[k], err = c.s.Serialize(nil, v); err != nil {
				b.Fatal(err)
			}
			size += len(enc[k])
		}
		b.Run(c.name+"/encode", func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			k := 0
			for b.Loop() {
				buf, _ = c.s.Serialize(buf[:0], bids[k%len(bids)])
				k++
			}
			b.ReportMetric(float64(size)/float64(len(bids)), "bytes/bid")
		})
		b.Run(c.name+"/decode", func(b *testing.B) {
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				if _, err := c.s.Deserialize(enc[k%len(enc)]); err != nil {
					b.Fatal(err)
				}
				k++
			}
		})
	}
}
