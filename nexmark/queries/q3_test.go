package queries

import (
	"slices"
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

func q3Corruptions() []corruption {
	return []corruption{
		dropOne(func(n int) int { return n / 3 }),
		corruption{"a city changed", func(outs []output) []output {
			r, _ := Q3RowSerde{}.Deserialize(outs[2].value)
			r.City += "x"
			v, _ := Q3RowSerde{}.Serialize(nil, r)
			return withValue(outs, 2, v)
		}},
		corruption{"a pair twice", func(outs []output) []output { return append(outs, outs[0]) }},
	}
}

// TestQ3 runs the suite's rate, where sellers and auctions are
// milliseconds apart.
func TestQ3(t *testing.T) {
	testQuery(t, q3(), nexmark.Config{Seed: 7, EventsPerSecond: 10_000_000}, 50_000, 100, q3Corruptions()...)
}

// TestQ3SlowRate runs 100 events a second with delays up to 3 s, where an
// auction may name a seller created hours earlier.
func TestQ3SlowRate(t *testing.T) {
	testQuery(t, q3(), testConfig, 50_000, 100, q3Corruptions()...)
}

func TestQ3RowSerde(t *testing.T) {
	in := Q3Row{Name: "Peter Shultz", City: "Bend", State: "OR", ID: 1234}
	b, _ := Q3RowSerde{}.Serialize(nil, in)
	out, err := Q3RowSerde{}.Deserialize(b)
	if err != nil || out != in {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	for k := range len(b) {
		if _, err := (Q3RowSerde{}).Deserialize(b[:k]); err == nil {
			t.Errorf("%d of %d bytes decoded", k, len(b))
		}
	}
	var cols []any
	if err := q3().Result.Rows(int64Key(nil, 1234), b, func(values ...any) { cols = values }); err != nil {
		t.Fatal(err)
	}
	if want := []any{"Peter Shultz", "Bend", "OR", int64(1234)}; len(cols) != len(q3().Result.Columns) || !slices.Equal(cols, want) {
		t.Errorf("row %v, want %v", cols, want)
	}
}

func TestQ3SellerSerde(t *testing.T) {
	for _, in := range []q3Seller{{Name: "Peter Shultz", City: "Bend", State: "OR", OK: true}, {}} {
		b, _ := q3SellerSerde{}.Serialize(nil, in)
		out, err := q3SellerSerde{}.Deserialize(b)
		if err != nil || out != in {
			t.Fatalf("round trip of %+v: %+v, %v", in, out, err)
		}
	}
}

// TestQ3SellerLater makes auctions name sellers that do not exist yet
// (with 20 active people, a third of the random sellers are among the ten
// ids ahead): the regular join still matches them once the person arrives.
func TestQ3SellerLater(t *testing.T) {
	cfg := nexmark.Config{Seed: 6, NumActivePeople: 20}
	const n = 50_000
	testQuery(t, q3(), cfg, n, 100)
	g, err := nexmark.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Count the matching pairs whose person comes after the auction.
	personAt := map[int64]int64{}
	for i := range int64(n) {
		if nexmark.KindOf(i) == nexmark.KindPerson {
			if e := g.Event(i); q3State(e.Person.State) {
				personAt[e.Person.ID] = i
			}
		}
	}
	later := 0
	for i := range int64(n) {
		if nexmark.KindOf(i) != nexmark.KindAuction {
			continue
		}
		e := g.Event(i)
		if p, ok := personAt[e.Auction.Seller]; ok && e.Auction.Category == q3Category && p > i {
			later++
		}
	}
	if later == 0 {
		t.Fatal("no auction arrived before its seller: the test does not exercise the join's other side")
	}
	t.Logf("%d matching auctions arrived before their seller", later)
}
