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
// A bid joins a session when it is at most the gap away from it,
// inclusive, as in Flink: its windows [t, t+gap) merge when they
// intersect, and TimeWindow.intersects is inclusive at both ends. The end
// of the input closes every session. Reference: the bids replayed in
// input order with eddy's closing rule for emit-final sessions (see
// Verify), so that late bids are modelled too.
func q11() Query {
	return Query{Name: "q11", Title: "user sessions", Build: buildQ11, NewCheck: newQ11Check, Result: windowCountResult(false)}
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
	res := eddy.Map(eddy.ToStream(counts), func(k eddy.Windowed[int64], n int64) (int64, WindowCount) {
		return k.Key, WindowCount{Count: n, Start: k.Start, End: k.End + gap}
	})
	eddy.To(res, out, serde.Int64(), WindowCountSerde{})
}

// WindowCount is the result of q11 and q12: a bidder's bids in a window
// (the key is the bidder).
type WindowCount struct {
	Count, Start, End int64
}

func appendWindowCount(dst []byte, c *WindowCount) []byte {
	dst = binary.AppendVarint(dst, c.Count)
	dst = binary.AppendVarint(dst, c.Start)
	return binary.AppendVarint(dst, c.End)
}

// WindowCountSerde encodes a WindowCount as three varints.
type WindowCountSerde struct{}

func (WindowCountSerde) Serialize(dst []byte, c WindowCount) ([]byte, error) {
	return appendWindowCount(dst, &c), nil
}

func (WindowCountSerde) Deserialize(b []byte) (WindowCount, error) {
	r := reader{b: b}
	c := WindowCount{Count: r.int(), Start: r.int(), End: r.int()}
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

// Verify replays the bids in input order, as the session task sees them,
// keeping each bidder's open sessions: a session whose last bid is more
// than gap + grace before stream time (the largest bid time so far) is
// closed, final, and takes no more bids; a bid merges every open session
// it is at most the gap away from, or starts one; a bid whose merged
// session would be closed already is late and dropped. The end of the
// input closes every session left open.
func (c *q11Check) Verify() error {
	gap, grace := q11Gap.Milliseconds(), q11Grace.Milliseconds()
	type session struct{ start, end, n int64 }
	open := make(map[int64][]session) // bidder → open sessions, unordered
	want := newDigest(c.seed)
	var key, value []byte
	emit := func(bidder int64, s session) {
		key = binary.BigEndian.AppendUint64(key[:0], uint64(bidder))
		value = appendWindowCount(value[:0], &WindowCount{Count: s.n, Start: s.start, End: s.end + gap})
		want.add(bidder, key, value)
	}
	streamTime := int64(-1)
	for i := int64(0); i < c.n; i++ {
		if nexmark.KindOf(i) != nexmark.KindBid {
			continue
		}
		b := c.g.Event(i).Bid
		ts := b.DateTime
		streamTime = max(streamTime, ts)
		closed := streamTime - gap - grace // sessions ending before it are final
		merged := session{start: ts, end: ts, n: 1}
		var keep []session
		for _, s := range open[b.Bidder] {
			switch {
			case s.end < closed:
				emit(b.Bidder, s)
			case s.end >= ts-gap && s.start <= ts+gap:
				merged = session{start: min(merged.start, s.start), end: max(merged.end, s.end), n: merged.n + s.n}
			default:
				keep = append(keep, s)
			}
		}
		// Open sessions end at or after closed, so a merged session
		// closed already is the bid alone: late, dropped.
		if merged.end >= closed {
			keep = append(keep, merged)
		}
		open[b.Bidder] = keep
	}
	for bidder, ss := range open { // the end of the input closed every session
		for _, s := range ss {
			emit(bidder, s)
		}
	}
	if err := compare(c.got, want, "bidder"); err != nil {
		return fmt.Errorf("q11: %w", err)
	}
	return nil
}
