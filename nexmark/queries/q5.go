package queries

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"slices"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q5 finds the hot items: per hopping window of 10 s advancing by 2 s,
// the auctions with the most bids. The suite's SQL:
//
//	SELECT AuctionBids.auction, AuctionBids.num
//	FROM (SELECT auction, count(*) AS num, window_start AS starttime, window_end AS endtime
//	      FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
//	      GROUP BY auction, window_start, window_end) AS AuctionBids
//	JOIN (SELECT max(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
//	      FROM (…the same counts…) AS CountBids
//	      GROUP BY CountBids.starttime, CountBids.endtime) AS MaxBids
//	ON AuctionBids.starttime = MaxBids.starttime AND AuctionBids.endtime = MaxBids.endtime
//	   AND AuctionBids.num >= MaxBids.maxn
//
// eddy runs that plan (the counts computed once, as Flink reuses the common
// sub-plan): a windowed count of bids per auction, emitting each window
// once, final, when it closes (grace 4 s, the suite's watermark delay),
// kept per 2 s slice (Sliced, as Flink's slicing window operator: a bid
// updates one count, not five; a window's counts are its five slices'
// summed when it closes);
// the counts re-keyed by window start through two repartition topics (as
// Flink sends the shared sub-plan's output through two exchanges): on one,
// the maximum per window — a windowed aggregation too, over tumbling 2 s
// windows of the counts' timestamps (a hopping window's end - 1 ms, so
// each holds one hopping window's counts), final when it closes; on the
// other, a regular join of the counts with their window's maximum on the
// window start (the maximum unique per window: a count waits for it, and
// leaves the join's state when it arrives), keeping the counts that reach
// it.
// The end of the input closes every window (eddy.EndOfInputTime), as
// Flink's end-of-input watermark does in the suite's bounded runs.
//
// Output: append-only, key the window start (serde.Int64; the window is
// [start, start + 10 s)), value Q5Row (the auction and its count),
// timestamp the window's end - 1 ms. Check: a digest of the rows of the
// reference: per window, the counts of the bids that were not late for it
// (stream time, the largest bid time so far, before its start + 14 s),
// and the auctions whose count is the window's maximum.
func q5() Query {
	return Query{
		Name:  "q5",
		Title: "hot items",
		Build: func(t *eddy.Topology, in nexmark.Topics, out string) {
			bids := eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde())
			ws := eddy.WindowedBy(eddy.GroupByKey(bids, serde.Int64()),
				eddy.HoppingWindows(q5Size, q5Advance).WithGrace(q5Grace).Sliced()).Emit(eddy.EmitFinal)
			counts := eddy.Map(eddy.ToStream(eddy.WindowCount(ws, "q5-counts")), func(w eddy.Windowed[int64], n int64) (int64, Q5Row) {
				return w.Start, Q5Row{Auction: w.Key, Num: n}
			})
			// The counts go to the maximum and to the join on topics of
			// their own, as Flink's plan sends the shared counts to both
			// through two exchanges: a sub-topology then never reads the
			// topic it writes, which a bounded run could not end.
			forMax := eddy.Repartition(counts, "q5-by-window", serde.Int64(), Q5RowSerde{})
			forJoin := eddy.Repartition(counts, "q5-counts-by-window", serde.Int64(), Q5RowSerde{})
			maxWindows := eddy.WindowedBy(eddy.GroupByKey(forMax, serde.Int64()),
				eddy.TumblingWindows(q5Advance).WithGrace(q5Grace)).Emit(eddy.EmitFinal)
			maxima := eddy.WindowAggregate(maxWindows, "q5-max", func() int64 { return 0 },
				func(_ int64, c Q5Row, m int64) int64 { return max(m, c.Num) }, nil, serde.Int64())
			maxn := eddy.Map(eddy.ToStream(maxima), func(w eddy.Windowed[int64], m int64) (int64, int64) { return w.Key, m })
			joined := eddy.JoinStreamsRegular(forJoin, maxn, eddy.RegularJoin{}.RightUnique(), "q5-join",
				serde.Int64(), Q5RowSerde{}, serde.Int64(),
				func(_ int64, c Q5Row, maxn int64) q5Joined { return q5Joined{row: c, maxn: maxn} })
			hot := eddy.Map(eddy.Filter(joined, func(_ int64, j q5Joined) bool { return j.row.Num >= j.maxn }),
				func(start int64, j q5Joined) (int64, Q5Row) { return start, j.row })
			eddy.To(hot, out, serde.Int64(), Q5RowSerde{})
		},
		NewCheck: func(g *nexmark.Generator, n int64) Check {
			return &q5Check{g: g, n: n, got: newDigest(maphash.MakeSeed())}
		},
		Result: q5Result(),
	}
}

const (
	q5Size    = 10 * time.Second
	q5Advance = 2 * time.Second
	q5Grace   = 4 * time.Second
)

// Q5Row is q5's result row: an auction and its bid count in a window.
type Q5Row struct{ Auction, Num int64 }

// Q5RowSerde encodes a Q5Row as two varints.
type Q5RowSerde struct{}

func (Q5RowSerde) Serialize(dst []byte, c Q5Row) ([]byte, error) {
	return appendInt(appendInt(dst, c.Auction), c.Num), nil
}

func (Q5RowSerde) Deserialize(b []byte) (Q5Row, error) {
	r := reader{b: b}
	c := Q5Row{Auction: r.int(), Num: r.int()}
	return c, r.done()
}

// q5Joined is a count with its window's maximum.
type q5Joined struct {
	row  Q5Row
	maxn int64
}

type q5Check struct {
	g   *nexmark.Generator
	n   int64
	got *digest
}

// Add digests the row in the group of its window start.
func (c *q5Check) Add(key, value []byte, _ int64) {
	group := int64(-1) // a malformed key is no window of the reference
	if len(key) == 8 {
		group = int64(binary.BigEndian.Uint64(key))
	}
	c.got.add(group, key, value)
}

// reference computes the hot items of every window, all closed by the end
// of the input, keyed by window start, with the auctions sorted. It
// follows the window operator: stream time is the largest bid time so
// far, including the bid at hand; a bid counts in each of its windows that
// has not closed (start + size + grace > stream time); windows are
// epoch-aligned and start at 0 or later.
func (c *q5Check) reference() map[int64]q5Hot {
	size, adv, grace := q5Size.Milliseconds(), q5Advance.Milliseconds(), q5Grace.Milliseconds()
	open := map[int64]map[int64]int64{} // window start → auction → count
	want := map[int64]q5Hot{}
	now := int64(-1)
	closeUpTo := func(now int64) {
		for start, counts := range open {
			if start+size+grace > now {
				continue
			}
			// The max and the auctions that reach it, found apart
			// from the query's own addHot.
			var h q5Hot
			for _, n := range counts {
				h.Count = max(h.Count, n)
			}
			for a, n := range counts {
				if n == h.Count {
					h.Auctions = append(h.Auctions, a)
				}
			}
			slices.Sort(h.Auctions)
			want[start] = h
			delete(open, start)
		}
	}
	for i := range c.n {
		if nexmark.KindOf(i) != nexmark.KindBid {
			continue
		}
		e := c.g.Event(i)
		ts := e.Bid.DateTime
		if ts > now {
			now = ts
			closeUpTo(now) // a handful of open windows
		}
		for start := ts - ts%adv; start > ts-size && start >= 0; start -= adv {
			if start+size+grace <= now {
				continue // late
			}
			m := open[start]
			if m == nil {
				m = map[int64]int64{}
				open[start] = m
			}
			m[e.Bid.Auction]++
		}
	}
	closeUpTo(eddy.EndOfInputTime)
	return want
}

// q5Hot is a window's maximum count and the auctions that reach it, as
// the reference finds them.
type q5Hot struct {
	Count    int64
	Auctions []int64
}

func (c *q5Check) Verify() error {
	want := newDigest(c.got.seed)
	var key, value []byte
	for start, h := range c.reference() {
		key = int64Key(key[:0], start)
		for _, a := range h.Auctions {
			value, _ = Q5RowSerde{}.Serialize(value[:0], Q5Row{Auction: a, Num: h.Count})
			want.add(start, key, value)
		}
	}
	if err := compare(c.got, want, "window"); err != nil {
		return fmt.Errorf("q5: %w", err)
	}
	return nil
}
