package queries

import (
	"strconv"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q14 is "calculation": the bids whose converted price lies in a band,
// with the hour's kind of the bid and the number of 'c's in extra:
//
//	SELECT auction, bidder, 0.908 * price AS price,
//	       CASE WHEN HOUR(dateTime) >= 8 AND HOUR(dateTime) <= 18 THEN 'dayTime'
//	            WHEN HOUR(dateTime) <= 6 OR HOUR(dateTime) >= 20 THEN 'nightTime'
//	            ELSE 'otherTime' END AS bidTimeType,
//	       dateTime, extra, count_char(extra, 'c') AS c_counts
//	FROM bid
//	WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000
//
// The price is a DECIMAL(23, 3) in the SQL: eddy computes it exactly, in
// fixed point, as q1 does: Q14Row.PriceMilli is 908 × price, the SQL's
// price times 1000, and the filter compares that integer with 10^9 and
// 5·10^10. The result's rows show it as the decimal string with three
// places ("908000.000"), exact where a float64 would round. HOUR is
// taken in UTC (the suite runs Flink in UTC). count_char is the suite's
// UDF: the number of bytes of extra's UTF-8 encoding equal to 'c'.
//
// Plan: one MapValues and one Filter on the bids, no state.
//
// Output: key the auction id (serde.Int64), value Q14Row (Q14RowSerde),
// timestamp the bid's. Check: every row the SQL selects, once (a digest),
// computed with integer arithmetic of its own and the standard library's
// UTC hour.
func q14() Query {
	return Query{
		Name:  "q14",
		Title: "calculation",
		Build: func(t *eddy.Topology, in nexmark.Topics, out string) {
			bids := eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde())
			kept := eddy.Filter(bids, func(_ int64, b nexmark.Bid) bool {
				p := toEuroMilli(b.Price)
				return p > q14LowMilli && p < q14HighMilli
			})
			rows := eddy.MapValues(kept, func(_ int64, b nexmark.Bid) Q14Row {
				return Q14Row{
					Auction: b.Auction, Bidder: b.Bidder, PriceMilli: toEuroMilli(b.Price),
					BidTimeType: bidTimeType(b.DateTime), DateTime: b.DateTime,
					Extra: b.Extra, CCounts: countByte(b.Extra, 'c'),
				}
			})
			eddy.To(rows, out, serde.Int64(), Q14RowSerde{})
		},
		NewCheck: newQ14Check,
		Result: Result{
			Columns: []string{"auction", "bidder", "price", "bidTimeType", "dateTime", "extra", "c_counts"},
			Rows: func(_, value []byte, row func(values ...any)) error {
				r, err := Q14RowSerde{}.Deserialize(value)
				if err != nil {
					return err
				}
				row(r.Auction, r.Bidder, decimal3(r.PriceMilli), r.BidTimeType, Timestamp(r.DateTime), r.Extra, r.CCounts)
				return nil
			},
		},
	}
}

// The band of the filter, in thousandths (0.908 × price > 1,000,000 and
// < 50,000,000).
const (
	q14LowMilli  = 1_000_000 * 1000
	q14HighMilli = 50_000_000 * 1000
)

// Q14Row is one row of q14's result.
type Q14Row struct {
	Auction, Bidder int64
	// PriceMilli is the SQL's price, 0.908 × the bid's, times 1000: the
	// DECIMAL(23, 3) as an exact integer.
	PriceMilli int64
	// BidTimeType is "dayTime", "nightTime" or "otherTime".
	BidTimeType string
	DateTime    int64
	Extra       string
	// CCounts is the number of 'c' bytes in Extra.
	CCounts int64
}

// Q14RowSerde encodes a Q14Row: auction, bidder, price, bidTimeType,
// dateTime, extra, c_counts; integers as zig-zag varints, strings as a
// uvarint length and the bytes.
type Q14RowSerde struct{}

// Serialize implements serde.Serde.
func (Q14RowSerde) Serialize(dst []byte, r Q14Row) ([]byte, error) {
	dst = appendInt(dst, r.Auction)
	dst = appendInt(dst, r.Bidder)
	dst = appendInt(dst, r.PriceMilli)
	dst = appendString(dst, r.BidTimeType)
	dst = appendInt(dst, r.DateTime)
	dst = appendString(dst, r.Extra)
	return appendInt(dst, r.CCounts), nil
}

// Deserialize implements serde.Serde.
func (Q14RowSerde) Deserialize(b []byte) (Q14Row, error) {
	r := reader{b: b}
	v := Q14Row{Auction: r.int(), Bidder: r.int(), PriceMilli: r.int(), BidTimeType: r.string(),
		DateTime: r.int(), Extra: r.string(), CCounts: r.int()}
	return v, r.done()
}

// bidTimeType is the SQL's CASE on the UTC hour of ts (ms since the epoch,
// non-negative as event times are).
func bidTimeType(ts int64) string {
	h := ts / int64(time.Hour/time.Millisecond) % 24
	switch {
	case h >= 8 && h <= 18:
		return "dayTime"
	case h <= 6 || h >= 20:
		return "nightTime"
	}
	return "otherTime"
}

// countByte is the suite's count_char UDF: how many bytes of s are c.
func countByte(s string, c byte) int64 {
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			n++
		}
	}
	return n
}

// decimal3 formats v/1000 exactly, with three places: 1234567 → "1234.567".
func decimal3(v int64) string {
	var b [24]byte
	s := b[:0]
	if v < 0 {
		s = append(s, '-')
		v = -v // the prices are far from math.MinInt64
	}
	s = strconv.AppendInt(s, v/1000, 10)
	s = append(s, '.', byte('0'+v/100%10), byte('0'+v/10%10), byte('0'+v%10))
	return string(s)
}

// newQ14Check digests the reference's rows: the filter and price with its
// own integer arithmetic (price × 0.908 in [10^6, 5·10^7] exclusive is
// price × 908 in (10^9, 5·10^10)), the hour from time.Time in UTC, the
// 'c's counted by a range over the bytes.
func newQ14Check(g *nexmark.Generator, n int64) Check {
	return newAppendCheck(func(add func(key, value []byte, ts int64)) {
		var k, v []byte
		for i := range n {
			if nexmark.KindOf(i) != nexmark.KindBid {
				continue
			}
			e := g.Event(i)
			b := &e.Bid
			price := b.Price * 908
			if price <= 1e9 || price >= 5e10 {
				continue
			}
			kind := "otherTime"
			if h := time.UnixMilli(b.DateTime).UTC().Hour(); 8 <= h && h <= 18 {
				kind = "dayTime"
			} else if h <= 6 || 20 <= h {
				kind = "nightTime"
			}
			cs := int64(0)
			for _, c := range []byte(b.Extra) {
				if c == 'c' {
					cs++
				}
			}
			k = int64Key(k[:0], b.Auction)
			v, _ = Q14RowSerde{}.Serialize(v[:0], Q14Row{Auction: b.Auction, Bidder: b.Bidder, PriceMilli: price,
				BidTimeType: kind, DateTime: b.DateTime, Extra: b.Extra, CCounts: cs})
			add(k, v, b.DateTime)
		}
	})
}
