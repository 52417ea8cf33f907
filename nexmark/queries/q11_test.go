package queries

import (
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

// TestQ11 runs fewer events than the other queries' tests: the memory
// store's scans (a session lookup is two) walk the whole store.
func TestQ11(t *testing.T) {
	g := testGenerator(t)
	const n = 20_000
	recs := driveQuery(t, q11(), g, n, nexmark.Topics{Bids: "bid"}, nil)
	requireChecked(t, func() Check { return q11().NewCheck(g, n) }, recs)
}

func TestWindowCountSerde(t *testing.T) {
	c := WindowCount{Count: 3, Start: 1_767_225_600_000, End: 1_767_225_610_000}
	enc, _ := WindowCountSerde{}.Serialize(nil, c)
	if got, err := (WindowCountSerde{}).Deserialize(enc); err != nil || got != c {
		t.Errorf("round trip: %+v, %v; want %+v", got, err, c)
	}
	if _, err := (WindowCountSerde{}).Deserialize(append(enc, 0)); err == nil {
		t.Error("a value with a byte left over decoded")
	}
}
