package queries

import (
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

// TestQ15 runs q15 at 100 and 10M events/s; the delayed events of the
// first 3 s make a second day.
func TestQ15(t *testing.T) {
	eachRate(t, func(t *testing.T, cfg nexmark.Config, g *nexmark.Generator) {
		const n = 30_000
		recs := driveQuery(t, q15(), g, n, nexmark.Topics{Bids: "bid"}, nil)
		requireUpsertChecked(t, func() Check { return q15().NewCheck(g, n) }, recs)
		last, err := Q15RowSerde{}.Deserialize(recs[len(recs)-1].Value)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d outputs; the last: %+v", len(recs), last)
	})
}

func TestQ15Result(t *testing.T) {
	in := Q15Row{Day: "2026-01-01", BidCounts: bidCountsOf([12]int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})}
	b, _ := Q15RowSerde{}.Serialize(nil, in)
	if out, err := (Q15RowSerde{}).Deserialize(b); err != nil || out != in {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	for k := range len(b) {
		if _, err := (Q15RowSerde{}).Deserialize(b[:k]); err == nil {
			t.Errorf("%d of %d bytes decoded", k, len(b))
		}
	}
	want := []any{"2026-01-01"}
	for i := range 12 {
		want = append(want, int64(i+1))
	}
	requireRows(t, resultRows(t, q15(), []byte("2026-01-01"), b), want)
	if c := q15().Result.Columns; c[0] != "day" || c[12] != "rank3_auctions" || !q15().Result.Upsert {
		t.Errorf("columns %v, upsert %v", c, q15().Result.Upsert)
	}
}

// TestBidCountsAdd: a bid's rank and fresh bits land in their counts.
func TestBidCountsAdd(t *testing.T) {
	var c BidCounts
	c.add(5, []uint64{priceFilters(5), 0})                           // rank 1, a new bidder, a seen auction
	c.add(50_000, []uint64{0, priceFilters(50_000)})                 // rank 2, a seen bidder, a new auction
	c.add(5_000_000, []uint64{priceFilters(5_000_000) &^ 1, 1 << 3}) // rank 3, new under its rank only
	want := bidCountsOf([12]int64{3, 1, 1, 1, 1, 1, 0, 1, 1, 0, 1, 1})
	if c != want {
		t.Errorf("%+v, want %+v", c, want)
	}
	for price, want := range map[int64]uint64{0: 0b11, 9_999: 0b11, 10_000: 0b101, 999_999: 0b101, 1_000_000: 0b1001} {
		if got := priceFilters(price); got != want {
			t.Errorf("priceFilters(%d) = %b, want %b", price, got, want)
		}
	}
}
