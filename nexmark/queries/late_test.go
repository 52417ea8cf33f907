package queries

import (
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

// TestWindowedChecksModelLateRecords runs the windowed queries with
// delays beyond their grace: records are dropped as late, and each check
// must still match, and still fail on a damaged output (a result missing).
func TestWindowedChecksModelLateRecords(t *testing.T) {
	g, err := nexmark.New(lateConfig)
	if err != nil {
		t.Fatal(err)
	}
	const n = 30_000
	// Bids late for their 10 s tumbling window (grace 4 s) by the input
	// order's stream time: the config makes some, or the test is moot.
	late := countLateBids(g, n, func(ts, streamTime int64) bool { return windowStart(ts, 10_000)+14_000 <= streamTime })
	if late == 0 {
		t.Fatal("no bid is late: lateConfig no longer tests lateness")
	}
	t.Logf("%d bids late for their tumbling window", late)
	for _, q := range []Query{q5(), q7(), q8(), q11()} {
		t.Run(q.Name, func(t *testing.T) {
			testQuery(t, q, lateConfig, n, 10, corruption{"the last key's records dropped", func(outs []output) []output {
				last := string(outs[len(outs)-1].key)
				kept := outs[:0]
				for _, o := range outs {
					if string(o.key) != last {
						kept = append(kept, o)
					}
				}
				return kept
			}})
		})
	}
}

// countLateBids counts the bids of events [0, n) of g that late says are
// late at the input order's stream time (the largest bid timestamp so
// far, theirs included).
func countLateBids(g *nexmark.Generator, n int64, late func(ts, streamTime int64) bool) int {
	count, streamTime := 0, int64(-1)
	for i := range n {
		if nexmark.KindOf(i) != nexmark.KindBid {
			continue
		}
		ts := g.Event(i).Bid.DateTime
		streamTime = max(streamTime, ts)
		if late(ts, streamTime) {
			count++
		}
	}
	return count
}
