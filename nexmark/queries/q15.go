package queries

import (
	"fmt"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q15 is "bidding statistics report": per day, the bids, the distinct
// bidders and the distinct auctions, in all and in three price ranks:
//
//	SELECT DATE_FORMAT(dateTime, 'yyyy-MM-dd') AS day,
//	       count(*) AS total_bids,
//	       count(*) FILTER (WHERE price < 10000) AS rank1_bids,
//	       count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
//	       count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
//	       count(DISTINCT bidder) AS total_bidders,
//	       count(DISTINCT bidder) FILTER (WHERE price < 10000) AS rank1_bidders,
//	       … rank2_bidders, rank3_bidders,
//	       count(DISTINCT auction) AS total_auctions,
//	       … rank1_auctions, rank2_auctions, rank3_auctions
//	FROM bid
//	GROUP BY DATE_FORMAT(dateTime, 'yyyy-MM-dd')
//
// An unbounded group aggregation, an updating result; the day is UTC.
//
// Plan: the bids, projected to what the query reads (distinctBid), are
// re-keyed by day (days since the epoch, so no string per record) through
// a repartition topic, then eddy.AggregateDistinct with two distinct
// columns, bidder and auction, each with four filters: bit 0 every bid,
// bit r the bids of price rank r (priceFilters). A bid costs one lookup
// per column, whatever the filters. All of a day's bids meet in one task,
// as in Flink without its split-distinct optimisation.
//
// Output: key the day, "2026-01-01" (serde.String), value Q15Row
// (Q15RowSerde), timestamp the latest bid's; an upsert per day. Check:
// the last row per day against the SQL's, computed with maps of sets.
func q15() Query {
	return Query{
		Name:  "q15",
		Title: "bidding statistics report",
		Build: func(t *eddy.Topology, in nexmark.Topics, out string) {
			bids := eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde())
			byDay := eddy.Map(bids, func(_ int64, b nexmark.Bid) (int64, distinctBid) { return utcDay(b.DateTime), project(&b) })
			g := eddy.GroupByKey(eddy.Repartition(byDay, "q15-bids-by-day", serde.Int64(), distinctBidSerde{}), serde.Int64())
			counts := eddy.AggregateDistinct(g, "q15-counts", distinctBidColumns[int64](),
				func() BidCounts { return BidCounts{} },
				func(_ int64, b distinctBid, fresh []uint64, c BidCounts) BidCounts { c.add(b.Price, fresh); return c },
				bidCountsSerde{})
			rows := eddy.Map(eddy.ToStream(counts), func(day int64, c BidCounts) (string, Q15Row) {
				d := formatDay(day)
				return d, Q15Row{Day: d, BidCounts: c}
			})
			eddy.To(rows, out, serde.String(), Q15RowSerde{})
		},
		NewCheck: func(g *nexmark.Generator, n int64) Check { return &q15Check{g: g, n: n, got: newLastRows()} },
		Result: Result{
			Columns: append([]string{"day"}, bidCountsColumns()...),
			Upsert:  true,
			Rows: func(_, value []byte, row func(values ...any)) error {
				r, err := Q15RowSerde{}.Deserialize(value)
				if err != nil {
					return err
				}
				row(append([]any{r.Day}, r.BidCounts.values()...)...)
				return nil
			},
		},
	}
}

// distinctBid is what q15 and q16 read of a bid
// (q16's channel travels in its key).
type distinctBid struct{ Auction, Bidder, Price, DateTime int64 }

func project(b *nexmark.Bid) distinctBid {
	return distinctBid{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime}
}

// distinctBidSerde encodes a distinctBid for the repartitions of q15 and
// q16: four zig-zag varints.
type distinctBidSerde struct{}

func (distinctBidSerde) Serialize(dst []byte, b distinctBid) ([]byte, error) {
	return appendInt(appendInt(appendInt(appendInt(dst, b.Auction), b.Bidder), b.Price), b.DateTime), nil
}

func (distinctBidSerde) Deserialize(b []byte) (distinctBid, error) {
	r := reader{b: b}
	v := distinctBid{Auction: r.int(), Bidder: r.int(), Price: r.int(), DateTime: r.int()}
	return v, r.done()
}

// priceRank is a price's rank, 1 to 3 (see rank2Price, rank3Price).
func priceRank(price int64) int {
	switch {
	case price < rank2Price:
		return 1
	case price < rank3Price:
		return 2
	}
	return 3
}

// priceFilters are the filters a bid of price passes: bit 0 (no filter)
// and the bit of its rank.
func priceFilters(price int64) uint64 { return 1 | 1<<priceRank(price) }

// distinctBidColumns are the distinct columns of q15 and q16: bidder and
// auction, each under priceFilters.
func distinctBidColumns[K any]() []eddy.DistinctColumn[K, distinctBid] {
	filters := func(_ K, b distinctBid) uint64 { return priceFilters(b.Price) }
	return []eddy.DistinctColumn[K, distinctBid]{
		eddy.Distinct(func(_ K, b distinctBid) int64 { return b.Bidder }, serde.Int64(), filters),
		eddy.Distinct(func(_ K, b distinctBid) int64 { return b.Auction }, serde.Int64(), filters),
	}
}

// BidCounts are the twelve counts of q15's and q16's rows, in the SQL's
// order: bids, distinct bidders and distinct auctions, each in all and in
// price ranks 1 (price < 10,000), 2 (10,000 ≤ price < 1,000,000) and 3
// (price ≥ 1,000,000).
type BidCounts struct {
	TotalBids, Rank1Bids, Rank2Bids, Rank3Bids                 int64
	TotalBidders, Rank1Bidders, Rank2Bidders, Rank3Bidders     int64
	TotalAuctions, Rank1Auctions, Rank2Auctions, Rank3Auctions int64
}

// bidCountsColumns are BidCounts' columns as the SQL names them.
func bidCountsColumns() []string {
	return []string{"total_bids", "rank1_bids", "rank2_bids", "rank3_bids",
		"total_bidders", "rank1_bidders", "rank2_bidders", "rank3_bidders",
		"total_auctions", "rank1_auctions", "rank2_auctions", "rank3_auctions"}
}

// add counts a bid of price whose bidder and auction are new under the
// filters fresh[0] and fresh[1] say (bits as priceFilters').
func (c *BidCounts) add(price int64, fresh []uint64) {
	c.TotalBids++
	switch priceRank(price) {
	case 1:
		c.Rank1Bids++
	case 2:
		c.Rank2Bids++
	case 3:
		c.Rank3Bids++
	}
	b, a := fresh[0], fresh[1]
	c.TotalBidders += int64(b & 1)
	c.Rank1Bidders += int64(b >> 1 & 1)
	c.Rank2Bidders += int64(b >> 2 & 1)
	c.Rank3Bidders += int64(b >> 3 & 1)
	c.TotalAuctions += int64(a & 1)
	c.Rank1Auctions += int64(a >> 1 & 1)
	c.Rank2Auctions += int64(a >> 2 & 1)
	c.Rank3Auctions += int64(a >> 3 & 1)
}

// values are the counts as Result values.
func (c *BidCounts) values() []any {
	var vs []any
	for _, v := range c.array() {
		vs = append(vs, v)
	}
	return vs
}

func (c *BidCounts) array() [12]int64 {
	return [12]int64{c.TotalBids, c.Rank1Bids, c.Rank2Bids, c.Rank3Bids,
		c.TotalBidders, c.Rank1Bidders, c.Rank2Bidders, c.Rank3Bidders,
		c.TotalAuctions, c.Rank1Auctions, c.Rank2Auctions, c.Rank3Auctions}
}

// bidCountsOf is the BidCounts of array's order.
func bidCountsOf(a [12]int64) BidCounts {
	return BidCounts{TotalBids: a[0], Rank1Bids: a[1], Rank2Bids: a[2], Rank3Bids: a[3],
		TotalBidders: a[4], Rank1Bidders: a[5], Rank2Bidders: a[6], Rank3Bidders: a[7],
		TotalAuctions: a[8], Rank1Auctions: a[9], Rank2Auctions: a[10], Rank3Auctions: a[11]}
}

func appendBidCounts(dst []byte, c *BidCounts) []byte {
	for _, v := range c.array() {
		dst = appendInt(dst, v)
	}
	return dst
}

func (r *reader) bidCounts() BidCounts {
	var a [12]int64
	for i := range a {
		a[i] = r.int()
	}
	return bidCountsOf(a)
}

// bidCountsSerde stores q15's aggregate: the twelve counts.
type bidCountsSerde struct{}

func (bidCountsSerde) Serialize(dst []byte, c BidCounts) ([]byte, error) {
	return appendBidCounts(dst, &c), nil
}

func (bidCountsSerde) Deserialize(b []byte) (BidCounts, error) {
	r := reader{b: b}
	c := r.bidCounts()
	return c, r.done()
}

// Q15Row is one row of q15's result.
type Q15Row struct {
	// Day is the UTC day, "2026-01-01".
	Day string
	BidCounts
}

// Q15RowSerde encodes a Q15Row: the day (a uvarint length and the
// bytes), then the twelve counts in the SQL's order as zig-zag varints.
type Q15RowSerde struct{}

// Serialize implements serde.Serde.
func (Q15RowSerde) Serialize(dst []byte, r Q15Row) ([]byte, error) {
	return appendBidCounts(appendString(dst, r.Day), &r.BidCounts), nil
}

// Deserialize implements serde.Serde.
func (Q15RowSerde) Deserialize(b []byte) (Q15Row, error) {
	r := reader{b: b}
	v := Q15Row{Day: r.string(), BidCounts: r.bidCounts()}
	return v, r.done()
}

// bidSets is the reference's state of one group of q15 or q16: counts
// and sets, per rank (0 for all).
type bidSets struct {
	bids     [4]int64
	bidders  [4]map[int64]bool
	auctions [4]map[int64]bool
}

func (s *bidSets) add(b *nexmark.Bid) {
	rank := 3
	if b.Price < 10000 {
		rank = 1
	} else if b.Price < 1000000 {
		rank = 2
	}
	for _, r := range []int{0, rank} {
		s.bids[r]++
		if s.bidders[r] == nil {
			s.bidders[r], s.auctions[r] = map[int64]bool{}, map[int64]bool{}
		}
		s.bidders[r][b.Bidder] = true
		s.auctions[r][b.Auction] = true
	}
}

func (s *bidSets) counts() BidCounts {
	var a [12]int64
	for r := range 4 {
		a[r], a[4+r], a[8+r] = s.bids[r], int64(len(s.bidders[r])), int64(len(s.auctions[r]))
	}
	return bidCountsOf(a)
}

type q15Check struct {
	g   *nexmark.Generator
	n   int64
	got *lastRows
}

func (c *q15Check) Add(key, value []byte, _ int64) { c.got.add(key, value) }

func (c *q15Check) Verify() error {
	days := map[string]*bidSets{}
	for i := range c.n {
		if nexmark.KindOf(i) != nexmark.KindBid {
			continue
		}
		b := c.g.Event(i).Bid
		day := time.UnixMilli(b.DateTime).UTC().Format("2006-01-02")
		if days[day] == nil {
			days[day] = &bidSets{}
		}
		days[day].add(&b)
	}
	want := map[string][]byte{}
	for day, s := range days {
		want[day], _ = Q15RowSerde{}.Serialize(nil, Q15Row{Day: day, BidCounts: s.counts()})
	}
	return c.got.compare(want, func(key, value []byte) string {
		r, err := Q15RowSerde{}.Deserialize(value)
		if err != nil {
			return fmt.Sprintf("day %q: undecodable row (%v)", key, err)
		}
		return fmt.Sprintf("day %q: %+v", key, r)
	})
}
