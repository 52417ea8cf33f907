package queries

import (
	"fmt"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q20 expands each bid with the auction it is for, in category 10:
//
//	SELECT auction, bidder, price, channel, url, B.dateTime, B.extra,
//	       itemName, description, initialBid, reserve, A.dateTime, expires, seller, category, A.extra
//	FROM bid AS B INNER JOIN auction AS A on B.auction = A.id
//	WHERE A.category = 10
//
// A regular join: a bid meets its auction whichever arrives first, however
// far apart (eddy.JoinStreamsRegular). Bids and auctions are both keyed by
// auction id, so they are co-partitioned and join without a repartition.
// An auction id is unique (RightUnique): a bid that finds its auction is
// not stored, and the bids that came before their auction leave the join
// when it arrives. The category filter is applied after the join, not
// before: an auction of another category still joins, kept as a marker
// without its columns (q20Auction), so that its bids find it and are not
// stored waiting for an auction that would never come; their results are
// dropped. The SQL's result is the same, as the filter reads only the
// auction's columns.
//
// Output: key the auction id (serde.Int64), value Q20Row (Q20RowSerde),
// timestamp the later of the bid's and the auction's. Check: every (bid,
// auction) pair of category 10 among the events, once, at that timestamp
// (a digest).
func q20() Query {
	return Query{
		Name:  "q20",
		Title: "expand bid with auction",
		Build: func(t *eddy.Topology, in nexmark.Topics, out string) {
			bids := eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde())
			auctions := eddy.MapValues(eddy.Source(t, in.Auctions, serde.Int64(), nexmark.AuctionSerde()),
				func(_ int64, a nexmark.Auction) q20Auction {
					if a.Category != q20Category {
						return q20Auction{}
					}
					return q20Auction{A: a, OK: true}
				})
			joined := eddy.JoinStreamsRegular(bids, auctions, eddy.RegularJoin{}.RightUnique(), "q20-join",
				serde.Int64(), nexmark.BidSerde(), q20AuctionSerde{},
				func(_ int64, b nexmark.Bid, a q20Auction) q20Joined {
					return q20Joined{Q20Row{Bid: b, Auction: a.A}, a.OK}
				})
			kept := eddy.Filter(joined, func(_ int64, j q20Joined) bool { return j.ok })
			eddy.To(eddy.MapValues(kept, func(_ int64, j q20Joined) Q20Row { return j.row }), out, serde.Int64(), Q20RowSerde{})
		},
		NewCheck: func(g *nexmark.Generator, n int64) Check {
			return newAppendCheck(func(add func(key, value []byte, ts int64)) {
				auctions := map[int64]nexmark.Auction{}
				for i := range n {
					if nexmark.KindOf(i) == nexmark.KindAuction {
						if e := g.Event(i); e.Auction.Category == 10 {
							auctions[e.Auction.ID] = e.Auction
						}
					}
				}
				var k, v []byte
				for i := range n {
					if nexmark.KindOf(i) != nexmark.KindBid {
						continue
					}
					b := g.Event(i).Bid
					a, ok := auctions[b.Auction]
					if !ok {
						continue
					}
					k = int64Key(k[:0], b.Auction)
					v, _ = Q20RowSerde{}.Serialize(v[:0], Q20Row{Bid: b, Auction: a})
					add(k, v, max(b.DateTime, a.DateTime))
				}
			})
		},
		Result: Result{
			Columns: []string{"auction", "bidder", "price", "channel", "url", "bid_dateTime", "bid_extra",
				"itemName", "description", "initialBid", "reserve", "auction_dateTime", "expires", "seller", "category", "auction_extra"},
			Rows: func(_, value []byte, row func(values ...any)) error {
				r, err := Q20RowSerde{}.Deserialize(value)
				if err != nil {
					return err
				}
				b, a := &r.Bid, &r.Auction
				row(b.Auction, b.Bidder, b.Price, b.Channel, b.URL, Timestamp(b.DateTime), b.Extra,
					a.ItemName, a.Description, a.InitialBid, a.Reserve, Timestamp(a.DateTime), Timestamp(a.Expires), a.Seller, a.Category, a.Extra)
				return nil
			},
		},
	}
}

const q20Category = 10

// q20Auction is what q20's join keeps of an auction: all of it in
// category 10 (OK), nothing otherwise.
type q20Auction struct {
	A  nexmark.Auction
	OK bool
}

// q20AuctionSerde writes a byte, 1 if OK, then the auction if OK.
type q20AuctionSerde struct{}

func (q20AuctionSerde) Serialize(dst []byte, a q20Auction) ([]byte, error) {
	if !a.OK {
		return append(dst, 0), nil
	}
	return nexmark.AuctionSerde().Serialize(append(dst, 1), a.A)
}

func (q20AuctionSerde) Deserialize(b []byte) (q20Auction, error) {
	switch {
	case len(b) == 1 && b[0] == 0:
		return q20Auction{}, nil
	case len(b) > 1 && b[0] == 1:
		a, err := nexmark.AuctionSerde().Deserialize(b[1:])
		return q20Auction{A: a, OK: true}, err
	}
	return q20Auction{}, fmt.Errorf("%w: q20 auction of %d bytes", errCorrupt, len(b))
}

// q20Joined is a joined pair and whether its auction is in category 10.
type q20Joined struct {
	row Q20Row
	ok  bool
}

// Q20Row is q20's result row: the bid and its auction (the auction's ID is
// the bid's Auction, and is not encoded twice).
type Q20Row struct {
	Bid     nexmark.Bid
	Auction nexmark.Auction
}

// Q20RowSerde encodes a Q20Row in the SQL's column order, integers as
// zig-zag varints and strings as a uvarint length and the bytes: auction,
// bidder, price, channel, url, bid dateTime (ms), bid extra, itemName,
// description, initialBid, reserve, auction dateTime (ms), expires (ms),
// seller, category, auction extra.
type Q20RowSerde struct{}

// Serialize implements serde.Serde.
func (Q20RowSerde) Serialize(dst []byte, r Q20Row) ([]byte, error) {
	b, a := &r.Bid, &r.Auction
	dst = appendInt(appendInt(appendInt(dst, b.Auction), b.Bidder), b.Price)
	dst = appendString(appendString(dst, b.Channel), b.URL)
	dst = appendString(appendInt(dst, b.DateTime), b.Extra)
	dst = appendString(appendString(dst, a.ItemName), a.Description)
	dst = appendInt(appendInt(appendInt(appendInt(dst, a.InitialBid), a.Reserve), a.DateTime), a.Expires)
	dst = appendInt(appendInt(dst, a.Seller), a.Category)
	return appendString(dst, a.Extra), nil
}

// Deserialize implements serde.Serde.
func (Q20RowSerde) Deserialize(data []byte) (Q20Row, error) {
	r := reader{b: data}
	var v Q20Row
	b, a := &v.Bid, &v.Auction
	b.Auction, b.Bidder, b.Price = r.int(), r.int(), r.int()
	b.Channel, b.URL = r.string(), r.string()
	b.DateTime, b.Extra = r.int(), r.string()
	a.ID = b.Auction
	a.ItemName, a.Description = r.string(), r.string()
	a.InitialBid, a.Reserve, a.DateTime, a.Expires = r.int(), r.int(), r.int(), r.int()
	a.Seller, a.Category = r.int(), r.int()
	a.Extra = r.string()
	return v, r.done()
}
