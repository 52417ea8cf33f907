package queries

import (
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

func TestQ8(t *testing.T) {
	g := testGenerator(t)
	const n = 40_000
	recs := driveQuery(t, q8(), g, n, nexmark.Topics{Persons: "person", Auctions: "auction"}, nil)
	requireChecked(t, func() Check { return q8().NewCheck(g, n) }, recs)
}

func TestQ8Serdes(t *testing.T) {
	for _, s := range []q8Seen{{}, {person: true, name: "Ann Lee"}, {auction: true}, {person: true, auction: true, name: "Bo"}} {
		enc, _ := q8SeenSerde{}.Serialize(nil, s)
		if got, err := (q8SeenSerde{}).Deserialize(enc); err != nil || got != s {
			t.Errorf("q8Seen round trip: %+v, %v; want %+v", got, err, s)
		}
	}
	u := Q8Row{ID: 1234, Name: "Ann Lee", Start: 1_767_225_600_000}
	enc, _ := Q8RowSerde{}.Serialize(nil, u)
	if got, err := (Q8RowSerde{}).Deserialize(enc); err != nil || got != u {
		t.Errorf("Q8Row round trip: %+v, %v; want %+v", got, err, u)
	}
	if _, err := (q8SeenSerde{}).Deserialize([]byte{4}); err == nil {
		t.Error("bad flags decoded")
	}
}
