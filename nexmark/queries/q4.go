package queries

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q4 is the average closing price per category:
//
//	SELECT Q.category, AVG(Q.final)
//	FROM (SELECT MAX(B.price) AS final, A.category
//	      FROM auction A, bid B
//	      WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
//	      GROUP BY A.id, A.category) Q
//	GROUP BY Q.category
//
// The inner maximum per auction changes as bids arrive, so the outer
// average is over an updating result: when an auction's maximum rises,
// the old maximum must leave its category's average before the new one
// joins. eddy does what Kafka Streams does: the maxima are a table, and
// GroupTableBy + AggregateTable (sum and count, with a subtractor)
// regroup it by category through a repartition topic.
//
// The join is a regular join, as Flink runs it: an auction and a bid of
// it meet whichever arrives first, however far apart
// (eddy.JoinStreamsRegular); the BETWEEN condition is checked on each
// joined pair. Bids and auctions are both keyed by auction id, so they
// are co-partitioned and join without a repartition. An auction id is
// unique (LeftUnique): a bid that finds its auction is not stored, and
// the bids that came before their auction leave the join when it
// arrives, so the join keeps the auctions (time, expiry, category) and
// the bids still waiting for theirs.
//
// AVG of a BIGINT is a BIGINT in Flink: the sum divided by the count,
// truncated; eddy computes the same. Every update of an auction's maximum
// shows as two records of its category (the subtraction's, the
// addition's); an aggregate with no auctions left, which only exists
// between the two, shows as 0.
//
// Output: key the category (serde.Int64), value the average
// (serde.Int64), an upsert per category. Check: the last value per
// category against the SQL's average over the final maximum of every
// auction with at least one bid between its start and its expiry,
// computed from the events.
func q4() Query {
	return Query{
		Name:  "q4",
		Title: "average price for a category",
		Build: func(t *eddy.Topology, in nexmark.Topics, out string) {
			auctions := eddy.MapValues(eddy.Source(t, in.Auctions, serde.Int64(), nexmark.AuctionSerde()),
				func(_ int64, a nexmark.Auction) q4Auction {
					return q4Auction{DateTime: a.DateTime, Expires: a.Expires, Category: a.Category}
				})
			bids := eddy.MapValues(eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde()),
				func(_ int64, b nexmark.Bid) q4Bid { return q4Bid{Price: b.Price, DateTime: b.DateTime} })
			joined := eddy.JoinStreamsRegular(auctions, bids, eddy.RegularJoin{}.LeftUnique(), "q4-join",
				serde.Int64(), q4AuctionSerde{}, q4BidSerde{},
				func(_ int64, a q4Auction, b q4Bid) q4Price {
					valid := a.DateTime <= b.DateTime && b.DateTime <= a.Expires
					return q4Price{Category: a.Category, Price: b.Price, Valid: valid}
				})
			valid := eddy.Filter(joined, func(_ int64, p q4Price) bool { return p.Valid })
			maxima := eddy.Aggregate(eddy.GroupByKey(valid, serde.Int64()), "q4-max",
				func() q4Price { return q4Price{} },
				func(_ int64, p, m q4Price) q4Price {
					if p.Price > m.Price {
						m.Price = p.Price
					}
					m.Category = p.Category
					return m
				}, q4PriceSerde{})
			byCategory := eddy.GroupTableBy(maxima, func(_ int64, m q4Price) (int64, int64) { return m.Category, m.Price },
				"q4-by-category", serde.Int64(), serde.Int64())
			sums := eddy.AggregateTable(byCategory, "q4-avg", func() sumCount { return sumCount{} },
				func(_ int64, v int64, s sumCount) sumCount { return sumCount{s.Sum + v, s.Count + 1} },
				func(_ int64, v int64, s sumCount) sumCount { return sumCount{s.Sum - v, s.Count - 1} },
				sumCountSerde{})
			eddy.To(eddy.MapValues(eddy.ToStream(sums), func(_ int64, s sumCount) int64 { return s.avg() }),
				out, serde.Int64(), serde.Int64())
		},
		NewCheck: func(g *nexmark.Generator, n int64) Check {
			return &q4Check{g: g, n: n, got: newLastValues()}
		},
		Result: Result{
			Columns: []string{"id", "final"},
			Upsert:  true,
			Rows: func(key, value []byte, row func(values ...any)) error {
				if len(key) != 8 || len(value) != 8 {
					return fmt.Errorf("%w: q4 key of %d bytes and value of %d, want 8 and 8 (serde.Int64)", errCorrupt, len(key), len(value))
				}
				row(int64(binary.BigEndian.Uint64(key)), int64(binary.BigEndian.Uint64(value)))
				return nil
			},
		},
	}
}

// q4Auction is what the join keeps of an auction.
type q4Auction struct{ DateTime, Expires, Category int64 }

type q4AuctionSerde struct{}

func (q4AuctionSerde) Serialize(dst []byte, a q4Auction) ([]byte, error) {
	return appendInt(appendInt(appendInt(dst, a.DateTime), a.Expires), a.Category), nil
}

func (q4AuctionSerde) Deserialize(b []byte) (q4Auction, error) {
	r := reader{b: b}
	a := q4Auction{DateTime: r.int(), Expires: r.int(), Category: r.int()}
	return a, r.done()
}

// q4Bid is what the join keeps of a bid.
type q4Bid struct{ Price, DateTime int64 }

type q4BidSerde struct{}

func (q4BidSerde) Serialize(dst []byte, b q4Bid) ([]byte, error) {
	return appendInt(appendInt(dst, b.Price), b.DateTime), nil
}

func (q4BidSerde) Deserialize(b []byte) (q4Bid, error) {
	r := reader{b: b}
	v := q4Bid{Price: r.int(), DateTime: r.int()}
	return v, r.done()
}

// q4Price is a joined bid's price and its auction's category (Valid: the
// bid lies within the auction), and the per-auction maximum.
type q4Price struct {
	Category, Price int64
	Valid           bool
}

// q4PriceSerde stores the maximum; Valid is not kept (only valid prices
// are aggregated).
type q4PriceSerde struct{}

func (q4PriceSerde) Serialize(dst []byte, p q4Price) ([]byte, error) {
	return appendInt(appendInt(dst, p.Category), p.Price), nil
}

func (q4PriceSerde) Deserialize(b []byte) (q4Price, error) {
	r := reader{b: b}
	p := q4Price{Category: r.int(), Price: r.int(), Valid: true}
	return p, r.done()
}

// sumCount is a category's sum and count of auction maxima.
type sumCount struct{ Sum, Count int64 }

// avg is Flink's AVG of a BIGINT: the truncated quotient; 0 for no rows.
func (s sumCount) avg() int64 {
	if s.Count == 0 {
		return 0
	}
	return s.Sum / s.Count
}

type sumCountSerde struct{}

func (sumCountSerde) Serialize(dst []byte, s sumCount) ([]byte, error) {
	return appendInt(appendInt(dst, s.Sum), s.Count), nil
}

func (sumCountSerde) Deserialize(b []byte) (sumCount, error) {
	r := reader{b: b}
	s := sumCount{Sum: r.int(), Count: r.int()}
	return s, r.done()
}

type q4Check struct {
	g   *nexmark.Generator
	n   int64
	got *lastValues
}

func (c *q4Check) Add(key, value []byte, _ int64) { c.got.add(key, value) }

// q4Total is a category's sum and count of auction maxima, in the
// reference.
type q4Total struct{ sum, count int64 }

// reference is the SQL over events [0, n): the final maximum of each
// auction with a valid bid, summed and counted per category.
func (c *q4Check) reference() map[int64]q4Total {
	final := map[int64]int64{}    // auction → max price
	category := map[int64]int64{} // auction → category
	validBids(c.g, c.n, func(a *nexmark.Auction, b *nexmark.Bid) {
		if m, ok := final[a.ID]; !ok || b.Price > m {
			final[a.ID], category[a.ID] = b.Price, a.Category
		}
	})
	want := map[int64]q4Total{}
	for id, m := range final {
		s := want[category[id]]
		want[category[id]] = q4Total{s.sum + m, s.count + 1}
	}
	return want
}

// validBids calls fn for each bid among events [0, n) of g that lies
// within its auction (B.dateTime BETWEEN A.dateTime AND A.expires), with
// the auction, whatever their order: the auctions first, then each bid
// against its auction (q4's and q9's references).
func validBids(g *nexmark.Generator, n int64, fn func(a *nexmark.Auction, b *nexmark.Bid)) {
	auctions := map[int64]nexmark.Auction{}
	for i := range n {
		if nexmark.KindOf(i) == nexmark.KindAuction {
			e := g.Event(i)
			auctions[e.Auction.ID] = e.Auction
		}
	}
	for i := range n {
		if nexmark.KindOf(i) != nexmark.KindBid {
			continue
		}
		b := g.Event(i).Bid
		if a, ok := auctions[b.Auction]; ok && a.DateTime <= b.DateTime && b.DateTime <= a.Expires {
			fn(&a, &b)
		}
	}
}

func (c *q4Check) Verify() error {
	if err := c.got.err(); err != nil {
		return err
	}
	want := c.reference()
	var diffs []string
	for _, cat := range slices.Sorted(maps.Keys(want)) {
		w := want[cat]
		avg := w.sum / w.count // Flink's AVG of a BIGINT: truncated
		b, ok := c.got.m[cat]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("category %d: missing, want average %d of %d auctions", cat, avg, w.count))
		case len(b) != 8:
			diffs = append(diffs, fmt.Sprintf("category %d: value of %d bytes, want 8 (serde.Int64)", cat, len(b)))
		case int64(binary.BigEndian.Uint64(b)) != avg:
			diffs = append(diffs, fmt.Sprintf("category %d: average %d, want %d (%d / %d auctions)", cat, int64(binary.BigEndian.Uint64(b)), avg, w.sum, w.count))
		}
	}
	for _, cat := range slices.Sorted(maps.Keys(c.got.m)) {
		if _, ok := want[cat]; !ok {
			diffs = append(diffs, fmt.Sprintf("category %d: not expected (no auction of it has a valid bid)", cat))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("%w:\n\t%s", errDiffers, strings.Join(diffs, "\n\t"))
}
