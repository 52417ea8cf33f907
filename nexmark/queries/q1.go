package queries

import (
	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q1 converts each bid's price from dollars to euros:
//
//	SELECT auction, bidder, 0.908 * price as price, dateTime, extra FROM bid
//
// The SQL's product is an exact decimal with three places (Flink types
// 0.908 * BIGINT as DECIMAL), so eddy computes it exactly too, in fixed
// point: the output price is 908 × price, in thousandths of the bid's
// price unit (the bid's cents × 0.908 = output / 1000 cents). A float
// would round; 908 × the largest generated price (10^8 cents) is far
// from overflowing an int64.
//
// Output: key the auction id (serde.Int64), value the row (BidRowSerde
// with the converted price), timestamp the bid's. Check: every bid's row,
// once (a digest).
func q1() Query {
	return Query{
		Name:  "q1",
		Title: "currency conversion",
		Build: func(t *eddy.Topology, in nexmark.Topics, out string) {
			bids := eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde())
			rows := eddy.MapValues(bids, func(_ int64, b nexmark.Bid) BidRow { return projectBid(&b, toEuroMilli(b.Price)) })
			eddy.To(rows, out, serde.Int64(), BidRowSerde{})
		},
		NewCheck: func(g *nexmark.Generator, n int64) Check {
			// The reference's own conversion, not the query's function.
			return newBidRowCheck(g, n, func(price int64) int64 { return price * 908 })
		},
		Result: bidRows(true),
	}
}

// toEuroMilli is 0.908 × price, exactly, in thousandths of price's unit.
func toEuroMilli(price int64) int64 { return 908 * price }
