package nexmark

import (
	"encoding/binary"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Source replays the event stream as records addressed by event index, for
// eddy's in-process runner (internal/harness/local): record i is event i, on its
// kind's topic, keyed and encoded as Produce writes it (key: 8 big-endian
// bytes of the person id, auction id, or for a bid its auction id; value:
// the binary encoding; timestamp: the event's DateTime). Because events
// depend only on their index, the runner's committed index is all a
// restart needs, as a Kafka partition's offset is.
//
// A Source is used by one goroutine; it reuses its buffers from record to
// record.
type Source struct {
	g      *Generator
	topics Topics
	// read[k] says whether some reader wants events of Kind k: others
	// are generated (as Flink's Nexmark source generates every event
	// whatever the query reads, so figures compare) but not encoded.
	read [KindBid + 1]bool
	ev   Event
	key  [8]byte
	buf  []byte
	// draw holds an event's string fields while they are encoded.
	draw []byte
}

// Source returns a replayable source of g's events on topics.
func (g *Generator) Source(topics Topics) *Source {
	s := &Source{g: g, topics: topics}
	s.Topics([]string{topics.Persons, topics.Auctions, topics.Bids})
	return s
}

// Topics restricts the source to events whose topic is in read.
func (s *Source) Topics(read []string) {
	s.read = [KindBid + 1]bool{}
	for _, t := range read {
		switch {
		case t == "":
		case t == s.topics.Persons:
			s.read[KindPerson] = true
		case t == s.topics.Auctions:
			s.read[KindAuction] = true
		case t == s.topics.Bids:
			s.read[KindBid] = true
		}
	}
}

// Read fills r with event i's record and reports true, or reports false
// when nobody reads events of i's kind (the event is generated all the
// same).
func (s *Source) Read(i int64, rec *kgo.Record) bool {
	k := KindOf(i)
	// The event is drawn as Fill draws it, but encoded from the draw
	// buffer: no strings are made.
	g, e := s.g, &s.ev
	r := newRNG(g.cfg.Seed, eventSalt, i)
	ts := g.eventTime(i, &r)
	if !s.read[k] {
		switch k {
		case KindPerson:
			s.draw, _ = g.drawPerson(&e.Person, s.draw[:0], i, &r, ts)
		case KindAuction:
			s.draw, _ = g.drawAuction(&e.Auction, s.draw[:0], i, &r, ts)
		case KindBid:
			s.draw, _ = g.drawBid(&e.Bid, s.draw[:0], i, &r, ts)
		}
		return false
	}
	var key int64
	switch k {
	case KindPerson:
		b, ends := g.drawPerson(&e.Person, s.draw[:0], i, &r, ts)
		rec.Topic, key = s.topics.Persons, e.Person.ID
		s.buf = appendPersonWith(s.buf[:0], &e.Person, b[:ends[0]], b[ends[0]:ends[1]], b[ends[1]:ends[2]], b[ends[2]:ends[3]], b[ends[3]:ends[4]], b[ends[4]:ends[5]])
		s.draw = b
	case KindAuction:
		b, ends := g.drawAuction(&e.Auction, s.draw[:0], i, &r, ts)
		rec.Topic, key = s.topics.Auctions, e.Auction.ID
		s.buf = appendAuctionWith(s.buf[:0], &e.Auction, b[:ends[0]], b[ends[0]:ends[1]], b[ends[1]:ends[2]])
		s.draw = b
	case KindBid:
		b, ch := g.drawBid(&e.Bid, s.draw[:0], i, &r, ts)
		rec.Topic, key = s.topics.Bids, e.Bid.Auction
		// The padding is viewed as a string only to be copied into buf.
		s.buf = appendBidWith(s.buf[:0], &e.Bid, ch.name, ch.url, unsafe.String(unsafe.SliceData(b), len(b)))
		s.draw = b
	}
	binary.BigEndian.PutUint64(s.key[:], uint64(key))
	rec.Key, rec.Value = s.key[:], s.buf
	rec.Timestamp = time.UnixMilli(ts)
	return true
}
