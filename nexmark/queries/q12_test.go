package queries

import (
	"testing"
	"time"

	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/nexmark"
)

// TestQ12 sets eddytest's wall clock an hour and 3 s after the events'
// base time and moves it one second every 37 events, so the processing
// time of event i is known and unrelated to its event time: besides the
// check's invariants, the test compares the windows with the ones that
// clock gives.
func TestQ12(t *testing.T) {
	g := testGenerator(t)
	const n, perSecond = 40_000, 37
	var clock0 int64
	recs := driveQuery(t, q12(), g, n, nexmark.Topics{Bids: "bid"}, func(d *eddytest.Driver, i int64) {
		if i == 0 {
			if err := d.AdvanceWallClock(time.Hour + 3*time.Second); err != nil {
				t.Fatal(err)
			}
			clock0 = d.WallClock().UnixMilli()
		} else if i%perSecond == 0 {
			if err := d.AdvanceWallClock(time.Second); err != nil {
				t.Fatal(err)
			}
		}
	})
	// The last output is its window's last update: dropping it changes a
	// total (an earlier update, the table cache may skip legitimately).
	requireCheckedDropping(t, func() Check { return q12().NewCheck(g, n) }, recs, len(recs)-1)

	want := make(map[bidderWindow]int64)
	for i := int64(0); i < n; i++ {
		if nexmark.KindOf(i) == nexmark.KindBid {
			read := clock0 + i/perSecond*1000
			want[bidderWindow{g.Event(i).Bid.Bidder, windowStart(read, q12Size.Milliseconds())}]++
		}
	}
	c := q12().NewCheck(g, n).(*q12Check)
	for _, r := range recs {
		c.Add(r.Key, r.Value, r.Timestamp)
	}
	if len(c.last) != len(want) {
		t.Errorf("%d (bidder, window) counts, want %d", len(c.last), len(want))
	}
	for k, n := range want {
		if c.last[k] != n {
			t.Errorf("bidder %d, window %d: %d bids, want %d", k.bidder, k.start, c.last[k], n)
		}
	}
}
