package queries

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q9 is the winning bid of each auction:
//
//	SELECT id, itemName, description, initialBid, reserve, dateTime, expires, seller, category, extra,
//	       auction, bidder, price, bid_dateTime, bid_extra
//	FROM (
//	  SELECT A.*, B.auction, B.bidder, B.price, B.dateTime AS bid_dateTime, B.extra AS bid_extra,
//	    ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.dateTime ASC) AS rownum
//	  FROM auction A, bid B
//	  WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
//	)
//	WHERE rownum <= 1
//
// The join is a regular join, as Flink runs it: an auction and a bid of it
// meet whichever arrives first, however far apart
// (eddy.JoinStreamsRegular, auctions unique, as in q4); the BETWEEN
// condition is checked on each joined pair. Over an insert-only join, the
// top row per auction is a running best, so eddy keeps it with a Reduce
// per auction (the join's output is keyed by auction id already: no
// repartition): each valid pair replaces the auction's row if its bid
// ranks first. Flink breaks ties of price and time arbitrarily; eddy
// ranks by price descending, then time ascending, then bidder ascending,
// then extra ascending (q9Better), which orders every two bids that give
// different rows. Bids are cut to the columns the result shows before the
// join (q9Bid), so the join stores less of the bids that wait for their
// auction.
//
// The result is updating: every valid bid gives its auction's row anew,
// the same row when the bid does not rank first, and the last row per
// auction is the result (Result.Upsert).
//
// Output: key the auction id (serde.Int64), value Q9Row (Q9RowSerde).
// Check: the last row per auction against the SQL's top row, by the same
// ranking, of every auction with a bid between its start and its expiry,
// computed from the events.
func q9() Query {
	return Query{
		Name:  "q9",
		Title: "winning bids",
		Build: func(t *eddy.Topology, in nexmark.Topics, out string) {
			auctions := eddy.Source(t, in.Auctions, serde.Int64(), nexmark.AuctionSerde())
			bids := eddy.MapValues(eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde()),
				func(_ int64, b nexmark.Bid) q9Bid {
					return q9Bid{Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra}
				})
			joined := eddy.JoinStreamsRegular(auctions, bids, eddy.RegularJoin{}.LeftUnique(), "q9-join",
				serde.Int64(), nexmark.AuctionSerde(), q9BidSerde{},
				func(_ int64, a nexmark.Auction, b q9Bid) Q9Row {
					return Q9Row{Auction: a, Bidder: b.Bidder, Price: b.Price, BidDateTime: b.DateTime, BidExtra: b.Extra}
				})
			valid := eddy.Filter(joined, func(_ int64, r Q9Row) bool {
				return r.Auction.DateTime <= r.BidDateTime && r.BidDateTime <= r.Auction.Expires
			})
			best := eddy.Reduce(eddy.GroupByKey(valid, serde.Int64()), "q9-best", func(best, r Q9Row) Q9Row {
				if q9Better(r, best) {
					return r
				}
				return best
			}, Q9RowSerde{})
			eddy.To(eddy.ToStream(best), out, serde.Int64(), Q9RowSerde{})
		},
		NewCheck: func(g *nexmark.Generator, n int64) Check {
			return &q9Check{g: g, n: n, got: newLastValues()}
		},
		Result: Result{
			Columns: []string{"id", "itemName", "description", "initialBid", "reserve", "dateTime", "expires", "seller", "category", "extra",
				"auction", "bidder", "price", "bid_dateTime", "bid_extra"},
			Upsert: true,
			Rows: func(_, value []byte, row func(values ...any)) error {
				r, err := Q9RowSerde{}.Deserialize(value)
				if err != nil {
					return err
				}
				a := &r.Auction
				row(a.ID, a.ItemName, a.Description, a.InitialBid, a.Reserve, Timestamp(a.DateTime), Timestamp(a.Expires), a.Seller, a.Category, a.Extra,
					a.ID, r.Bidder, r.Price, Timestamp(r.BidDateTime), r.BidExtra)
				return nil
			},
		},
	}
}

// q9Better reports whether row a ranks before row b: a higher price, then
// an earlier bid, then a smaller bidder, then a smaller extra.
func q9Better(a, b Q9Row) bool {
	switch {
	case a.Price != b.Price:
		return a.Price > b.Price
	case a.BidDateTime != b.BidDateTime:
		return a.BidDateTime < b.BidDateTime
	case a.Bidder != b.Bidder:
		return a.Bidder < b.Bidder
	}
	return a.BidExtra < b.BidExtra
}

// q9Bid is what q9 keeps of a bid (its auction is the key).
type q9Bid struct {
	Bidder, Price, DateTime int64
	Extra                   string
}

type q9BidSerde struct{}

func (q9BidSerde) Serialize(dst []byte, b q9Bid) ([]byte, error) {
	return appendString(appendInt(appendInt(appendInt(dst, b.Bidder), b.Price), b.DateTime), b.Extra), nil
}

func (q9BidSerde) Deserialize(data []byte) (q9Bid, error) {
	r := reader{b: data}
	b := q9Bid{Bidder: r.int(), Price: r.int(), DateTime: r.int(), Extra: r.string()}
	return b, r.done()
}

// Q9Row is q9's result row: the auction and its winning bid (whose auction
// is Auction.ID).
type Q9Row struct {
	Auction                    nexmark.Auction
	Bidder, Price, BidDateTime int64
	BidExtra                   string
}

// Q9RowSerde encodes a Q9Row in the SQL's column order, integers as
// zig-zag varints and strings as a uvarint length and the bytes: id,
// itemName, description, initialBid, reserve, dateTime (ms), expires (ms),
// seller, category, extra, then the bid's bidder, price, dateTime (ms)
// and extra (its auction is the id, not encoded twice).
type Q9RowSerde struct{}

// Serialize implements serde.Serde.
func (Q9RowSerde) Serialize(dst []byte, r Q9Row) ([]byte, error) {
	a := &r.Auction
	dst = appendString(appendString(appendInt(dst, a.ID), a.ItemName), a.Description)
	dst = appendInt(appendInt(appendInt(appendInt(dst, a.InitialBid), a.Reserve), a.DateTime), a.Expires)
	dst = appendString(appendInt(appendInt(dst, a.Seller), a.Category), a.Extra)
	dst = appendInt(appendInt(appendInt(dst, r.Bidder), r.Price), r.BidDateTime)
	return appendString(dst, r.BidExtra), nil
}

// Deserialize implements serde.Serde.
func (Q9RowSerde) Deserialize(data []byte) (Q9Row, error) {
	r := reader{b: data}
	var v Q9Row
	a := &v.Auction
	a.ID, a.ItemName, a.Description = r.int(), r.string(), r.string()
	a.InitialBid, a.Reserve, a.DateTime, a.Expires = r.int(), r.int(), r.int(), r.int()
	a.Seller, a.Category, a.Extra = r.int(), r.int(), r.string()
	v.Bidder, v.Price, v.BidDateTime, v.BidExtra = r.int(), r.int(), r.int(), r.string()
	return v, r.done()
}

type q9Check struct {
	g   *nexmark.Generator
	n   int64
	got *lastValues
}

func (c *q9Check) Add(key, value []byte, _ int64) { c.got.add(key, value) }

// reference is the SQL over events [0, n): per auction, the valid bid
// that ranks first (price descending, time, bidder and extra ascending).
func (c *q9Check) reference() map[int64]Q9Row {
	best := map[int64]Q9Row{}
	validBids(c.g, c.n, func(a *nexmark.Auction, b *nexmark.Bid) {
		cur, ok := best[a.ID]
		first := !ok || b.Price > cur.Price ||
			b.Price == cur.Price && (b.DateTime < cur.BidDateTime ||
				b.DateTime == cur.BidDateTime && (b.Bidder < cur.Bidder ||
					b.Bidder == cur.Bidder && b.Extra < cur.BidExtra))
		if first {
			best[a.ID] = Q9Row{Auction: *a, Bidder: b.Bidder, Price: b.Price, BidDateTime: b.DateTime, BidExtra: b.Extra}
		}
	})
	return best
}

func (c *q9Check) Verify() error {
	if err := c.got.err(); err != nil {
		return err
	}
	want := c.reference()
	var diffs []string
	var v []byte
	for _, id := range slices.Sorted(maps.Keys(want)) {
		w := want[id]
		v, _ = Q9RowSerde{}.Serialize(v[:0], w)
		b, ok := c.got.m[id]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("auction %d: missing, want the bid of %d at price %d", id, w.Bidder, w.Price))
		case string(b) != string(v):
			got, err := Q9RowSerde{}.Deserialize(b)
			switch {
			case err != nil:
				diffs = append(diffs, fmt.Sprintf("auction %d: %v", id, err))
			case got.Bidder != w.Bidder || got.Price != w.Price || got.BidDateTime != w.BidDateTime:
				diffs = append(diffs, fmt.Sprintf("auction %d: the bid of %d at price %d, time %d; want the bid of %d at price %d, time %d",
					id, got.Bidder, got.Price, got.BidDateTime, w.Bidder, w.Price, w.BidDateTime))
			default:
				diffs = append(diffs, fmt.Sprintf("auction %d: the bid of %d at price %d, other columns differ", id, w.Bidder, w.Price))
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.got.m)) {
		if _, ok := want[id]; !ok {
			diffs = append(diffs, fmt.Sprintf("auction %d: not expected (no valid bid)", id))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("… %d more", len(diffs)-5))
	}
	return fmt.Errorf("%w:\n\t%s", errDiffers, strings.Join(diffs, "\n\t"))
}
