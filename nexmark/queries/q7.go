package queries

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"iter"
	"math"
	"slices"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q7 is "highest bid": the bids whose price is the highest of a 10 s
// tumbling window of event time:
//
//	SELECT B.auction, B.price, B.bidder, B.dateTime, B.extra
//	FROM bid B
//	JOIN (SELECT MAX(price) AS maxprice, window_end as dateTime
//	      FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
//	      GROUP BY window_start, window_end) B1
//	ON B.price = B1.maxprice
//	WHERE B.dateTime BETWEEN B1.dateTime - INTERVAL '10' SECOND AND B1.dateTime
//
// BETWEEN is inclusive at both ends, so a bid at exactly a window's end
// that has that window's maximum price is reported for that window too,
// besides (if it has its own window's maximum) for its own: such a bid
// gives two equal rows.
//
// Plan, as the SQL plans it: the windowed maximum, then a join of the bids
// with the maxima on price and time. The maximum is over all bids of a
// window, so the prices are re-keyed to one key (as Flink's global
// aggregation gathers them) and a windowed aggregation keeps each window's
// highest price, emitted once the window closes (EmitFinal, grace 4 s,
// Flink's watermark delay), at the window's last millisecond, end - 1. The
// maxima and the bids, both keyed by price, meet in a stream-stream join
// (JoinStreams) whose window takes a maximum at end - 1 to the bids from
// end - 10 s to end inclusive: Before(10 s - 1 ms), After(1 ms). Each
// match is one output record keyed by the bid's auction.
//
// The join keeps bids 10 s plus its grace, 10 s: a maximum reaches it as
// its window closes, 4 s after the window's end plus the step of stream
// time that closed it; a bid reaches it in input order. The SQL's join is
// a regular one that keeps every bid; eddy's drops a bid that comes more
// than 20 s behind stream time (10 s - 1 ms + 10 s grace), and a maximum
// that comes more than 10 s after its window's end. A bid late for the
// aggregation's window (more than 4 s after its window's end) does not
// count towards the maximum, but still joins, as in Flink, while the join
// takes it.
//
// Reference (q7Check): the same, by maps and loops over the events in
// input order: per window the maximum of the bids that were not late (a
// bid is late when its window's end + 4 s is at or before the largest bid
// timestamp so far, the aggregation's stream time), each window closed at
// the first stream time at or past its end + 4 s (or by the end of the
// input), and the pairs of a bid and a window end whose maximum is the
// bid's price and lies in [bid time, bid time + 10 s], less the bids and
// maxima late for the join by the bounds above.
func q7() Query {
	return Query{Name: "q7", Title: "highest bid", Build: buildQ7, NewCheck: newQ7Check, Result: q7Result()}
}

const (
	q7Size  = 10 * time.Second
	q7Grace = 4 * time.Second
	// q7JoinGrace is the join's grace: see q7's doc.
	q7JoinGrace = 10 * time.Second
)

func buildQ7(t *eddy.Topology, in nexmark.Topics, out string) {
	bids := eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde())
	prices := eddy.Map(bids, func(_ int64, b nexmark.Bid) (int64, int64) { return 0, b.Price })
	g := eddy.GroupByKey(eddy.Repartition(prices, "q7-prices", serde.Int64(), serde.Int64()), serde.Int64())
	ws := eddy.WindowedBy(g, eddy.TumblingWindows(q7Size).WithGrace(q7Grace)).Emit(eddy.EmitFinal)
	maxima := eddy.WindowAggregate(ws, "q7-max", func() int64 { return math.MinInt64 },
		func(_ int64, price, top int64) int64 { return max(price, top) }, nil, serde.Int64())
	// Keyed by the maximum price, valued by the window's end.
	byPrice := eddy.Map(eddy.ToStream(maxima), func(w eddy.Windowed[int64], top int64) (int64, int64) { return top, w.Window.End })
	bidsByPrice := eddy.Map(bids, func(_ int64, b nexmark.Bid) (int64, Q7Row) {
		return b.Price, Q7Row{Auction: b.Auction, Price: b.Price, Bidder: b.Bidder, DateTime: b.DateTime, Extra: b.Extra}
	})
	jw := eddy.JoinWindowsOf(0).Before(q7Size - time.Millisecond).After(time.Millisecond).WithGrace(q7JoinGrace)
	joined := eddy.JoinStreams(byPrice, bidsByPrice, jw, eddy.InnerJoin, "q7-join", serde.Int64(), serde.Int64(), Q7RowSerde{},
		func(_ int64, _ int64, _ bool, b Q7Row, _ bool) Q7Row { return b })
	res := eddy.Map(joined, func(_ int64, b Q7Row) (int64, Q7Row) { return b.Auction, b })
	eddy.To(res, out, serde.Int64(), Q7RowSerde{})
}

// Q7Row is what q7 reports of a bid.
type Q7Row struct {
	Auction, Price, Bidder, DateTime int64
	Extra                            string
}

func appendQ7Bid(dst []byte, b *Q7Row) []byte {
	dst = binary.AppendVarint(dst, b.Auction)
	dst = binary.AppendVarint(dst, b.Price)
	dst = binary.AppendVarint(dst, b.Bidder)
	dst = binary.AppendVarint(dst, b.DateTime)
	return append(dst, b.Extra...)
}

// Q7RowSerde encodes a Q7Row: auction, price, bidder and dateTime as
// varints, then the extra bytes.
type Q7RowSerde struct{}

func (Q7RowSerde) Serialize(dst []byte, b Q7Row) ([]byte, error) { return appendQ7Bid(dst, &b), nil }

func (Q7RowSerde) Deserialize(b []byte) (Q7Row, error) {
	r := reader{b: b}
	v := Q7Row{Auction: r.int(), Price: r.int(), Bidder: r.int(), DateTime: r.int()}
	v.Extra = r.rest()
	return v, r.done()
}

// q7Check digests the output per window (of the bid's dateTime).
type q7Check struct {
	// bids are the input's bids in input order.
	bids iter.Seq[nexmark.Bid]
	seed maphash.Seed
	got  *digest
}

func newQ7Check(g *nexmark.Generator, n int64) Check {
	return newQ7CheckOf(func(yield func(nexmark.Bid) bool) {
		for i := int64(0); i < n; i++ {
			if nexmark.KindOf(i) == nexmark.KindBid && !yield(g.Event(i).Bid) {
				return
			}
		}
	})
}

// newQ7CheckOf is the check of q7's output over bids.
func newQ7CheckOf(bids iter.Seq[nexmark.Bid]) *q7Check {
	seed := maphash.MakeSeed()
	return &q7Check{bids: bids, seed: seed, got: newDigest(seed)}
}

func (c *q7Check) Add(key, value []byte, _ int64) {
	r := reader{b: value}
	r.int()
	r.int()
	r.int()
	group := windowStart(r.int(), q7Size.Milliseconds())
	if r.err != nil {
		group = -1 // no window of the reference: reported as extra
	}
	c.got.add(group, key, value)
}

func (c *q7Check) Verify() error {
	size, grace, joinGrace := q7Size.Milliseconds(), q7Grace.Milliseconds(), q7JoinGrace.Milliseconds()
	// The aggregation: per window start, the highest price of the bids
	// that were not late; and the stream times the bids made, in order.
	maxima := make(map[int64]int64)
	var times []int64
	streamTime := int64(-1)
	for b := range c.bids {
		if b.DateTime > streamTime {
			streamTime = b.DateTime
			times = append(times, streamTime)
		}
		start := windowStart(b.DateTime, size)
		if start+size+grace <= streamTime {
			continue // late: its window closed before it arrived
		}
		if m, ok := maxima[start]; !ok || b.Price > m {
			maxima[start] = b.Price
		}
	}
	// The maxima that reach the join, by window end: a window closes at
	// the first stream time at or past its end + grace, or at the end of
	// the input, when the join's stream time is the last bid's; its
	// maximum is late for the join past its end + the join's grace.
	closed := eddy.EndOfInputTime // the end of the input closes every window
	joinable := make(map[int64]int64)
	for start, m := range maxima {
		end := start + size
		if end+grace > closed {
			continue // not closed when the input ended
		}
		at := streamTime
		if k, ok := slices.BinarySearch(times, end+grace); ok || k < len(times) {
			at = times[k]
		}
		if end+joinGrace < at {
			continue
		}
		joinable[end] = m
	}
	// The join: each bid the join takes, with every window end in
	// [bid time, bid time + size] whose maximum is the bid's price.
	want := newDigest(c.seed)
	var key, value []byte
	streamTime = -1
	for b := range c.bids {
		streamTime = max(streamTime, b.DateTime)
		if b.DateTime+size-1+joinGrace < streamTime {
			continue // late for the join
		}
		for end := windowStart(b.DateTime, size) + size; end >= b.DateTime && end <= b.DateTime+size; end -= size {
			if m, ok := joinable[end]; !ok || m != b.Price {
				continue
			}
			row := Q7Row{Auction: b.Auction, Price: b.Price, Bidder: b.Bidder, DateTime: b.DateTime, Extra: b.Extra}
			key = binary.BigEndian.AppendUint64(key[:0], uint64(row.Auction))
			value = appendQ7Bid(value[:0], &row)
			want.add(windowStart(b.DateTime, size), key, value)
		}
	}
	if err := compare(c.got, want, "window"); err != nil {
		return fmt.Errorf("q7: %w", err)
	}
	return nil
}
