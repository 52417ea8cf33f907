package queries

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q17 is "auction statistics report": per auction and day, the number of
// bids in all and in three price ranks, and the price's min, max, average
// and sum:
//
//	SELECT auction, DATE_FORMAT(dateTime, 'yyyy-MM-dd') AS day,
//	       count(*) AS total_bids,
//	       count(*) FILTER (WHERE price < 10000) AS rank1_bids,
//	       count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
//	       count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
//	       min(price) AS min_price, max(price) AS max_price,
//	       avg(price) AS avg_price, sum(price) AS sum_price
//	FROM bid
//	GROUP BY auction, DATE_FORMAT(dateTime, 'yyyy-MM-dd')
//
// An unbounded group aggregation: every bid updates its group's row, an
// updating result. The day is UTC; AVG of a BIGINT is the sum divided by
// the count, truncated, as in Flink.
//
// Plan: the bids are keyed by auction already, which partitions the
// groups, so the aggregation runs without a repartition: eddy.Aggregate
// per auction, whose aggregate holds the statistics of each day the
// auction has bids (almost always one; two for an auction that spans
// midnight, or a bid delayed across it). Each update of an auction
// writes the rows of all its days: the table cache forwards only the
// latest update per auction in a commit, and a row of another day must
// not be lost with the updates it skipped. As a table, the output is the
// SQL's result: the last record per (auction, day) is the group's row.
// The state is unbounded, as Flink's without a state TTL.
//
// Output: key Q17Key (Q17KeySerde), value Q17Row (Q17RowSerde), timestamp
// the latest bid's of the auction. Check: the last row per key against
// the SQL's result, computed from the events with maps.
func q17() Query {
	return Query{
		Name:  "q17",
		Title: "auction statistics report",
		Build: func(t *eddy.Topology, in nexmark.Topics, out string) {
			bids := eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde())
			stats := eddy.Aggregate(eddy.GroupByKey(bids, serde.Int64()), "q17-stats",
				func() q17Auction { return q17Auction{} },
				func(_ int64, b nexmark.Bid, a q17Auction) q17Auction { a.add(b.Price, b.DateTime); return a },
				q17AuctionSerde{})
			rows := eddy.FlatMap(eddy.ToStream(stats), func(dst []eddy.KeyValue[Q17Key, Q17Row], auction int64, a q17Auction) []eddy.KeyValue[Q17Key, Q17Row] {
				a.eachDay(func(d *q17Day) {
					r := d.row(auction)
					dst = append(dst, eddy.KeyValue[Q17Key, Q17Row]{Key: Q17Key{Auction: auction, Day: r.Day}, Value: r})
				})
				return dst
			})
			eddy.To(rows, out, Q17KeySerde{}, Q17RowSerde{})
		},
		NewCheck: func(g *nexmark.Generator, n int64) Check { return &q17Check{g: g, n: n, got: newLastRows()} },
		Result: Result{
			Columns: []string{"auction", "day", "total_bids", "rank1_bids", "rank2_bids", "rank3_bids", "min_price", "max_price", "avg_price", "sum_price"},
			Upsert:  true,
			Rows: func(_, value []byte, row func(values ...any)) error {
				r, err := Q17RowSerde{}.Deserialize(value)
				if err != nil {
					return err
				}
				row(r.Auction, r.Day, r.TotalBids, r.Rank1Bids, r.Rank2Bids, r.Rank3Bids, r.MinPrice, r.MaxPrice, r.AvgPrice, r.SumPrice)
				return nil
			},
		},
	}
}

// The price ranks of q15, q16 and q17: rank 1 below rank2Price, rank 2
// from it to below rank3Price, rank 3 from rank3Price up.
const (
	rank2Price = 10_000
	rank3Price = 1_000_000
)

// utcDay is the day of ts (ms since the epoch) in UTC, as days since
// 1970-01-01: what DATE_FORMAT(dateTime, 'yyyy-MM-dd') tells apart,
// without a string per record.
func utcDay(ts int64) int64 {
	const day = int64(24 * time.Hour / time.Millisecond)
	d := ts / day
	if ts%day < 0 {
		d--
	}
	return d
}

// formatDay is DATE_FORMAT's 'yyyy-MM-dd' of a utcDay.
func formatDay(d int64) string {
	return time.Unix(d*24*60*60, 0).UTC().Format(time.DateOnly)
}

// q17Day is one (auction, day) group's statistics.
type q17Day struct {
	day, total, rank1, rank2, rank3, min, max, sum int64
}

func (d *q17Day) add(price int64) {
	switch {
	case price < rank2Price:
		d.rank1++
	case price < rank3Price:
		d.rank2++
	default:
		d.rank3++
	}
	if d.total == 0 || price < d.min {
		d.min = price
	}
	if d.total == 0 || price > d.max {
		d.max = price
	}
	d.total++
	d.sum += price
}

func (d *q17Day) row(auction int64) Q17Row {
	return Q17Row{Auction: auction, Day: formatDay(d.day), TotalBids: d.total, Rank1Bids: d.rank1, Rank2Bids: d.rank2, Rank3Bids: d.rank3,
		MinPrice: d.min, MaxPrice: d.max, AvgPrice: d.sum / d.total, SumPrice: d.sum}
}

// q17Auction is the aggregate of one auction: its days' statistics. The
// first day is held inline, so the usual auction of one day decodes
// without allocating; the others, rare, in more.
type q17Auction struct {
	first q17Day
	more  []q17Day
}

// eachDay calls fn with each of the auction's days.
func (a *q17Auction) eachDay(fn func(d *q17Day)) {
	if a.first.total == 0 {
		return
	}
	fn(&a.first)
	for i := range a.more {
		fn(&a.more[i])
	}
}

func (a *q17Auction) add(price, ts int64) {
	day := utcDay(ts)
	switch {
	case a.first.total == 0:
		a.first = q17Day{day: day}
		a.first.add(price)
		return
	case a.first.day == day:
		a.first.add(price)
		return
	}
	for i := range a.more {
		if a.more[i].day == day {
			a.more[i].add(price)
			return
		}
	}
	d := q17Day{day: day}
	d.add(price)
	a.more = append(a.more, d)
}

// q17AuctionSerde stores an auction's days one after the other, each as
// its eight integers (day, total, the three ranks, min, max, sum).
type q17AuctionSerde struct{}

func (q17AuctionSerde) Serialize(dst []byte, a q17Auction) ([]byte, error) {
	a.eachDay(func(d *q17Day) {
		for _, v := range [...]int64{d.day, d.total, d.rank1, d.rank2, d.rank3, d.min, d.max, d.sum} {
			dst = appendInt(dst, v)
		}
	})
	return dst, nil
}

func (q17AuctionSerde) Deserialize(b []byte) (q17Auction, error) {
	r := reader{b: b}
	var a q17Auction
	for i := 0; len(r.b) > 0 && r.err == nil; i++ {
		d := q17Day{day: r.int(), total: r.int(), rank1: r.int(), rank2: r.int(), rank3: r.int(), min: r.int(), max: r.int(), sum: r.int()}
		if d.total <= 0 {
			r.fail("a day with no bids")
		}
		if i == 0 {
			a.first = d
		} else {
			a.more = append(a.more, d)
		}
	}
	return a, r.done()
}

// Q17Key is the key of q17's output: the group.
type Q17Key struct {
	Auction int64
	// Day is the UTC day, "2026-01-01".
	Day string
}

// Q17KeySerde encodes a Q17Key as the auction (8 bytes, big-endian, as
// serde.Int64) followed by the day's bytes.
type Q17KeySerde struct{}

// Serialize implements serde.Serde.
func (Q17KeySerde) Serialize(dst []byte, k Q17Key) ([]byte, error) {
	return append(binary.BigEndian.AppendUint64(dst, uint64(k.Auction)), k.Day...), nil
}

// Deserialize implements serde.Serde.
func (Q17KeySerde) Deserialize(b []byte) (Q17Key, error) {
	if len(b) < 8 {
		return Q17Key{}, fmt.Errorf("%w: q17 key of %d bytes, want at least 8", errCorrupt, len(b))
	}
	return Q17Key{Auction: int64(binary.BigEndian.Uint64(b)), Day: string(b[8:])}, nil
}

// Q17Row is one row of q17's result.
type Q17Row struct {
	Auction int64
	// Day is the UTC day, "2026-01-01".
	Day                                        string
	TotalBids, Rank1Bids, Rank2Bids, Rank3Bids int64
	MinPrice, MaxPrice, AvgPrice, SumPrice     int64
}

// Q17RowSerde encodes a Q17Row: the auction, the day (a uvarint length
// and the bytes), then the eight statistics in the SQL's order, integers
// as zig-zag varints.
type Q17RowSerde struct{}

// Serialize implements serde.Serde.
func (Q17RowSerde) Serialize(dst []byte, r Q17Row) ([]byte, error) {
	dst = appendString(appendInt(dst, r.Auction), r.Day)
	for _, v := range [...]int64{r.TotalBids, r.Rank1Bids, r.Rank2Bids, r.Rank3Bids, r.MinPrice, r.MaxPrice, r.AvgPrice, r.SumPrice} {
		dst = appendInt(dst, v)
	}
	return dst, nil
}

// Deserialize implements serde.Serde.
func (Q17RowSerde) Deserialize(b []byte) (Q17Row, error) {
	r := reader{b: b}
	v := Q17Row{Auction: r.int(), Day: r.string(), TotalBids: r.int(), Rank1Bids: r.int(), Rank2Bids: r.int(), Rank3Bids: r.int(),
		MinPrice: r.int(), MaxPrice: r.int(), AvgPrice: r.int(), SumPrice: r.int()}
	return v, r.done()
}

// lastRows keeps the last value per key of an updating result whose keys
// are any bytes.
type lastRows struct{ m map[string][]byte }

func newLastRows() *lastRows { return &lastRows{m: make(map[string][]byte)} }

func (l *lastRows) add(key, value []byte) {
	if v, ok := l.m[string(key)]; ok {
		l.m[string(key)] = append(v[:0], value...)
		return
	}
	l.m[string(key)] = append([]byte(nil), value...)
}

// compareRows compares the last rows with want (encoded key → encoded
// value), describing up to five differences with describe(key, value).
func (l *lastRows) compare(want map[string][]byte, describe func(key, value []byte) string) error {
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		got, ok := l.m[k]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("missing %s", describe([]byte(k), want[k])))
		case string(got) != string(want[k]):
			diffs = append(diffs, fmt.Sprintf("%s, want %s", describe([]byte(k), got), describe([]byte(k), want[k])))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(l.m)) {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("unexpected %s", describe([]byte(k), l.m[k])))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("… %d differences in all", len(diffs)))
	}
	return fmt.Errorf("%w:\n\t%s", errDiffers, strings.Join(diffs, "\n\t"))
}

type q17Check struct {
	g   *nexmark.Generator
	n   int64
	got *lastRows
}

func (c *q17Check) Add(key, value []byte, _ int64) { c.got.add(key, value) }

// Verify computes the SQL's groups with a map from (auction, the day as
// time.Format writes it) to the group's prices.
func (c *q17Check) Verify() error {
	type group struct {
		auction int64
		day     string
	}
	type stats struct{ total, rank1, rank2, rank3, min, max, sum int64 }
	groups := map[group]*stats{}
	for i := range c.n {
		if nexmark.KindOf(i) != nexmark.KindBid {
			continue
		}
		b := c.g.Event(i).Bid
		k := group{b.Auction, time.UnixMilli(b.DateTime).UTC().Format("2006-01-02")}
		s := groups[k]
		if s == nil {
			s = &stats{min: b.Price, max: b.Price}
			groups[k] = s
		}
		s.total++
		s.sum += b.Price
		s.min, s.max = min(s.min, b.Price), max(s.max, b.Price)
		if b.Price < 10000 {
			s.rank1++
		} else if b.Price < 1000000 {
			s.rank2++
		} else {
			s.rank3++
		}
	}
	want := make(map[string][]byte, len(groups))
	for k, s := range groups {
		key, _ := Q17KeySerde{}.Serialize(nil, Q17Key{Auction: k.auction, Day: k.day})
		want[string(key)], _ = Q17RowSerde{}.Serialize(nil, Q17Row{Auction: k.auction, Day: k.day, TotalBids: s.total,
			Rank1Bids: s.rank1, Rank2Bids: s.rank2, Rank3Bids: s.rank3, MinPrice: s.min, MaxPrice: s.max, AvgPrice: s.sum / s.total, SumPrice: s.sum})
	}
	return c.got.compare(want, func(key, value []byte) string {
		k, kerr := Q17KeySerde{}.Deserialize(key)
		r, err := Q17RowSerde{}.Deserialize(value)
		if err = errors.Join(kerr, err); err != nil {
			return fmt.Sprintf("undecodable row %x → %x (%v)", key, value, err)
		}
		return fmt.Sprintf("auction %d day %s: %+v", k.Auction, k.Day, r)
	})
}
