package queries

import (
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

func TestQ7(t *testing.T) {
	g := testGenerator(t)
	const n = 40_000
	recs := driveQuery(t, q7(), g, n, nexmark.Topics{Bids: "bid"}, nil)
	requireChecked(t, func() Check { return q7().NewCheck(g, n) }, recs)
}

func TestQ7Serdes(t *testing.T) {
	b := Q7Row{Auction: 1001, Price: 12_345, Bidder: -3, DateTime: 1_767_225_600_000, Extra: "xyz"}
	enc, _ := Q7RowSerde{}.Serialize(nil, b)
	if got, err := (Q7RowSerde{}).Deserialize(enc); err != nil || got != b {
		t.Errorf("Q7Row round trip: %+v, %v; want %+v", got, err, b)
	}
	top := q7Add(0, b, q7Add(0, Q7Row{Price: 1}, q7Top{}))
	top = q7Add(0, Q7Row{Price: 12_345, Extra: "second"}, top)
	top = q7Add(0, Q7Row{Price: 12_000}, top)
	enc, _ = q7TopSerde{}.Serialize(nil, top)
	dec, err := q7TopSerde{}.Deserialize(enc)
	if err != nil || dec.max != 12_345 {
		t.Fatalf("q7Top round trip: %+v, %v", dec, err)
	}
	var got []Q7Row
	for rest := dec.bids; len(rest) > 0; {
		var e Q7Row
		if e, rest, err = nextQ7Bid(rest); err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	if len(got) != 2 || got[0] != b || got[1].Extra != "second" {
		t.Errorf("top bids %+v, want the two at 12345 in order", got)
	}
	if _, err := (Q7RowSerde{}).Deserialize([]byte{0x80}); err == nil {
		t.Error("a truncated varint decoded")
	}
}
