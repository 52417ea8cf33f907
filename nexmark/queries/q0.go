package queries

import (
	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q0 is the pass-through query, which measures the cost of reading,
// decoding, encoding and writing alone:
//
//	SELECT auction, bidder, price, dateTime, extra FROM bid
//
// Output: key the auction id (serde.Int64), value the row (BidRowSerde),
// timestamp the bid's. Check: every bid's row, once (a digest).
func q0() Query {
	return Query{
		Name:  "q0",
		Title: "pass through",
		Build: func(t *eddy.Topology, in nexmark.Topics, out string) {
			bids := eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde())
			rows := eddy.MapValues(bids, func(_ int64, b nexmark.Bid) BidRow { return projectBid(&b, b.Price) })
			eddy.To(rows, out, serde.Int64(), BidRowSerde{})
		},
		NewCheck: func(g *nexmark.Generator, n int64) Check {
			return newBidRowCheck(g, n, func(price int64) int64 { return price })
		},
		Result: bidRows(false),
	}
}

// BidRow is the row q0 and q1 select from a bid.
type BidRow struct {
	Auction, Bidder, Price, DateTime int64
	Extra                            string
}

func projectBid(b *nexmark.Bid, price int64) BidRow {
	return BidRow{Auction: b.Auction, Bidder: b.Bidder, Price: price, DateTime: b.DateTime, Extra: b.Extra}
}

// BidRowSerde encodes a BidRow: the four integers, then extra.
type BidRowSerde struct{}

func (BidRowSerde) Serialize(dst []byte, r BidRow) ([]byte, error) {
	dst = appendInt(dst, r.Auction)
	dst = appendInt(dst, r.Bidder)
	dst = appendInt(dst, r.Price)
	dst = appendInt(dst, r.DateTime)
	return appendString(dst, r.Extra), nil
}

func (BidRowSerde) Deserialize(b []byte) (BidRow, error) {
	r := reader{b: b}
	v := BidRow{Auction: r.int(), Bidder: r.int(), Price: r.int(), DateTime: r.int(), Extra: r.string()}
	return v, r.done()
}

// newBidRowCheck checks a query that writes one BidRow per bid, keyed by
// auction, at the bid's time, with the price converted by price.
func newBidRowCheck(g *nexmark.Generator, n int64, price func(int64) int64) Check {
	return newAppendCheck(func(add func(key, value []byte, ts int64)) {
		var k, v []byte
		for i := range n {
			if nexmark.KindOf(i) != nexmark.KindBid {
				continue
			}
			e := g.Event(i)
			b := &e.Bid
			k = int64Key(k[:0], b.Auction)
			v, _ = BidRowSerde{}.Serialize(v[:0], BidRow{Auction: b.Auction, Bidder: b.Bidder, Price: price(b.Price), DateTime: b.DateTime, Extra: b.Extra})
			add(k, v, b.DateTime)
		}
	})
}
