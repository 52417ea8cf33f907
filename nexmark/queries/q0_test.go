package queries

import (
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

func TestQ0(t *testing.T) {
	const n = 20_000
	testQuery(t, q0(), nexmark.Config{Seed: 1}, n, n*nexmark.BidProportion/nexmark.TotalProportion,
		dropOne(func(n int) int { return n / 2 }),
		corruption{"one price changed", func(outs []output) []output {
			r, _ := BidRowSerde{}.Deserialize(outs[7].value)
			r.Price++
			v, _ := BidRowSerde{}.Serialize(nil, r)
			return withValue(outs, 7, v)
		}},
		corruption{"one timestamp changed", func(outs []output) []output {
			outs[3].ts++
			return outs
		}},
		corruption{"one record twice", func(outs []output) []output { return append(outs, outs[11]) }})
}

func TestBidRowSerde(t *testing.T) {
	in := BidRow{Auction: 1001, Bidder: -3, Price: 1 << 40, DateTime: 1767225600000, Extra: "xyz"}
	b, _ := BidRowSerde{}.Serialize(nil, in)
	out, err := BidRowSerde{}.Deserialize(b)
	if err != nil || out != in {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	for k := range len(b) {
		if _, err := (BidRowSerde{}).Deserialize(b[:k]); err == nil {
			t.Errorf("%d of %d bytes decoded", k, len(b))
		}
	}
	if _, err := (BidRowSerde{}).Deserialize(append(b, 0)); err == nil {
		t.Error("trailing byte accepted")
	}
}
