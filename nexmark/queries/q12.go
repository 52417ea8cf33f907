package queries

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// q12 is "processing-time windows": per bidder, the number of bids in each
// 10 s tumbling window of processing time (the wall clock when the bid was
// read, PROCTIME() in the suite's SQL).
//
// Plan: the bid source stamps each record with the wall clock
// (eddy.ProcessingTime: read once per poll), the bids are re-keyed by
// bidder (a repartition topic carrying the key and that timestamp only)
// and counted per bidder and window, grace 4 s. The emit mode is every
// update: a run of millions of events lasts seconds of processing time, so
// with emit-final almost no window would close before the input ends and
// the output would say next to nothing; with every update, each bid's
// count is in the output, which the check can account for. Each output is
// keyed by bidder with the window's count so far, start and end.
//
// The windows depend on the wall clock, so the check cannot compare them
// with a reference. It checks what does not depend on it: per bidder and
// window the updates count 1, 2, 3… (none missing, none twice: a window
// emitted twice would count again from 1), every window is [start, start
// + 10 s) with start a multiple of 10 s, and per bidder the last counts of
// its windows sum to the reference's number of bids of that bidder.
func q12() Query {
	return Query{Name: "q12", Title: "processing-time windows", Build: buildQ12, NewCheck: newQ12Check, Result: windowCountResult(true)}
}

const (
	q12Size  = 10 * time.Second
	q12Grace = 4 * time.Second
)

func buildQ12(t *eddy.Topology, in nexmark.Topics, out string) {
	bids := eddy.Source(t, in.Bids, serde.Int64(), nexmark.BidSerde(), eddy.ProcessingTime())
	byBidder := eddy.Map(bids, func(_ int64, b nexmark.Bid) (int64, unit) { return b.Bidder, unit{} })
	g := eddy.GroupByKey(eddy.Repartition(byBidder, "q12-bids-by-bidder", serde.Int64(), unitSerde{}), serde.Int64())
	ws := eddy.WindowedBy(g, eddy.TumblingWindows(q12Size).WithGrace(q12Grace))
	counts := eddy.WindowCount(ws, "q12-counts")
	res := eddy.Map(eddy.ToStream(counts), func(k eddy.Windowed[int64], n int64) (int64, WindowCount) {
		return k.Key, WindowCount{Count: n, Start: k.Start, End: k.End}
	})
	eddy.To(res, out, serde.Int64(), WindowCountSerde{})
}

type bidderWindow struct{ bidder, start int64 }

// q12Check keeps the last count per bidder and window, and the first
// problems that single records show.
type q12Check struct {
	g        *nexmark.Generator
	n        int64
	last     map[bidderWindow]int64
	problems []string
	more     int // problems not kept
}

func newQ12Check(g *nexmark.Generator, n int64) Check {
	return &q12Check{g: g, n: n, last: make(map[bidderWindow]int64)}
}

func (c *q12Check) problem(format string, args ...any) {
	if len(c.problems) == 5 {
		c.more++
		return
	}
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

func (c *q12Check) Add(key, value []byte, _ int64) {
	if len(key) != 8 {
		c.problem("a key of %d bytes, want 8", len(key))
		return
	}
	bidder := int64(binary.BigEndian.Uint64(key))
	wc, err := WindowCountSerde{}.Deserialize(value)
	if err != nil {
		c.problem("bidder %d: %v", bidder, err)
		return
	}
	size := q12Size.Milliseconds()
	if wc.Start%size != 0 || wc.End != wc.Start+size {
		c.problem("bidder %d: window [%d, %d) is not a 10 s window aligned to 10 s", bidder, wc.Start, wc.End)
	}
	k := bidderWindow{bidder, wc.Start}
	// Counts only grow; the table cache may forward only the latest of
	// several updates of a window within a commit, so a count may skip,
	// and the totals (Verify) find an update missing.
	if prev := c.last[k]; wc.Count <= prev {
		c.problem("bidder %d, window %d: count %d after %d (an update repeated or out of order, or the window emitted twice)", bidder, wc.Start, wc.Count, prev)
	}
	c.last[k] = wc.Count
}

func (c *q12Check) Verify() error {
	want := make(map[int64]int64) // bidder → bids
	for i := int64(0); i < c.n; i++ {
		if nexmark.KindOf(i) == nexmark.KindBid {
			want[c.g.Event(i).Bid.Bidder]++
		}
	}
	got := make(map[int64]int64)
	for k, n := range c.last {
		got[k.bidder] += n
	}
	var wrong []int64
	for bidder, n := range want {
		if got[bidder] != n {
			wrong = append(wrong, bidder)
		}
	}
	for bidder := range got {
		if _, ok := want[bidder]; !ok {
			wrong = append(wrong, bidder)
		}
	}
	slices.Sort(wrong)
	problems := slices.Clone(c.problems)
	for i, bidder := range wrong {
		if i == 5 {
			problems = append(problems, fmt.Sprintf("… %d bidders in all with wrong totals", len(wrong)))
			break
		}
		problems = append(problems, fmt.Sprintf("bidder %d: %d bids over its windows, want %d", bidder, got[bidder], want[bidder]))
	}
	if len(problems) == 0 {
		return nil
	}
	if c.more > 0 {
		problems = append(problems, fmt.Sprintf("and %d more problems of single records", c.more))
	}
	return errors.New("q12: " + strings.Join(problems, "; "))
}
