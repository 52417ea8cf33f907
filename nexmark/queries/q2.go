package queries

import (
	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q2 selects the bids of a few auctions:
//
//	SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0
//
// Output: key the auction id (serde.Int64), value the price
// (serde.Int64), timestamp the bid's. Check: every selected bid, once (a
// digest).
func q2() Query {
	return Query{
		Name:  "q2",
		Title: "selection",
		Build: func(t *eddy.Topology, in nexmark.Topics, out string) {
			bids := eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde())
			sel := eddy.Filter(bids, func(_ int64, b nexmark.Bid) bool { return b.Auction%q2Modulus == 0 })
			eddy.To(eddy.MapValues(sel, func(_ int64, b nexmark.Bid) int64 { return b.Price }), out, serde.Int64(), serde.Int64())
		},
		NewCheck: func(g *nexmark.Generator, n int64) Check {
			return newAppendCheck(func(add func(key, value []byte, ts int64)) {
				var k, v []byte
				for i := range n {
					if nexmark.KindOf(i) != nexmark.KindBid {
						continue
					}
					e := g.Event(i)
					if e.Bid.Auction%q2Modulus != 0 {
						continue
					}
					k, v = int64Key(k[:0], e.Bid.Auction), int64Key(v[:0], e.Bid.Price)
					add(k, v, e.Bid.DateTime)
				}
			})
		},
		Result: q2Result(),
	}
}

// q2Modulus is the suite's selection: one auction in 123.
const q2Modulus = 123
