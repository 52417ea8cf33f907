package queries

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q6 is the average selling price per seller over their last auctions:
//
//	SELECT Q.seller, AVG(Q.price) OVER
//	    (PARTITION BY Q.seller ORDER BY Q.dateTime ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)
//	FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY A.id, A.seller ORDER BY B.price DESC) AS rownum
//	      FROM (SELECT A.id, A.seller, B.price, B.dateTime
//	            FROM auction AS A, bid AS B
//	            WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires)
//	      WHERE rownum <= 1) AS Q
//
// Q, the top bid of each auction over a regular join, is an updating
// table: a higher bid replaces its auction's row (and moves it, since the
// row's dateTime is the bid's). Flink does not run q6 (its over-windows
// refuse an updating input); Feldera does, with one average per seller.
// eddy's semantics: Q has one row per auction with at least one bid
// within [A.dateTime, A.expires]: its seller, and the price and dateTime
// of its top bid, the highest price, of equal prices the earliest (as
// q9's SQL orders; Flink's ROW_NUMBER breaks the tie arbitrarily). The
// result is a table keyed by seller: AVG(price), truncated as Flink's AVG
// of a BIGINT, over the seller's last 11 rows of Q in order of dateTime
// (of equal dateTimes, the larger auction id is the later): the SQL's
// over-window at the seller's latest row, CURRENT ROW and the 10 before
// it. When a row of Q changes, the seller's average is computed again
// over its rows as they are then. The SQL also gives the window at every
// earlier row; eddy, like Feldera, keeps the current one per seller.
//
// Plan:
//  1. The join and the top bid in one aggregate per auction id, a
//     cogroup of the auctions and the bids (both keyed by the auction,
//     so no repartition): it keeps the auction's interval and seller and
//     its top valid bid, and the bids that came before their auction
//     (their validity is unknown until it comes), as a regular join
//     keeps both sides. It is what a regular join followed by
//     eddy.TopN(…, 1, …) per auction gives, in one store; once eddy has a
//     regular stream-stream join, step 1 becomes that, and the rest stays.
//  2. The auctions with a top bid, regrouped by seller (GroupTableBy, a
//     repartition topic): an auction whose top bid changed leaves its
//     seller's group with its old row and joins with its new one; an
//     update that leaves the row as it was sends nothing.
//  3. eddy.TopNTable with n = 11, latest dateTime first: the rows-over
//     window at the latest row is the first 11 rows in the window's order
//     reversed. TopNTable keeps every row of a seller, so when one of the
//     last 11 moves, the 12th takes its place.
//  4. The average of the 11 (MapTableValues).
//
// Output: key the seller (serde.Int64), value the average (serde.Int64),
// Result's rows the seller and the average as BIGINTs (the SQL's sink
// declares seller VARCHAR; the query computes the id, a BIGINT),
// timestamp the update's; a seller whose only auction's row is being
// replaced shows a tombstone between the two. Check: the last value per
// seller against the average computed from the events as defined above.
func q6() Query {
	return Query{
		Name:  "q6",
		Title: "average selling price by seller",
		Build: buildQ6,
		NewCheck: func(g *nexmark.Generator, n int64) Check {
			return &q6Check{g: g, n: n, got: newLastValues()}
		},
		Result: Result{
			Columns: []string{"seller", "avg_price"},
			Upsert:  true,
			Rows: func(key, value []byte, row func(values ...any)) error {
				if len(key) != 8 || len(value) != 8 {
					return fmt.Errorf("%w: q6 key of %d bytes and value of %d, want 8 each (serde.Int64)", errCorrupt, len(key), len(value))
				}
				row(int64(binary.BigEndian.Uint64(key)), int64(binary.BigEndian.Uint64(value)))
				return nil
			},
		},
	}
}

// q6Rows is how many rows the window holds: CURRENT ROW and 10 PRECEDING.
const q6Rows = 11

func buildQ6(t *eddy.Topology, in nexmark.Topics, out string) {
	auctions := eddy.GroupByKey(eddy.Source(t, in.Auctions, serde.Int64(), nexmark.AuctionSerde()), serde.Int64())
	bids := eddy.GroupByKey(eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde()), serde.Int64())
	cg := eddy.Cogroup(auctions, func(_ int64, a nexmark.Auction, s q6Auction) q6Auction {
		s.Known, s.Start, s.Expires, s.Seller = true, a.DateTime, a.Expires, a.Seller
		for _, b := range s.Pending {
			s = s.bid(b)
		}
		s.Pending = nil
		return s
	})
	cg = eddy.CogroupWith(cg, bids, func(_ int64, b nexmark.Bid, s q6Auction) q6Auction {
		return s.bid(q6Bid{Price: b.Price, DateTime: b.DateTime})
	})
	joined := eddy.CogroupAggregate(cg, "q6-auctions", func() q6Auction { return q6Auction{} }, q6AuctionSerde{})
	q := eddy.FilterTable(joined, func(_ int64, s q6Auction) bool { return s.HasTop })
	bySeller := eddy.GroupTableBy(q, func(id int64, s q6Auction) (int64, Q6Row) {
		return s.Seller, Q6Row{Auction: id, Price: s.Top.Price, DateTime: s.Top.DateTime}
	}, "q6-by-seller", serde.Int64(), Q6RowSerde())
	last := eddy.TopNTable(bySeller, "q6-last", q6Rows, func(a, b Q6Row) int {
		if c := cmp.Compare(b.DateTime, a.DateTime); c != 0 {
			return c
		}
		return cmp.Compare(b.Auction, a.Auction)
	}, Q6RowSerde())
	avg := eddy.MapTableValues(last, func(_ int64, rows []Q6Row) int64 {
		var sum int64
		for _, r := range rows {
			sum += r.Price
		}
		return sum / int64(len(rows)) // TopNTable deletes a seller with no rows
	})
	eddy.To(eddy.ToStream(avg), out, serde.Int64(), serde.Int64())
}

// q6Bid is what the join keeps of a bid.
type q6Bid struct{ Price, DateTime int64 }

// q6Auction is an auction's side of the join and its top bid: the
// auction's interval and seller once it came (Known), the top bid within
// the interval (HasTop), and the bids that came before the auction.
type q6Auction struct {
	Known, HasTop          bool
	Start, Expires, Seller int64
	Top                    q6Bid
	Pending                []q6Bid
}

// bid folds b in: kept for later while the auction is unknown, else made
// the top bid if it lies within the auction and ranks first (the higher
// price, of equal prices the earlier).
func (s q6Auction) bid(b q6Bid) q6Auction {
	switch {
	case !s.Known:
		s.Pending = append(s.Pending, b)
	case b.DateTime < s.Start || b.DateTime > s.Expires:
	case !s.HasTop || b.Price > s.Top.Price || b.Price == s.Top.Price && b.DateTime < s.Top.DateTime:
		s.HasTop, s.Top = true, b
	}
	return s
}

// q6AuctionSerde encodes a flags byte (1 known, 2 has a top bid), then
// the interval, seller and top bid, then the pending bids.
type q6AuctionSerde struct{}

func (q6AuctionSerde) Serialize(dst []byte, s q6Auction) ([]byte, error) {
	var flags byte
	if s.Known {
		flags |= 1
	}
	if s.HasTop {
		flags |= 2
	}
	dst = append(dst, flags)
	for _, v := range [...]int64{s.Start, s.Expires, s.Seller, s.Top.Price, s.Top.DateTime, int64(len(s.Pending))} {
		dst = appendInt(dst, v)
	}
	for _, b := range s.Pending {
		dst = appendInt(appendInt(dst, b.Price), b.DateTime)
	}
	return dst, nil
}

func (q6AuctionSerde) Deserialize(b []byte) (q6Auction, error) {
	if len(b) == 0 || b[0] > 3 {
		return q6Auction{}, fmt.Errorf("%w: q6 auction: missing or bad flags", errCorrupt)
	}
	r := reader{b: b[1:]}
	s := q6Auction{Known: b[0]&1 != 0, HasTop: b[0]&2 != 0,
		Start: r.int(), Expires: r.int(), Seller: r.int(), Top: q6Bid{Price: r.int(), DateTime: r.int()}}
	n := r.int()
	if n < 0 || n > int64(len(r.b)) {
		r.fail(fmt.Sprintf("%d pending bids", n))
		n = 0
	}
	if n > 0 {
		s.Pending = make([]q6Bid, n)
		for i := range s.Pending {
			s.Pending[i] = q6Bid{Price: r.int(), DateTime: r.int()}
		}
	}
	return s, r.done()
}

// Q6Row is a row of q6's Q: an auction and its top bid's price and time.
type Q6Row struct{ Auction, Price, DateTime int64 }

// Q6RowSerde encodes a Q6Row as three varints (encoding/binary's
// AppendVarint): the auction, the price, the time.
func Q6RowSerde() serde.Serde[Q6Row] { return q6RowSerde{} }

type q6RowSerde struct{}

func (q6RowSerde) Serialize(dst []byte, r Q6Row) ([]byte, error) {
	return appendInt(appendInt(appendInt(dst, r.Auction), r.Price), r.DateTime), nil
}

func (q6RowSerde) Deserialize(b []byte) (Q6Row, error) {
	r := reader{b: b}
	row := Q6Row{Auction: r.int(), Price: r.int(), DateTime: r.int()}
	return row, r.done()
}

type q6Check struct {
	g   *nexmark.Generator
	n   int64
	got *lastValues
}

func (c *q6Check) Add(key, value []byte, _ int64) { c.got.add(key, value) }

// q6Avg is a seller's expected average and the rows it is over.
type q6Avg struct {
	avg  int64
	rows []Q6Row
}

// reference computes q6 over events [0, n) as defined on q6, whatever
// their order: the auctions, each auction's top valid bid, then per
// seller the 11 latest rows.
func (c *q6Check) reference() map[int64]q6Avg {
	type auction struct{ start, expires, seller int64 }
	auctions := map[int64]auction{}
	for i := range c.n {
		if nexmark.KindOf(i) == nexmark.KindAuction {
			a := c.g.Event(i).Auction
			auctions[a.ID] = auction{a.DateTime, a.Expires, a.Seller}
		}
	}
	top := map[int64]Q6Row{}
	for i := range c.n {
		if nexmark.KindOf(i) != nexmark.KindBid {
			continue
		}
		b := c.g.Event(i).Bid
		a, ok := auctions[b.Auction]
		if !ok || b.DateTime < a.start || b.DateTime > a.expires {
			continue
		}
		t, ok := top[b.Auction]
		if !ok || b.Price > t.Price || b.Price == t.Price && b.DateTime < t.DateTime {
			top[b.Auction] = Q6Row{Auction: b.Auction, Price: b.Price, DateTime: b.DateTime}
		}
	}
	rows := map[int64][]Q6Row{}
	for id, r := range top {
		s := auctions[id].seller
		rows[s] = append(rows[s], r)
	}
	want := map[int64]q6Avg{}
	for s, rs := range rows {
		slices.SortFunc(rs, func(a, b Q6Row) int { // latest first
			if a.DateTime != b.DateTime {
				return cmp.Compare(b.DateTime, a.DateTime)
			}
			return cmp.Compare(b.Auction, a.Auction)
		})
		rs = rs[:min(len(rs), q6Rows)]
		var sum int64
		for _, r := range rs {
			sum += r.Price
		}
		want[s] = q6Avg{avg: sum / int64(len(rs)), rows: rs}
	}
	return want
}

func (c *q6Check) Verify() error {
	if err := c.got.err(); err != nil {
		return err
	}
	want := c.reference()
	var diffs []string
	for _, s := range slices.Sorted(maps.Keys(want)) {
		w := want[s]
		b, ok := c.got.m[s]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("seller %d: missing, want %d over %v", s, w.avg, w.rows))
		case len(b) != 8:
			diffs = append(diffs, fmt.Sprintf("seller %d: value of %d bytes (a tombstone last?), want %d", s, len(b), w.avg))
		case int64(binary.BigEndian.Uint64(b)) != w.avg:
			diffs = append(diffs, fmt.Sprintf("seller %d: average %d, want %d over %v", s, int64(binary.BigEndian.Uint64(b)), w.avg, w.rows))
		}
	}
	for _, s := range slices.Sorted(maps.Keys(c.got.m)) {
		if _, ok := want[s]; !ok {
			diffs = append(diffs, fmt.Sprintf("seller %d: not expected (no auction of it has a valid bid)", s))
		}
	}
	return differs("sellers", len(c.got.m), len(want), diffs)
}
