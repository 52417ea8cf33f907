package queries

import (
	"encoding/binary"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/serde"
)

// TestQ7 runs q7 at the test rate (100 events/s) and the suite's (10M
// events/s), where 40,000 events span two windows, too few outputs for
// requireChecked: the check must pass and fail with the first dropped.
func TestQ7(t *testing.T) {
	eachRate(t, func(t *testing.T, cfg nexmark.Config, g *nexmark.Generator) {
		const n = 40_000
		recs := driveQuery(t, q7(), g, n, nexmark.Topics{Bids: "bid"}, nil)
		newCheck := func() Check { return q7().NewCheck(g, n) }
		if cfg.EventsPerSecond < 1000 {
			requireChecked(t, newCheck, recs)
		} else if err := verifyRecords(newCheck, recs); err != nil {
			t.Fatal(err)
		} else if err := verifyRecords(newCheck, recs[1:]); err == nil {
			t.Error("the check passed with the first output dropped")
		}
		rows := resultRows(t, q7(), recs[0].Key, recs[0].Value)
		r, _ := Q7RowSerde{}.Deserialize(recs[0].Value)
		requireRows(t, rows, []any{r.Auction, r.Price, r.Bidder, Timestamp(r.DateTime), r.Extra})
	})
}

// With delays up to 40 s many bids come after their window closed: they
// do not count towards its maximum but still join it (the SQL's join is a
// regular one), and the check models it.
func TestQ7LateBidsJoin(t *testing.T) {
	g, err := nexmark.New(nexmark.Config{Seed: 11, EventsPerSecond: 100, ProbDelayedEvent: 0.3, MaxDelay: 40 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const n = 40_000
	size, grace := q7Size.Milliseconds(), q7Grace.Milliseconds()
	late := countLateBids(g, n, func(ts, streamTime int64) bool { return windowStart(ts, size)+size+grace <= streamTime })
	if late == 0 {
		t.Fatal("no bid is late for its window: the test is moot")
	}
	t.Logf("%d bids late for their window", late)
	recs := driveQuery(t, q7(), g, n, nexmark.Topics{Bids: "bid"}, nil)
	requireChecked(t, func() Check { return q7().NewCheck(g, n) }, recs)
}

// A hand-made input with each case of the plan: the SQL's bound is
// inclusive at both ends (a bid at exactly a window's end with that
// window's maximum is reported for it too, besides for its own window); a
// bid late for its window's aggregation still joins, however late; a
// candidate leaves when the maximum passes it; a bid at a window's end
// that comes before the window has any bid waits for its maximum. The
// check's reference must agree, record for record.
func TestQ7Cases(t *testing.T) {
	topo := eddy.NewTopology()
	q7().Build(topo, nexmark.Topics{Bids: "bid"}, driveOut)
	d, err := eddytest.New(topo, eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const base = 1_767_225_600_000 // a window's start
	bids := []nexmark.Bid{
		{Auction: 1, Price: 5, DateTime: base + 1},       // window 1's maximum
		{Auction: 2, Price: 3, DateTime: base + 9_000},   // below it
		{Auction: 3, Price: 5, DateTime: base + 10_000},  // window 1's end, its maximum, and window 2's
		{Auction: 4, Price: 5, DateTime: base + 20_000},  // window 2's end and maximum; window 3's is 7; window 1 closes
		{Auction: 5, Price: 7, DateTime: base + 20_001},  // window 3's maximum, which reaches the join late (below)
		{Auction: 6, Price: 5, DateTime: base + 9_999},   // late for window 1, not for the join: joins its maximum
		{Auction: 10, Price: 9, DateTime: base + 9_998},  // late for window 1: not its maximum
		{Auction: 7, Price: 1, DateTime: base + 24_000},  // window 2 closes
		{Auction: 8, Price: 5, DateTime: base + 1_000},   // 23 s behind: still joins window 1's maximum
		{Auction: 11, Price: 2, DateTime: base + 40_000}, // window 4's end, before window 4 has a bid; window 5's maximum
		{Auction: 12, Price: 2, DateTime: base + 39_000}, // window 4's maximum, which 11 reaches
		{Auction: 9, Price: 1, DateTime: base + 45_000},  // window 3 closes; below window 5's maximum
	}
	in := eddytest.Input(d, "bid", serde.Int64(), nexmark.BidSerde())
	for _, b := range bids {
		if err := in.Pipe(b.Auction, b, b.DateTime); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.EndOfInput(); err != nil {
		t.Fatal(err)
	}
	recs, err := eddytest.Output(d, driveOut, serde.Bytes(), serde.Bytes()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]int{}
	for _, r := range recs {
		got[int64(binary.BigEndian.Uint64(r.Key))]++
	}
	want := map[int64]int{1: 1, 3: 2, 4: 1, 5: 1, 6: 1, 8: 1, 11: 2, 12: 1}
	if !maps.Equal(got, want) {
		t.Fatalf("rows per auction %v, want %v", got, want)
	}
	check := newQ7CheckOf(slices.Values(bids))
	for _, r := range recs {
		check.Add(r.Key, r.Value, r.Timestamp)
	}
	if err := check.Verify(); err != nil {
		t.Fatalf("the check over the same bids: %v", err)
	}
}

func TestQ7Serdes(t *testing.T) {
	b := Q7Row{Auction: 1001, Price: 12_345, Bidder: -3, DateTime: 1_767_225_600_000, Extra: "xyz"}
	enc, _ := Q7RowSerde{}.Serialize(nil, b)
	if got, err := (Q7RowSerde{}).Deserialize(enc); err != nil || got != b {
		t.Errorf("Q7Row round trip: %+v, %v; want %+v", got, err, b)
	}
	if _, err := (Q7RowSerde{}).Deserialize([]byte{0x80}); err == nil {
		t.Error("a truncated varint decoded")
	}
}
