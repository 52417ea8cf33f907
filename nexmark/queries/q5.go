package queries

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q5 finds the hot items: per hopping window of 10 s advancing by 2 s,
// the auction(s) with the most bids (the suite's SQL counts bids per
// auction and window, takes the window's maximum and keeps the auctions
// with num >= maxn).
//
// Two stages, as a Kafka Streams user would write it: a windowed count of
// bids per auction, emitting each window once, final, when it closes
// (grace 4 s, the suite's watermark delay; the generator delays events by
// at most 3 s, so no bid is late); then the counts re-keyed by window
// start through a repartition topic, where an aggregation keeps each
// window's maximum count and the auctions that reach it. The second stage
// forwards every update, so its last record per window is the result.
// The end of the input closes every window (eddy.EndOfInputTime), as
// Flink's end-of-input watermark does in the suite's bounded runs.
//
// Output: key the window start (serde.Int64; the window is [start, start
// + 10 s)), value HotItems (the maximum count and the auctions with it),
// timestamp the window's end - 1 ms. Check: the last value per window
// against the reference: per window, the maximum count over the bids
// that were not late for it (stream time, the largest bid time so far,
// before its start + 14 s), and its auctions.
func q5() Query {
	return Query{
		Name:  "q5",
		Title: "hot items",
		Build: func(t *eddy.Topology, in nexmark.Topics, out string) {
			bids := eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde())
			ws := eddy.WindowedBy(eddy.GroupByKey(bids, serde.Int64()),
				eddy.HoppingWindows(q5Size, q5Advance).WithGrace(q5Grace)).Emit(eddy.EmitFinal)
			counts := eddy.ToStream(eddy.WindowCount(ws, "q5-counts"))
			byWindow := eddy.Map(counts, func(w eddy.Windowed[int64], n int64) (int64, auctionCount) {
				return w.Start, auctionCount{Auction: w.Key, Count: n}
			})
			byWindow = eddy.Repartition(byWindow, "q5-by-window", serde.Int64(), auctionCountSerde{})
			hot := eddy.Aggregate(eddy.GroupByKey(byWindow, serde.Int64()), "q5-hot",
				func() HotItems { return HotItems{} }, addHot, HotItemsSerde{})
			eddy.To(eddy.ToStream(hot), out, serde.Int64(), HotItemsSerde{})
		},
		NewCheck: func(g *nexmark.Generator, n int64) Check {
			return &q5Check{g: g, n: n, got: newLastValues()}
		},
		Result: q5Result(),
	}
}

const (
	q5Size    = 10 * time.Second
	q5Advance = 2 * time.Second
	q5Grace   = 4 * time.Second
)

// auctionCount is one auction's bid count in a window.
type auctionCount struct{ Auction, Count int64 }

type auctionCountSerde struct{}

func (auctionCountSerde) Serialize(dst []byte, c auctionCount) ([]byte, error) {
	return appendInt(appendInt(dst, c.Auction), c.Count), nil
}

func (auctionCountSerde) Deserialize(b []byte) (auctionCount, error) {
	r := reader{b: b}
	c := auctionCount{Auction: r.int(), Count: r.int()}
	return c, r.done()
}

// HotItems is a window's maximum bid count and the auctions that have it,
// in the order they were counted.
type HotItems struct {
	Count    int64
	Auctions []int64
}

func addHot(_ int64, c auctionCount, h HotItems) HotItems {
	switch {
	case c.Count > h.Count:
		return HotItems{Count: c.Count, Auctions: append(h.Auctions[:0], c.Auction)}
	case c.Count == h.Count:
		h.Auctions = append(h.Auctions, c.Auction)
	}
	return h
}

// HotItemsSerde encodes the count, the number of auctions and the
// auctions.
type HotItemsSerde struct{}

func (HotItemsSerde) Serialize(dst []byte, h HotItems) ([]byte, error) {
	dst = appendInt(dst, h.Count)
	dst = appendInt(dst, int64(len(h.Auctions)))
	for _, a := range h.Auctions {
		dst = appendInt(dst, a)
	}
	return dst, nil
}

func (HotItemsSerde) Deserialize(b []byte) (HotItems, error) {
	r := reader{b: b}
	h := HotItems{Count: r.int()}
	n := r.int()
	if n < 0 || n > int64(len(r.b)) { // each auction takes at least a byte
		r.fail(fmt.Sprintf("%d auctions", n))
		n = 0
	}
	if n > 0 {
		h.Auctions = make([]int64, n)
		for i := range h.Auctions {
			h.Auctions[i] = r.int()
		}
	}
	return h, r.done()
}

type q5Check struct {
	g   *nexmark.Generator
	n   int64
	got *lastValues
}

func (c *q5Check) Add(key, value []byte, _ int64) { c.got.add(key, value) }

// reference computes the hot items of every window, all closed by the end
// of the input, keyed by window start, with the auctions sorted. It
// follows the window operator: stream time is the largest bid time so
// far, including the bid at hand; a bid counts in each of its windows that
// has not closed (start + size + grace > stream time); windows are
// epoch-aligned and start at 0 or later.
func (c *q5Check) reference() map[int64]HotItems {
	size, adv, grace := q5Size.Milliseconds(), q5Advance.Milliseconds(), q5Grace.Milliseconds()
	open := map[int64]map[int64]int64{} // window start → auction → count
	want := map[int64]HotItems{}
	now := int64(-1)
	closeUpTo := func(now int64) {
		for start, counts := range open {
			if start+size+grace > now {
				continue
			}
			// The max and the auctions that reach it, found apart
			// from the query's own addHot.
			var h HotItems
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

func (c *q5Check) Verify() error {
	if err := c.got.err(); err != nil {
		return err
	}
	want := c.reference()
	var diffs []string
	for _, start := range slices.Sorted(maps.Keys(want)) {
		w := want[start]
		b, ok := c.got.m[start]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("window %d: missing, want %v", start, w))
			continue
		}
		h, err := HotItemsSerde{}.Deserialize(b)
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("window %d: %v", start, err))
			continue
		}
		slices.Sort(h.Auctions)
		if h.Count != w.Count || !slices.Equal(h.Auctions, w.Auctions) {
			diffs = append(diffs, fmt.Sprintf("window %d: got %v, want %v", start, h, w))
		}
	}
	for _, start := range slices.Sorted(maps.Keys(c.got.m)) {
		if _, ok := want[start]; !ok {
			diffs = append(diffs, fmt.Sprintf("window %d: not expected (not closed, or no bids)", start))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("… %d more", len(diffs)-5))
	}
	return fmt.Errorf("%w (%d windows, want %d):\n\t%s", errDiffers, len(c.got.m), len(want), strings.Join(diffs, "\n\t"))
}
