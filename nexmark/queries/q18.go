package queries

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q18 finds the last bid of each bidder on each auction:
//
//	SELECT auction, bidder, price, channel, url, dateTime, extra
//	FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction
//	                                   ORDER BY dateTime DESC) AS rank_number
//	      FROM bid)
//	WHERE rank_number <= 1
//
// The result is a table: when a later bid of a (bidder, auction) arrives,
// Flink retracts the row it had and inserts the new one; in eddy the new
// bid is an upsert of the key (bidder, auction), which replaces its row.
// Bids that arrive late (the generator delays some by up to 3 s) and are
// older than the key's row change nothing. Flink breaks ties of dateTime
// arbitrarily; eddy takes, of bids with the same dateTime, the higher
// price, then TopN's rule: the smaller encoding (nexmark.BidSerde), so the
// result depends on the bids alone, not on their order.
//
// Plan: the bids re-keyed by (bidder, auction) through a repartition
// topic (the bid topic is keyed by auction, and a (bidder, auction) group
// must meet in one task), then eddy.TopN with n = 1, which keeps one bid
// per key and forwards an update only when a bid replaces it.
//
// Output: key Q18Key (Q18KeySerde: bidder, auction), value the bid
// (nexmark.BidSerde), timestamp the bid's. Check: the last value per key
// (a 64-bit hash of it) against the reference's last bid per (bidder,
// auction) under the same order.
func q18() Query {
	return Query{
		Name:  "q18",
		Title: "find last bid",
		Build: func(t *eddy.Topology, in nexmark.Topics, out string) {
			bids := eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde())
			g := eddy.GroupBy(bids, func(_ int64, b nexmark.Bid) Q18Key { return Q18Key{Bidder: b.Bidder, Auction: b.Auction} },
				"q18-by-bidder-auction", Q18KeySerde(), nexmark.BidSerde())
			last := eddy.TopN(g, "q18-last", 1, q18Order, nexmark.BidSerde())
			eddy.To(eddy.MapValues(eddy.ToStream(last), func(_ Q18Key, l []nexmark.Bid) nexmark.Bid { return l[0] }),
				out, Q18KeySerde(), nexmark.BidSerde())
		},
		NewCheck: func(g *nexmark.Generator, n int64) Check {
			return &q18Check{g: g, n: n, seed: maphash.MakeSeed(), got: make(map[Q18Key]uint64)}
		},
		Result: Result{
			Columns: []string{"auction", "bidder", "price", "channel", "url", "dateTime", "extra"},
			Upsert:  true,
			Rows: func(_, value []byte, row func(values ...any)) error {
				b, err := nexmark.BidSerde().Deserialize(value)
				if err != nil {
					return err
				}
				row(b.Auction, b.Bidder, b.Price, b.Channel, b.URL, Timestamp(b.DateTime), b.Extra)
				return nil
			},
		},
	}
}

// q18Order ranks the latest bid first, and of bids at the same time the
// higher price.
func q18Order(a, b nexmark.Bid) int {
	if c := cmp.Compare(b.DateTime, a.DateTime); c != 0 {
		return c
	}
	return cmp.Compare(b.Price, a.Price)
}

// Q18Key is q18's key: a bidder and an auction.
type Q18Key struct{ Bidder, Auction int64 }

// Q18KeySerde encodes a Q18Key as 16 bytes: the bidder then the auction,
// each as serde.Int64 does (big-endian).
func Q18KeySerde() serde.Serde[Q18Key] { return q18KeySerde{} }

type q18KeySerde struct{}

func (q18KeySerde) Serialize(dst []byte, k Q18Key) ([]byte, error) {
	return int64Key(int64Key(dst, k.Bidder), k.Auction), nil
}

func (q18KeySerde) Deserialize(b []byte) (Q18Key, error) {
	if len(b) != 16 {
		return Q18Key{}, fmt.Errorf("%w: q18 key of %d bytes, want 16", errCorrupt, len(b))
	}
	return Q18Key{Bidder: int64(binary.BigEndian.Uint64(b)), Auction: int64(binary.BigEndian.Uint64(b[8:]))}, nil
}

// q18Check keeps a hash of the last value per key: the values are whole
// bids, and a run has about as many keys as bids.
type q18Check struct {
	g       *nexmark.Generator
	n       int64
	seed    maphash.Seed
	got     map[Q18Key]uint64
	badKeys int
}

func (c *q18Check) Add(key, value []byte, _ int64) {
	k, err := q18KeySerde{}.Deserialize(key)
	if err != nil {
		c.badKeys++
		return
	}
	c.got[k] = maphash.Bytes(c.seed, value)
}

// reference returns, per (bidder, auction), the index of its last bid:
// the greatest dateTime, then price; of equal ones the smallest encoding.
// Indexes rather than bids keep it small: there are about as many keys as
// bids.
func (c *q18Check) reference() map[Q18Key]int64 {
	last := map[Q18Key]int64{}
	var enc, oldEnc []byte
	for i := range c.n {
		if nexmark.KindOf(i) != nexmark.KindBid {
			continue
		}
		b := c.g.Event(i).Bid
		k := Q18Key{Bidder: b.Bidder, Auction: b.Auction}
		j, ok := last[k]
		if ok {
			old := c.g.Event(j).Bid
			if b.DateTime < old.DateTime || b.DateTime == old.DateTime && b.Price < old.Price {
				continue
			}
			if b.DateTime == old.DateTime && b.Price == old.Price {
				enc, _ = nexmark.BidSerde().Serialize(enc[:0], b)
				oldEnc, _ = nexmark.BidSerde().Serialize(oldEnc[:0], old)
				if bytes.Compare(enc, oldEnc) >= 0 {
					continue
				}
			}
		}
		last[k] = i
	}
	return last
}

func (c *q18Check) Verify() error {
	if c.badKeys > 0 {
		return fmt.Errorf("%d output records had a key that is not 16 bytes (Q18KeySerde)", c.badKeys)
	}
	want := c.reference()
	var diffs []string
	var enc []byte
	for _, k := range slices.SortedFunc(maps.Keys(want), compareQ18Keys) {
		h, ok := c.got[k]
		w := c.g.Event(want[k]).Bid
		enc, _ = nexmark.BidSerde().Serialize(enc[:0], w)
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("bidder %d, auction %d: missing", k.Bidder, k.Auction))
		case h != maphash.Bytes(c.seed, enc):
			diffs = append(diffs, fmt.Sprintf("bidder %d, auction %d: another bid than the last, event %d: %+v", k.Bidder, k.Auction, want[k], w))
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(c.got), compareQ18Keys) {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("bidder %d, auction %d: not expected (no such bid)", k.Bidder, k.Auction))
		}
	}
	return differs("keys", len(c.got), len(want), diffs)
}

func compareQ18Keys(a, b Q18Key) int {
	if c := cmp.Compare(a.Bidder, b.Bidder); c != 0 {
		return c
	}
	return cmp.Compare(a.Auction, b.Auction)
}
