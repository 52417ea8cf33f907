package queries

import (
	"encoding/binary"
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

func q9Corruptions() []corruption {
	keyOf := func(o output) int64 { return int64(binary.BigEndian.Uint64(o.key)) }
	return []corruption{
		{"an auction's last row changed", func(outs []output) []output {
			i := len(outs) - 1
			r, _ := Q9RowSerde{}.Deserialize(outs[i].value)
			r.Price--
			v, _ := Q9RowSerde{}.Serialize(nil, r)
			return withValue(outs, i, v)
		}},
		{"an auction's last update dropped (the one before it differs)", func(outs []output) []output {
			for i := len(outs) - 1; i > 0; i-- {
				prev := last(outs[:i], keyOf(outs[i]))
				if prev >= 0 && string(outs[prev].value) != string(outs[i].value) && last(outs, keyOf(outs[i])) == i {
					return append(outs[:i:i], outs[i+1:]...)
				}
			}
			return outs
		}},
		{"an auction missing", func(outs []output) []output {
			k := keyOf(outs[0])
			kept := outs[:0]
			for _, o := range outs {
				if keyOf(o) != k {
					kept = append(kept, o)
				}
			}
			return kept
		}},
		{"an unexpected auction", func(outs []output) []output {
			o := outs[0]
			o.key = int64Key(nil, -1)
			return append(outs, o)
		}},
	}
}

// TestQ9 runs the suite's rate, where an auction lasts milliseconds.
func TestQ9(t *testing.T) {
	testQuery(t, q9(), nexmark.Config{Seed: 7, EventsPerSecond: 10_000_000}, 30_000, 100, q9Corruptions()...)
}

// TestQ9SlowRate runs 100 events a second with delays up to 3 s, where
// bids often arrive before their auction.
func TestQ9SlowRate(t *testing.T) {
	testQuery(t, q9(), testConfig, 30_000, 100, q9Corruptions()...)
}

// TestQ9Better: the ranking orders by price descending, then time, bidder
// and extra ascending.
func TestQ9Better(t *testing.T) {
	base := Q9Row{Price: 10, BidDateTime: 5, Bidder: 3, BidExtra: "m"}
	for _, c := range []struct {
		name string
		r    Q9Row
	}{
		{"higher price", Q9Row{Price: 11, BidDateTime: 9, Bidder: 9, BidExtra: "z"}},
		{"earlier", Q9Row{Price: 10, BidDateTime: 4, Bidder: 9, BidExtra: "z"}},
		{"smaller bidder", Q9Row{Price: 10, BidDateTime: 5, Bidder: 2, BidExtra: "z"}},
		{"smaller extra", Q9Row{Price: 10, BidDateTime: 5, Bidder: 3, BidExtra: "a"}},
	} {
		if !q9Better(c.r, base) || q9Better(base, c.r) {
			t.Errorf("%s: %+v does not rank before %+v", c.name, c.r, base)
		}
	}
	if q9Better(base, base) {
		t.Error("a row ranks before itself")
	}
}

func TestQ9RowSerde(t *testing.T) {
	in := Q9Row{
		Auction: nexmark.Auction{ID: 1001, ItemName: "i", Description: "d", InitialBid: 5, Reserve: 9, DateTime: 1_699_999_999_000, Expires: 1_700_000_009_000, Seller: 7, Category: 10, Extra: "ae"},
		Bidder:  2002, Price: 300, BidDateTime: 1_700_000_000_000, BidExtra: "e",
	}
	b, _ := Q9RowSerde{}.Serialize(nil, in)
	out, err := Q9RowSerde{}.Deserialize(b)
	if err != nil || out != in {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	for k := range len(b) {
		if _, err := (Q9RowSerde{}).Deserialize(b[:k]); err == nil {
			t.Errorf("%d of %d bytes decoded", k, len(b))
		}
	}
	var cols []any
	if err := q9().Result.Rows(int64Key(nil, 1001), b, func(values ...any) { cols = values }); err != nil {
		t.Fatal(err)
	}
	if len(cols) != len(q9().Result.Columns) || cols[0] != int64(1001) || cols[10] != int64(1001) || cols[12] != int64(300) || cols[13] != Timestamp(in.BidDateTime) || cols[14] != "e" {
		t.Errorf("row %v for columns %v", cols, q9().Result.Columns)
	}
}
