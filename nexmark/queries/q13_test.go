package queries

import (
	"testing"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/nexmark"
)

// q13Topics are the topics q13 reads in its tests.
var q13Topics = nexmark.Topics{Bids: "bid", SideInput: "side_input"}

// driveQ13 runs q13 over events [0, n) of g with the side input's rows
// for which keep is true loaded into its global table first.
func driveQ13(t *testing.T, g *nexmark.Generator, n int64, keep func(key int64) bool) []eddy.Record[[]byte, []byte] {
	t.Helper()
	return driveQuery(t, q13(), g, n, q13Topics, func(d *eddytest.Driver, i int64) {
		if i != 0 {
			return
		}
		for _, r := range nexmark.SideInput() {
			if !keep(r.Key) {
				continue
			}
			k, v := r.Encode()
			if err := d.PipeRaw(q13Topics.SideInput, k, v, 0); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestQ13 runs q13 at the test rate and the suite's, with the suite's side
// input: every bid gives one row, with its key's value.
func TestQ13(t *testing.T) {
	eachRate(t, func(t *testing.T, _ nexmark.Config, g *nexmark.Generator) {
		const n = 20_000
		recs := driveQ13(t, g, n, func(int64) bool { return true })
		requireChecked(t, func() Check { return q13().NewCheck(g, n) }, recs)
		var bids int
		for i := range int64(n) {
			if nexmark.KindOf(i) == nexmark.KindBid {
				bids++
			}
		}
		if len(recs) != bids {
			t.Errorf("%d rows of %d bids: with 10,000 keys every bid has a row", len(recs), bids)
		}
		rows := resultRows(t, q13(), recs[0].Key, recs[0].Value)
		r, _ := Q13RowSerde{}.Deserialize(recs[0].Value)
		requireRows(t, rows, []any{r.Auction, r.Bidder, r.Price, Timestamp(r.DateTime), r.Value})
		side := nexmark.SideInput()
		for _, rec := range recs {
			r, err := Q13RowSerde{}.Deserialize(rec.Value)
			if err != nil {
				t.Fatal(err)
			}
			if want := side[r.Auction%10000].Value; r.Value != want {
				t.Fatalf("auction %d joined %q, want %q", r.Auction, r.Value, want)
			}
		}
	})
}

// The join is inner, as the SQL's: with only the even keys in the side
// input, the bids of odd keys give no row, and the check (which joins with
// the whole side input) notices the missing rows.
func TestQ13InnerJoin(t *testing.T) {
	g := testGenerator(t)
	const n = 5_000
	recs := driveQ13(t, g, n, func(k int64) bool { return k%2 == 0 })
	var even int
	for i := range int64(n) {
		if nexmark.KindOf(i) == nexmark.KindBid && g.Event(i).Bid.Auction%2 == 0 {
			even++
		}
	}
	if len(recs) != even || even == 0 {
		t.Fatalf("%d rows, want one per bid of an even auction (%d)", len(recs), even)
	}
	for _, rec := range recs {
		if r, _ := (Q13RowSerde{}).Deserialize(rec.Value); r.Auction%2 != 0 {
			t.Fatalf("a row for auction %d, whose key has no side-input row", r.Auction)
		}
	}
	if err := verifyRecords(func() Check { return q13().NewCheck(g, n) }, recs); err == nil {
		t.Error("the check passed without the odd keys' rows")
	}
}

func TestQ13RowSerde(t *testing.T) {
	in := Q13Row{Auction: 1001, Bidder: -3, Price: 1 << 40, DateTime: 1767225600000, Value: "1001"}
	b, _ := Q13RowSerde{}.Serialize(nil, in)
	out, err := Q13RowSerde{}.Deserialize(b)
	if err != nil || out != in {
		t.Fatalf("round trip: %+v, %v; want %+v", out, err, in)
	}
	if _, err := (Q13RowSerde{}).Deserialize(b[:2]); err == nil {
		t.Error("a truncated row decoded")
	}
}
