package queries

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"strings"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q19 keeps the ten highest bids of each auction, ranked:
//
//	SELECT * FROM
//	(SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rank_number
//	 FROM bid)
//	WHERE rank_number <= 10
//
// The result is a table: a bid that enters an auction's ten shifts the
// ranks below it down and pushes the tenth out, which Flink writes as
// retractions and insertions of rows keyed by (auction, rank). eddy writes
// one record per change of an auction's ten: key the auction, value its
// whole list, best first (an upsert of the auction, which replaces its
// rows). Against a row per rank, a change costs one record rather than
// one per shifted rank (up to ten), the table cache collapses an
// auction's changes within a commit into one, and the list is TopN's own
// table, written as it is; the price is bytes: a list re-sends the ranks
// above the new bid too, about twice the bytes of the shifted rows on
// average. Flink breaks ties of price arbitrarily; eddy ranks, of bids
// with the same price, the earlier first, then by TopN's rule (the
// smaller encoding, nexmark.BidSerde).
//
// Plan: eddy.TopN with n = 10 over the bids grouped by their key, the
// auction (no repartition). A bid that does not beat an auction's tenth
// costs one decode and gives no output.
//
// Output: key the auction (serde.Int64), value Q19TopSerde (the bids,
// rank 1 first), timestamp the bid that changed the list. Check: a 64-bit
// hash of the last value per auction against the reference's ten first
// bids of each auction under the same order.
func q19() Query {
	return Query{
		Name:  "q19",
		Title: "auction top-10 price",
		Build: func(t *eddy.Topology, in nexmark.Topics, out string) {
			bids := eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde())
			top := eddy.TopN(eddy.GroupByKey(bids, serde.Int64()), "q19-top", q19N, q19Order, nexmark.BidSerde())
			eddy.To(eddy.ToStream(top), out, serde.Int64(), Q19TopSerde())
		},
		NewCheck: func(g *nexmark.Generator, n int64) Check {
			return &q19Check{g: g, n: n, seed: maphash.MakeSeed(), got: make(map[int64]uint64)}
		},
		Result: Result{
			Columns: []string{"auction", "bidder", "price", "channel", "url", "dateTime", "extra", "rank_number"},
			Upsert:  true,
			Rows: func(_, value []byte, row func(values ...any)) error {
				top, err := Q19TopSerde().Deserialize(value)
				if err != nil {
					return err
				}
				for i, b := range top {
					row(b.Auction, b.Bidder, b.Price, b.Channel, b.URL, Timestamp(b.DateTime), b.Extra, int64(i+1))
				}
				return nil
			},
		},
	}
}

const q19N = 10

// q19Order ranks the highest price first, and of equal prices the
// earlier bid.
func q19Order(a, b nexmark.Bid) int {
	if c := cmp.Compare(b.Price, a.Price); c != 0 {
		return c
	}
	return cmp.Compare(a.DateTime, b.DateTime)
}

// Q19TopSerde encodes an auction's ten highest bids, rank 1 first:
// serde.List of nexmark.BidSerde (a uvarint count, then each bid's
// uvarint length and encoding).
func Q19TopSerde() serde.Serde[[]nexmark.Bid] { return serde.List(nexmark.BidSerde()) }

// q19Check keeps a hash of the last value per auction.
type q19Check struct {
	g       *nexmark.Generator
	n       int64
	seed    maphash.Seed
	got     map[int64]uint64
	badKeys int
}

func (c *q19Check) Add(key, value []byte, _ int64) {
	if len(key) != 8 {
		c.badKeys++
		return
	}
	c.got[int64(binary.BigEndian.Uint64(key))] = maphash.Bytes(c.seed, value)
}

// q19Ranked is a bid of the reference: its event index, price and time.
type q19Ranked struct{ i, price, dateTime int64 }

// reference returns the ten highest bids of each auction, best first:
// by price, descending; then time, ascending; then encoding (the bids are
// generated again for that, which is rare).
func (c *q19Check) reference() map[int64][]q19Ranked {
	top := map[int64][]q19Ranked{}
	var ea, eb []byte
	higher := func(a, b q19Ranked) bool {
		if a.price != b.price {
			return a.price > b.price
		}
		if a.dateTime != b.dateTime {
			return a.dateTime < b.dateTime
		}
		ea, _ = nexmark.BidSerde().Serialize(ea[:0], c.g.Event(a.i).Bid)
		eb, _ = nexmark.BidSerde().Serialize(eb[:0], c.g.Event(b.i).Bid)
		return bytes.Compare(ea, eb) < 0
	}
	for i := range c.n {
		if nexmark.KindOf(i) != nexmark.KindBid {
			continue
		}
		b := c.g.Event(i).Bid
		r := q19Ranked{i: i, price: b.Price, dateTime: b.DateTime}
		l := top[b.Auction]
		at := len(l)
		for at > 0 && higher(r, l[at-1]) {
			at--
		}
		if at >= q19N {
			continue
		}
		l = slices.Insert(l, at, r)
		top[b.Auction] = l[:min(len(l), q19N)]
	}
	return top
}

func (c *q19Check) Verify() error {
	if c.badKeys > 0 {
		return fmt.Errorf("%d output records had a key that is not 8 bytes (serde.Int64)", c.badKeys)
	}
	want := c.reference()
	var diffs []string
	var enc, bid []byte
	for _, a := range slices.Sorted(maps.Keys(want)) {
		// The list as Q19TopSerde writes it: a count, then each bid's
		// length and encoding.
		enc = binary.AppendUvarint(enc[:0], uint64(len(want[a])))
		for _, r := range want[a] {
			bid, _ = nexmark.BidSerde().Serialize(bid[:0], c.g.Event(r.i).Bid)
			enc = append(binary.AppendUvarint(enc, uint64(len(bid))), bid...)
		}
		h, ok := c.got[a]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("auction %d: missing", a))
		case h != maphash.Bytes(c.seed, enc):
			var ranks []string
			for _, r := range want[a] {
				ranks = append(ranks, fmt.Sprintf("event %d (price %d)", r.i, r.price))
			}
			diffs = append(diffs, fmt.Sprintf("auction %d: another list than the ten highest bids, %s", a, strings.Join(ranks, ", ")))
		}
	}
	for _, a := range slices.Sorted(maps.Keys(c.got)) {
		if _, ok := want[a]; !ok {
			diffs = append(diffs, fmt.Sprintf("auction %d: not expected (no bid)", a))
		}
	}
	return differs("auctions", len(c.got), len(want), diffs)
}
