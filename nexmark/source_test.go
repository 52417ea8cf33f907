package nexmark

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The Source encodes from its draw buffer; its records must be exactly the
// encoding of Event(i), keyed and stamped as Produce does.
func TestSourceRecordsAreTheEvents(t *testing.T) {
	g := newGen(t, Config{Seed: 7})
	topics := DefaultTopics()
	s := g.Source(topics)
	var rec kgo.Record
	for i := range int64(5000) {
		if !s.Read(i, &rec) {
			t.Fatalf("event %d not read", i)
		}
		e := g.Event(i)
		want, _ := EventSerde().Serialize(nil, e)
		if !bytes.Equal(rec.Value, want) {
			t.Fatalf("event %d: value %x, want %x", i, rec.Value, want)
		}
		var topic string
		var key int64
		switch e.Kind {
		case KindPerson:
			topic, key = topics.Persons, e.Person.ID
		case KindAuction:
			topic, key = topics.Auctions, e.Auction.ID
		case KindBid:
			topic, key = topics.Bids, e.Bid.Auction
		}
		if rec.Topic != topic || int64(binary.BigEndian.Uint64(rec.Key)) != key || rec.Timestamp.UnixMilli() != e.DateTime() {
			t.Fatalf("event %d: %s/%x@%d, want %s/%d@%d", i, rec.Topic, rec.Key, rec.Timestamp.UnixMilli(), topic, key, e.DateTime())
		}
	}
}

func TestSourceSkipsUnreadTopics(t *testing.T) {
	g := newGen(t, Config{})
	s := g.Source(DefaultTopics())
	s.Topics([]string{"bid"})
	var rec kgo.Record
	for i := range int64(500) {
		if got, want := s.Read(i, &rec), KindOf(i) == KindBid; got != want {
			t.Fatalf("event %d (%v): read %v", i, KindOf(i), got)
		}
	}
}

func BenchmarkSource(b *testing.B) {
	g := newGen(b, Config{})
	s := g.Source(DefaultTopics())
	var rec kgo.Record
	b.ReportAllocs()
	var i int64
	for b.Loop() {
		s.Read(i, &rec)
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
