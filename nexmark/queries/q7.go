package queries

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"iter"
	"math"
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
// The result is that of the SQL's plan: a windowed maximum over every bid
// (gathered on one key, as Flink's global aggregation gathers them),
// final when its window closes (grace 4 s, the suite's watermark delay),
// in a regular join with every bid on price and time. BETWEEN is
// inclusive at both ends, so a bid at exactly a window's end that has
// that window's maximum price is reported for that window too, besides
// (if it has its own window's maximum) for its own: such a bid gives two
// equal rows. A bid late for its window's maximum (it came once the
// window had closed) does not count towards it but still joins, as in
// Flink, whose regular join keeps every bid.
//
// eddy does not keep every bid to get that result: a bid can only join a
// window whose maximum equals its price, and a window's maximum only
// grows while it is open. So the bids go once, whole, to the one task of
// the maximum (one repartition, where the SQL's plan re-keys every bid by
// price for the join besides), and a processor (q7Highest) keeps per open
// window its running maximum of the bids not late for it and, as
// candidates, the bids that reach it (its own bids and those at its end);
// a candidate leaves when the maximum passes its price. When the window
// closes, the candidates at its maximum are the join's rows; a bid that
// comes after its window closed is compared with the final maximum at
// once. The maxima stay in the store (one per window) as the join's state
// of the maxima side does. The result is the regular join's, row for row;
// the state holds a handful of bids instead of all of them.
//
// Reference (q7Check): the SQL's answer by maps and loops over the events
// in input order: per window the maximum of the bids that were not late
// (a bid is late when its window's end + 4 s is at or before the largest
// bid timestamp so far), every window closed by the end of the input; the
// pairs of a bid (any bid) and a window end in [bid time, bid time +
// 10 s] whose maximum is the bid's price.
func q7() Query {
	return Query{Name: "q7", Title: "highest bid", Build: buildQ7, NewCheck: newQ7Check, Result: q7Result()}
}

const (
	q7Size  = 10 * time.Second
	q7Grace = 4 * time.Second
)

func buildQ7(t *eddy.Topology, in nexmark.Topics, out string) {
	bids := eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde())
	one := eddy.Repartition(eddy.SelectKey(bids, func(int64, nexmark.Bid) int64 { return 0 }), "q7-bids", serde.Int64(), nexmark.BidSerde())
	maxima := eddy.NewKeyValueStoreSpec("q7-max", serde.Int64(), serde.Int64())
	candidates := eddy.NewKeyValueStoreSpec("q7-candidates", q7SlotSerde{}, Q7RowSerde{})
	rows := eddy.Process(one, "q7-highest", func() eddy.Processor[int64, nexmark.Bid, int64, Q7Row] {
		return &q7Highest{maxima: maxima, candidates: candidates}
	}, maxima, candidates)
	eddy.To(rows, out, serde.Int64(), Q7RowSerde{})
}

// q7Highest joins the bids with their windows' maxima (see q7). maxima
// holds each window's running (once closed, final) maximum by window
// start; candidates an open window's bids that may still equal it, one
// entry each (a window can hold thousands: at the suite's rate the first
// millisecond's bids are all at the end of a window that never has a
// bid, so wait for a maximum that never comes).
type q7Highest struct {
	maxima     eddy.KeyValueStoreSpec[int64, int64]
	candidates eddy.KeyValueStoreSpec[q7Slot, Q7Row]

	ctx   *eddy.ProcessorContext[int64, Q7Row]
	max   *eddy.KeyValueStore[int64, int64]
	cands *eddy.KeyValueStore[q7Slot, Q7Row]
	drop  []q7Slot // reused
}

// q7Slot is a candidate's key: its window's start, then the offset of its
// bid in the repartition topic (unique, and the same when the record is
// processed again after an abort).
type q7Slot struct{ Start, Offset int64 }

// q7SlotSerde encodes a q7Slot as two big-endian int64s with the sign bit
// flipped, so that the keys sort by window, then offset.
type q7SlotSerde struct{}

func (q7SlotSerde) Serialize(dst []byte, s q7Slot) ([]byte, error) {
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.Start)^1<<63)
	return binary.BigEndian.AppendUint64(dst, uint64(s.Offset)^1<<63), nil
}

func (q7SlotSerde) Deserialize(b []byte) (q7Slot, error) {
	if len(b) != 16 {
		return q7Slot{}, fmt.Errorf("q7: a candidate's key of %d bytes, want 16", len(b))
	}
	return q7Slot{Start: int64(binary.BigEndian.Uint64(b) ^ 1<<63), Offset: int64(binary.BigEndian.Uint64(b[8:]) ^ 1<<63)}, nil
}

func (p *q7Highest) Init(ctx *eddy.ProcessorContext[int64, Q7Row]) error {
	p.ctx = ctx
	var err error
	if p.max, err = p.maxima.Open(ctx); err != nil {
		return err
	}
	if p.cands, err = p.candidates.Open(ctx); err != nil {
		return err
	}
	// A window closes when stream time reaches its end + grace, a
	// multiple of this interval: the punctuator fires as stream time
	// crosses it (and once at the end of the input).
	_, err = ctx.Schedule(gcdDuration(q7Size, q7Grace), eddy.StreamTime, p.close)
	return err
}

func (p *q7Highest) Process(r eddy.Record[int64, nexmark.Bid]) error {
	b := &r.Value
	size := q7Size.Milliseconds()
	start := windowStart(b.DateTime, size)
	if err := p.offer(b, start, true); err != nil {
		return err
	}
	if b.DateTime == start && start >= size {
		return p.offer(b, start-size, false) // also at the end of the window before
	}
	return nil
}

// offer meets b with the window that starts at start: b falls in it
// (in), and counts towards its maximum unless late, or b is at its end.
func (p *q7Highest) offer(b *nexmark.Bid, start int64, in bool) error {
	top, ok, err := p.max.Get(start)
	if err != nil {
		return err
	}
	if start+(q7Size+q7Grace).Milliseconds() <= p.ctx.StreamTime() {
		// The window has closed: its maximum, if it had one, is final.
		if ok && b.Price == top {
			return p.emit(b)
		}
		return nil
	}
	if in && (!ok || b.Price > top) {
		if err := p.max.Put(start, b.Price); err != nil {
			return err
		}
		if err := p.prune(start, b.Price); err != nil {
			return err
		}
	} else if ok && b.Price < top {
		return nil // the common case: below the running maximum
	}
	// b may equal the final maximum.
	row := Q7Row{Auction: b.Auction, Price: b.Price, Bidder: b.Bidder, DateTime: b.DateTime, Extra: b.Extra}
	return p.cands.Put(q7Slot{Start: start, Offset: p.ctx.Offset()}, row)
}

// prune drops the candidates of the window at start below its new
// maximum top.
func (p *q7Highest) prune(start, top int64) error {
	p.drop = p.drop[:0]
	for kv, err := range p.cands.Range(q7Slot{start, math.MinInt64}, q7Slot{start + 1, math.MinInt64}) {
		if err != nil {
			return err
		}
		if kv.Value.Price < top {
			p.drop = append(p.drop, kv.Key)
		}
	}
	return p.deleteDropped()
}

// close emits the rows of the windows closed at stream time now (their
// candidates at their maximum) and forgets their candidates.
func (p *q7Highest) close(now int64) error {
	p.drop = p.drop[:0]
	start, top, ok := int64(math.MinInt64), int64(0), false
	for kv, err := range p.cands.All() { // in window order
		if err != nil {
			return err
		}
		if kv.Key.Start+(q7Size+q7Grace).Milliseconds() > now {
			break // this window and the later ones are open
		}
		if kv.Key.Start != start {
			start = kv.Key.Start
			if top, ok, err = p.max.Get(start); err != nil {
				return err
			}
		}
		if ok && kv.Value.Price == top {
			if err := p.ctx.Forward(eddy.Record[int64, Q7Row]{Key: kv.Value.Auction, Value: kv.Value, Timestamp: kv.Value.DateTime}); err != nil {
				return err
			}
		}
		p.drop = append(p.drop, kv.Key)
	}
	return p.deleteDropped()
}

func (p *q7Highest) deleteDropped() error {
	for _, k := range p.drop {
		if err := p.cands.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func (p *q7Highest) emit(b *nexmark.Bid) error {
	row := Q7Row{Auction: b.Auction, Price: b.Price, Bidder: b.Bidder, DateTime: b.DateTime, Extra: b.Extra}
	return p.ctx.Forward(eddy.Record[int64, Q7Row]{Key: b.Auction, Value: row, Timestamp: b.DateTime})
}

func (p *q7Highest) Close() error { return nil }

// gcdDuration is the greatest common divisor of a and b.
func gcdDuration(a, b time.Duration) time.Duration {
	for b != 0 {
		a, b = b, a%b
	}
	return a
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
	size, grace := q7Size.Milliseconds(), q7Grace.Milliseconds()
	// The aggregation: per window start, the highest price of the bids
	// that were not late. The end of the input closes every window.
	maxima := make(map[int64]int64)
	streamTime := int64(-1)
	for b := range c.bids {
		streamTime = max(streamTime, b.DateTime)
		start := windowStart(b.DateTime, size)
		if start+size+grace <= streamTime {
			continue // late: its window closed before it arrived
		}
		if m, ok := maxima[start]; !ok || b.Price > m {
			maxima[start] = b.Price
		}
	}
	// The join: every bid with every window end in [bid time, bid time +
	// size] whose maximum is the bid's price.
	want := newDigest(c.seed)
	var key, value []byte
	for b := range c.bids {
		for end := windowStart(b.DateTime, size) + size; end >= b.DateTime && end <= b.DateTime+size; end -= size {
			if m, ok := maxima[end-size]; !ok || m != b.Price {
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
