package queries

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q8 is "monitor new users": the people who put up an auction in the same
// 10 s tumbling window (of event time) as they registered, each (person,
// window) once, as id, name and window start.
//
// The suite's SQL groups persons by (id, name, window) and auctions by
// (seller, window) and joins the two on id = seller and the window. eddy
// does it in one windowed aggregation: the auctions are re-keyed by seller
// (a repartition topic, so they meet their seller's person record in one
// task), merged with the persons (keyed by id), and per (person id, window)
// an aggregate records whether the person registered (with the name) and
// whether an auction was seen. Emit-final with a grace of 4 s, like Flink's
// window join, which also reports a window once its watermark passed:
// each (person, window) is reported once, when the window closes, if both
// sides were seen. The order of a person and their auctions does not
// matter (the generator lets a seller's first auction precede the person).
//
// Reference: in every window (the end of the input closes them all), the
// persons who registered in it and were the seller of an auction in it,
// leaving out the records that were late: a person or an auction is late
// when its window's end + 4 s is at or before the largest person or
// auction timestamp so far (the aggregation's task reads both, in the
// order of the input).
func q8() Query {
	return Query{Name: "q8", Title: "monitor new users", Build: buildQ8, NewCheck: newQ8Check, Result: q8Result()}
}

const (
	q8Size  = 10 * time.Second
	q8Grace = 4 * time.Second
)

func buildQ8(t *eddy.Topology, in nexmark.Topics, out string) {
	persons := eddy.MapValues(eddy.Source(t, in.Persons, serde.Int64(), nexmark.PersonSerde()),
		func(_ int64, p nexmark.Person) q8Seen { return q8Seen{person: true, name: p.Name} })
	sellers := eddy.Map(eddy.Source(t, in.Auctions, serde.Int64(), nexmark.AuctionSerde()),
		func(_ int64, a nexmark.Auction) (int64, q8Seen) { return a.Seller, q8Seen{auction: true} })
	sellers = eddy.Repartition(sellers, "q8-auctions-by-seller", serde.Int64(), q8SeenSerde{})
	g := eddy.GroupByKey(eddy.Merge(persons, sellers), serde.Int64())
	ws := eddy.WindowedBy(g, eddy.TumblingWindows(q8Size).WithGrace(q8Grace)).Emit(eddy.EmitFinal)
	seen := eddy.WindowAggregate(ws, "q8-seen", func() q8Seen { return q8Seen{} },
		func(_ int64, v, agg q8Seen) q8Seen {
			if v.person {
				agg.person, agg.name = true, v.name
			}
			agg.auction = agg.auction || v.auction
			return agg
		}, nil, q8SeenSerde{})
	both := eddy.Filter(eddy.ToStream(seen), func(_ eddy.Windowed[int64], s q8Seen) bool { return s.person && s.auction })
	res := eddy.Map(both, func(k eddy.Windowed[int64], s q8Seen) (int64, Q8Row) {
		return k.Key, Q8Row{ID: k.Key, Name: s.name, Start: k.Start}
	})
	eddy.To(res, out, serde.Int64(), Q8RowSerde{})
}

// q8Seen is what is known of a person in a window: registered (with the
// name) and seller of an auction. It is also the value of an input record:
// a person or an auction by the key.
type q8Seen struct {
	person, auction bool
	name            string
}

// q8SeenSerde encodes a q8Seen as a flags byte (1 person, 2 auction) and
// the name.
type q8SeenSerde struct{}

func (q8SeenSerde) Serialize(dst []byte, s q8Seen) ([]byte, error) {
	var flags byte
	if s.person {
		flags |= 1
	}
	if s.auction {
		flags |= 2
	}
	return append(append(dst, flags), s.name...), nil
}

func (q8SeenSerde) Deserialize(b []byte) (q8Seen, error) {
	if len(b) == 0 || b[0] > 3 {
		return q8Seen{}, fmt.Errorf("%w: q8 seen: bad flags", errCorrupt)
	}
	s := q8Seen{person: b[0]&1 != 0, auction: b[0]&2 != 0}
	if len(b) > 1 {
		s.name = string(b[1:])
	}
	return s, nil
}

// Q8Row is q8's result: the SQL's P.id, P.name, P.starttime.
type Q8Row struct {
	ID    int64
	Name  string
	Start int64
}

func appendQ8User(dst []byte, u *Q8Row) []byte {
	dst = binary.AppendVarint(dst, u.ID)
	dst = binary.AppendVarint(dst, u.Start)
	return append(dst, u.Name...)
}

// Q8RowSerde encodes a Q8Row: id and window start as varints, then the
// name.
type Q8RowSerde struct{}

func (Q8RowSerde) Serialize(dst []byte, u Q8Row) ([]byte, error) { return appendQ8User(dst, &u), nil }

func (Q8RowSerde) Deserialize(b []byte) (Q8Row, error) {
	r := reader{b: b}
	u := Q8Row{ID: r.int(), Start: r.int()}
	u.Name = r.rest()
	return u, r.done()
}

// q8Check digests the output per window start.
type q8Check struct {
	g    *nexmark.Generator
	n    int64
	seed maphash.Seed
	got  *digest
}

func newQ8Check(g *nexmark.Generator, n int64) Check {
	seed := maphash.MakeSeed()
	return &q8Check{g: g, n: n, seed: seed, got: newDigest(seed)}
}

func (c *q8Check) Add(key, value []byte, _ int64) {
	r := reader{b: value}
	r.int()
	group := r.int()
	if r.err != nil {
		group = -1 // no window of the reference: reported as extra
	}
	c.got.add(group, key, value)
}

func (c *q8Check) Verify() error {
	size, grace := q8Size.Milliseconds(), q8Grace.Milliseconds()
	type sellerWindow struct{ seller, start int64 }
	sold := make(map[sellerWindow]bool)
	var persons []Q8Row
	streamTime := int64(-1)
	for i := int64(0); i < c.n; i++ {
		switch nexmark.KindOf(i) {
		case nexmark.KindPerson:
			p := c.g.Event(i).Person
			streamTime = max(streamTime, p.DateTime)
			if start := windowStart(p.DateTime, size); start+size+grace > streamTime { // else late
				persons = append(persons, Q8Row{ID: p.ID, Name: p.Name, Start: start})
			}
		case nexmark.KindAuction:
			a := c.g.Event(i).Auction
			streamTime = max(streamTime, a.DateTime)
			if start := windowStart(a.DateTime, size); start+size+grace > streamTime {
				sold[sellerWindow{a.Seller, start}] = true
			}
		}
	}
	want := newDigest(c.seed)
	var key, value []byte
	for i := range persons { // the end of the input closed every window
		p := &persons[i]
		if !sold[sellerWindow{p.ID, p.Start}] {
			continue
		}
		key = binary.BigEndian.AppendUint64(key[:0], uint64(p.ID))
		value = appendQ8User(value[:0], p)
		want.add(p.Start, key, value)
	}
	if err := compare(c.got, want, "window"); err != nil {
		return fmt.Errorf("q8: %w", err)
	}
	return nil
}
