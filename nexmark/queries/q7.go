package queries

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q7 is "highest bid": per 10 s tumbling window of event time, the bids
// whose price is the window's highest.
//
// The suite's SQL joins the bids with each window's maximum price on price
// and on B.dateTime BETWEEN window_end - 10 s AND window_end, which is
// inclusive at both ends: a bid at exactly window_end that happens to have
// the previous window's maximum price would be reported for both windows.
// eddy reports the intent, the bids of [start, end) with the maximum
// price, so each bid belongs to one window.
//
// Plan: the bids, cut to the columns reported, are re-keyed to one key (the
// maximum is over all bids of a window, so they must meet in one task, as
// in Flink's global aggregation), then a windowed aggregation keeps per
// window the highest price and the bids that have it, emitted once the
// window closes (EmitFinal, grace 4 s, Flink's watermark delay); each bid
// of a closed window becomes one output record keyed by its auction. The
// aggregate keeps its bids encoded, so a bid below the maximum, the
// common case, costs a few varints rather than decoding the window's top
// bids.
//
// Reference: every window [start, end) (the end of the input closes them
// all), and in each the bids with the highest price among those that were
// not late: a bid is late when its window's end + 4 s is at or before the
// largest bid timestamp so far (the aggregation's stream time, since every
// bid reaches its task in the order of the input).
func q7() Query {
	return Query{Name: "q7", Title: "highest bid", Build: buildQ7, NewCheck: newQ7Check, Result: q7Result()}
}

const (
	q7Size  = 10 * time.Second
	q7Grace = 4 * time.Second
)

func buildQ7(t *eddy.Topology, in nexmark.Topics, out string) {
	bids := eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde())
	all := eddy.Map(bids, func(_ int64, b nexmark.Bid) (int64, Q7Row) {
		return 0, Q7Row{Auction: b.Auction, Price: b.Price, Bidder: b.Bidder, DateTime: b.DateTime, Extra: b.Extra}
	})
	g := eddy.GroupByKey(eddy.Repartition(all, "q7-bids", serde.Int64(), Q7RowSerde{}), serde.Int64())
	ws := eddy.WindowedBy(g, eddy.TumblingWindows(q7Size).WithGrace(q7Grace)).Emit(eddy.EmitFinal)
	top := eddy.WindowAggregate(ws, "q7-top", func() q7Top { return q7Top{} }, q7Add, nil, q7TopSerde{})
	res := eddy.FlatMap(eddy.ToStream(top), func(dst []eddy.KeyValue[int64, Q7Row], _ eddy.Windowed[int64], a q7Top) []eddy.KeyValue[int64, Q7Row] {
		for rest := a.bids; len(rest) > 0; {
			var b Q7Row
			var err error
			if b, rest, err = nextQ7Bid(rest); err != nil {
				// The store holds what q7Add wrote: this is a bug.
				panic(fmt.Sprintf("q7: window aggregate: %v", err))
			}
			dst = append(dst, eddy.KeyValue[int64, Q7Row]{Key: b.Auction, Value: b})
		}
		return dst
	})
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

// q7Top is a window's aggregate: the highest price so far and the bids
// that have it, encoded by appendQ7Entry one after the other.
type q7Top struct {
	max  int64
	bids []byte
}

func q7Add(_ int64, b Q7Row, a q7Top) q7Top {
	switch {
	case len(a.bids) == 0 || b.Price > a.max:
		a.max, a.bids = b.Price, appendQ7Entry(a.bids[:0], &b)
	case b.Price == a.max:
		a.bids = appendQ7Entry(a.bids, &b)
	}
	return a
}

// appendQ7Entry encodes b as appendQ7Bid does, but with the extra bytes
// behind their uvarint length, so that entries follow one another.
func appendQ7Entry(dst []byte, b *Q7Row) []byte {
	dst = binary.AppendVarint(dst, b.Auction)
	dst = binary.AppendVarint(dst, b.Price)
	dst = binary.AppendVarint(dst, b.Bidder)
	dst = binary.AppendVarint(dst, b.DateTime)
	dst = binary.AppendUvarint(dst, uint64(len(b.Extra)))
	return append(dst, b.Extra...)
}

// nextQ7Bid decodes the first entry of a q7Top's bids.
func nextQ7Bid(entries []byte) (Q7Row, []byte, error) {
	r := reader{b: entries}
	b := Q7Row{Auction: r.int(), Price: r.int(), Bidder: r.int(), DateTime: r.int()}
	if r.err != nil {
		return b, nil, r.err
	}
	l, n := binary.Uvarint(r.b)
	if n <= 0 || uint64(len(r.b)-n) < l {
		return b, nil, fmt.Errorf("%w: q7 top bids: bad extra length", errCorrupt)
	}
	b.Extra = string(r.b[n : n+int(l)])
	return b, r.b[n+int(l):], nil
}

// q7TopSerde encodes a q7Top as the varint maximum, then the entries.
type q7TopSerde struct{}

func (q7TopSerde) Serialize(dst []byte, a q7Top) ([]byte, error) {
	return append(binary.AppendVarint(dst, a.max), a.bids...), nil
}

func (q7TopSerde) Deserialize(b []byte) (q7Top, error) {
	max, n := binary.Varint(b)
	if n <= 0 {
		return q7Top{}, fmt.Errorf("%w: q7 top: bad maximum", errCorrupt)
	}
	// A copy: the aggregate outlives b, and q7Add appends to it.
	return q7Top{max: max, bids: append([]byte(nil), b[n:]...)}, nil
}

// q7Check digests the output per window (of the bid's dateTime).
type q7Check struct {
	g    *nexmark.Generator
	n    int64
	seed maphash.Seed
	got  *digest
}

func newQ7Check(g *nexmark.Generator, n int64) Check {
	seed := maphash.MakeSeed()
	return &q7Check{g: g, n: n, seed: seed, got: newDigest(seed)}
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
	size, grace := q7Size.Milliseconds(), q7Grace.Milliseconds()
	type window struct {
		max  int64
		bids []Q7Row
	}
	windows := make(map[int64]*window)
	streamTime := int64(-1)
	for i := int64(0); i < c.n; i++ {
		if nexmark.KindOf(i) != nexmark.KindBid {
			continue
		}
		b := c.g.Event(i).Bid
		streamTime = max(streamTime, b.DateTime)
		start := windowStart(b.DateTime, size)
		if start+size+grace <= streamTime {
			continue // late: its window closed before it arrived
		}
		w := windows[start]
		if w == nil {
			w = &window{max: b.Price}
			windows[start] = w
		}
		if b.Price > w.max {
			w.max, w.bids = b.Price, w.bids[:0]
		}
		if b.Price == w.max {
			w.bids = append(w.bids, Q7Row{Auction: b.Auction, Price: b.Price, Bidder: b.Bidder, DateTime: b.DateTime, Extra: b.Extra})
		}
	}
	want := newDigest(c.seed)
	var key, value []byte
	for start, w := range windows { // the end of the input closed every window
		for i := range w.bids {
			key = binary.BigEndian.AppendUint64(key[:0], uint64(w.bids[i].Auction))
			value = appendQ7Bid(value[:0], &w.bids[i])
			want.add(start, key, value)
		}
	}
	if err := compare(c.got, want, "window"); err != nil {
		return fmt.Errorf("q7: %w", err)
	}
	return nil
}
