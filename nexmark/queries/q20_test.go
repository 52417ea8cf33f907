package queries

import (
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

func q20Corruptions() []corruption {
	return []corruption{
		dropOne(func(n int) int { return n / 2 }),
		{"a bid's price changed", func(outs []output) []output {
			r, _ := Q20RowSerde{}.Deserialize(outs[3].value)
			r.Bid.Price++
			v, _ := Q20RowSerde{}.Serialize(nil, r)
			return withValue(outs, 3, v)
		}},
		{"a pair twice", func(outs []output) []output { return append(outs, outs[1]) }},
		{"a pair at another time", func(outs []output) []output { outs[4].ts++; return outs }},
	}
}

// TestQ20 runs the suite's rate, where a bid and its auction are
// milliseconds apart.
func TestQ20(t *testing.T) {
	testQuery(t, q20(), nexmark.Config{Seed: 7, EventsPerSecond: 10_000_000}, 30_000, 1000, q20Corruptions()...)
}

// TestQ20SlowRate runs 100 events a second with delays up to 3 s, where
// bids often arrive before their auction.
func TestQ20SlowRate(t *testing.T) {
	testQuery(t, q20(), testConfig, 30_000, 1000, q20Corruptions()...)
}

func TestQ20RowSerde(t *testing.T) {
	in := Q20Row{
		Bid:     nexmark.Bid{Auction: 1001, Bidder: 2002, Price: 300, Channel: "Google", URL: "https://x/y", DateTime: 1_700_000_000_000, Extra: "e"},
		Auction: nexmark.Auction{ID: 1001, ItemName: "i", Description: "d", InitialBid: 5, Reserve: 9, DateTime: 1_699_999_999_000, Expires: 1_700_000_009_000, Seller: 7, Category: 10, Extra: "ae"},
	}
	b, _ := Q20RowSerde{}.Serialize(nil, in)
	out, err := Q20RowSerde{}.Deserialize(b)
	if err != nil || out != in {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	for k := range len(b) {
		if _, err := (Q20RowSerde{}).Deserialize(b[:k]); err == nil {
			t.Errorf("%d of %d bytes decoded", k, len(b))
		}
	}
	var cols []any
	if err := q20().Result.Rows(int64Key(nil, 1001), b, func(values ...any) { cols = values }); err != nil {
		t.Fatal(err)
	}
	if len(cols) != len(q20().Result.Columns) || cols[0] != int64(1001) || cols[5] != Timestamp(in.Bid.DateTime) || cols[14] != int64(10) || cols[15] != "ae" {
		t.Errorf("row %v for columns %v", cols, q20().Result.Columns)
	}
}
