package queries

import (
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

func TestQ1(t *testing.T) {
	const n = 20_000
	outs := testQuery(t, q1(), nexmark.Config{Seed: 2}, n, n*nexmark.BidProportion/nexmark.TotalProportion,
		dropOne(func(int) int { return 0 }),
		corruption{"a price not converted", func(outs []output) []output {
			r, _ := BidRowSerde{}.Deserialize(outs[5].value)
			r.Price /= 908
			v, _ := BidRowSerde{}.Serialize(nil, r)
			return withValue(outs, 5, v)
		}})
	// The conversion itself, against the decimal it stands for: 0.908 ×
	// the price in cents, with three decimals.
	r, _ := BidRowSerde{}.Deserialize(outs[0].value)
	if r.Price%908 != 0 {
		t.Errorf("price %d is not 908 × a price", r.Price)
	}
	if got, want := toEuroMilli(12345), int64(11209260); got != want { // 123.45 $ × 0.908 = 112.0926 €
		t.Errorf("toEuroMilli(12345) = %d, want %d", got, want)
	}
}
