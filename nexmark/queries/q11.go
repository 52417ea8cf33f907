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

// q11 is "user sessions": per bidder, the number of bids of each session,
// a session being a run of the bidder's bids at most 10 s apart (event
// time).
//
// Plan: the bids are re-keyed by bidder (a repartition topic that carries
// only the key and the timestamp: the count needs nothing else) and counted
// per session, emit-final with a grace of 4 s (Flink's watermark delay): a
// session is reported once stream time passed its last bid + 10 s + 4 s.
// The output is keyed by bidder with the count, SESSION_START (the first
// bid's time) and SESSION_END (the last bid's time + the gap, Flink's
// exclusive end; eddy's session window itself ends at the last bid).
//
// The merge rule is eddy's: a bid joins a session when it is at most the
// gap away from it (inclusive; Flink's windows [t, t+gap) merge only when
// strictly closer). Reference: each bidder's bids sorted by time and cut
// where two consecutive bids are more than 10 s apart; the sessions
// reported are those whose last bid is more than 14 s before the largest
// bid timestamp (the session task's stream time, since every bid reaches
// it), the closing rule of eddy's emit-final sessions.
func q11() Query {
	return Query{Name: "q11", Title: "user sessions", Build: buildQ11, NewCheck: newQ11Check}
}

const (
	q11Gap   = 10 * time.Second
	q11Grace = 4 * time.Second
)

func buildQ11(t *eddy.Topology, in nexmark.Topics, out string) {
	bids := eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde())
	byBidder := eddy.Map(bids, func(_ int64, b nexmark.Bid) (int64, unit) { return b.Bidder, unit{} })
	g := eddy.GroupByKey(eddy.Repartition(byBidder, "q11-bids-by-bidder", serde.Int64(), unitSerde{}), serde.Int64())
	sw := eddy.WindowedBy(g, eddy.SessionWindowsWithGap(q11Gap).WithGrace(q11Grace)).Emit(eddy.EmitFinal)
	counts := eddy.WindowCount(sw, "q11-sessions")
	gap := q11Gap.Milliseconds()
	res := eddy.Map(eddy.ToStream(counts), func(k eddy.Windowed[int64], n int64) (int64, windowCount) {
		return k.Key, windowCount{Count: n, Start: k.Start, End: k.End + gap}
	})
	eddy.To(res, out, serde.Int64(), windowCountSerde{})
}

// windowCount is the result of q11 and q12: a bidder's bids in a window
// (the key is the bidder).
type windowCount struct {
	Count, Start, End int64
}

func appendWindowCount(dst []byte, c *windowCount) []byte {
	dst = binary.AppendVarint(dst, c.Count)
	dst = binary.AppendVarint(dst, c.Start)
	return binary.AppendVarint(dst, c.End)
}

// windowCountSerde encodes a windowCount as three varints.
type windowCountSerde struct{}

func (windowCountSerde) Serialize(dst []byte, c windowCount) ([]byte, error) {
	return appendWindowCount(dst, &c), nil
}

func (windowCountSerde) Deserialize(b []byte) (windowCount, error) {
	r := reader{b: b}
	c := windowCount{Count: r.int(), Start: r.int(), End: r.int()}
	return c, r.done()
}

// q11Check digests the output per bidder.
type q11Check struct {
	g    *nexmark.Generator
	n    int64
	seed maphash.Seed
	got  *digest
}

func newQ11Check(g *nexmark.Generator, n int64) Check {
	seed := maphash.MakeSeed()
	return &q11Check{g: g, n: n, seed: seed, got: newDigest(seed)}
}

func (c *q11Check) Add(key, value []byte, _ int64) {
	group := int64(-1) // a malformed key is no bidder of the reference
	if len(key) == 8 {
		group = int64(binary.BigEndian.Uint64(key))
	}
	c.got.add(group, key, value)
}

func (c *q11Check) Verify() error {
	gap, grace := q11Gap.Milliseconds(), q11Grace.Milliseconds()
	times := make(map[int64][]int64) // bidder → bid times
	streamTime := int64(-1)
	for i := int64(0); i < c.n; i++ {
		if nexmark.KindOf(i) != nexmark.KindBid {
			continue
		}
		b := c.g.Event(i).Bid
		streamTime = max(streamTime, b.DateTime)
		times[b.Bidder] = append(times[b.Bidder], b.DateTime)
	}
	want := newDigest(c.seed)
	var key, value []byte
	for bidder, ts := range times {
		slices.Sort(ts)
		key = binary.BigEndian.AppendUint64(key[:0], uint64(bidder))
		first := 0
		for i := range ts {
			if i+1 < len(ts) && ts[i+1]-ts[i] <= gap {
				continue // the session goes on
			}
			// ts[first..i] is a session; eddy closes it once stream
			// time passed its end + gap + grace.
			if ts[i] < streamTime-gap-grace {
				value = appendWindowCount(value[:0], &windowCount{Count: int64(i - first + 1), Start: ts[first], End: ts[i] + gap})
				want.add(bidder, key, value)
			}
			first = i + 1
		}
	}
	if err := compare(c.got, want, "bidder"); err != nil {
		return fmt.Errorf("q11: %w", err)
	}
	return nil
}
