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

// With delays up to 40 s some bids come more than 20 s behind stream
// time: the join drops them, and the check models it.
func TestQ7JoinLateBids(t *testing.T) {
	g, err := nexmark.New(nexmark.Config{Seed: 11, EventsPerSecond: 100, ProbDelayedEvent: 0.3, MaxDelay: 40 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const n = 40_000
	late := countLateBids(g, n, func(ts, streamTime int64) bool { return ts+20_000-1 < streamTime })
	if late == 0 {
		t.Fatal("no bid is late for the join: the test is moot")
	}
	t.Logf("%d bids late for the join", late)
	recs := driveQuery(t, q7(), g, n, nexmark.Topics{Bids: "bid"}, nil)
	requireChecked(t, func() Check { return q7().NewCheck(g, n) }, recs)
}

// A hand-made input with each case of the plan: the SQL's bound is
// inclusive at both ends (a bid at exactly a window's end with that
// window's maximum is reported for it too, besides for its own window); a
// bid late for its window's aggregation still joins; a bid late for the
// join, and a maximum late for the join, give nothing. The check's
// reference must agree, record for record.
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
		{Auction: 1, Price: 5, DateTime: base + 1},      // window 1's maximum
		{Auction: 2, Price: 3, DateTime: base + 9_000},  // below it
		{Auction: 3, Price: 5, DateTime: base + 10_000}, // window 1's end, its maximum, and window 2's
		{Auction: 4, Price: 5, DateTime: base + 20_000}, // window 2's end and maximum; window 3's is 7; window 1 closes
		{Auction: 5, Price: 7, DateTime: base + 20_001}, // window 3's maximum, which reaches the join late (below)
		{Auction: 6, Price: 5, DateTime: base + 9_999},  // late for window 1, not for the join: joins its maximum
		{Auction: 10, Price: 9, DateTime: base + 9_998}, // late for window 1: not its maximum
		{Auction: 7, Price: 1, DateTime: base + 24_000}, // window 2 closes
		{Auction: 8, Price: 5, DateTime: base + 1_000},  // late for the join (23 s behind)
		{Auction: 9, Price: 1, DateTime: base + 45_000}, // window 3 closes 11 s after its end: its maximum is late
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
	want := map[int64]int{1: 1, 3: 2, 4: 1, 6: 1, 9: 1}
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
