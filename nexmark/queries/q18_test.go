package queries

import (
	"bytes"
	"slices"
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

// q18Corruptions damage the result as a table: the last update of a key
// is what counts, so each one changes a last update or the keys.
func q18Corruptions(g *nexmark.Generator, n int64) []corruption {
	lastOf := func(outs []output, key []byte) int {
		for i := len(outs) - 1; i >= 0; i-- {
			if bytes.Equal(outs[i].key, key) {
				return i
			}
		}
		return -1
	}
	return []corruption{
		{"a key's last bid changed", func(outs []output) []output {
			i := len(outs) - 1
			v := bytes.Clone(outs[i].value)
			v[len(v)-1] ^= 1
			return withValue(outs, i, v)
		}},
		{"a key's last update dropped", func(outs []output) []output {
			// The last update of a key with several: the one before is
			// an earlier bid.
			for i := len(outs) - 1; i >= 0; i-- {
				if lastOf(outs[:i], outs[i].key) >= 0 && lastOf(outs, outs[i].key) == i {
					return append(outs[:i:i], outs[i+1:]...)
				}
			}
			panic("no key updated twice")
		}},
		{"a key missing", func(outs []output) []output {
			// A key with one update.
			for i := range outs {
				if lastOf(outs, outs[i].key) == i && lastOf(outs[:i], outs[i].key) < 0 {
					return append(outs[:i:i], outs[i+1:]...)
				}
			}
			panic("no key updated once")
		}},
		{"an unexpected key", func(outs []output) []output {
			k, _ := q18KeySerde{}.Serialize(nil, Q18Key{Bidder: -1, Auction: -1})
			return append(outs, output{key: k, value: outs[0].value})
		}},
		{"a tie of dateTime broken the other way", func(outs []output) []output {
			// Find a key whose last bid has the time of another, and
			// report the other.
			c := q18().NewCheck(g, n).(*q18Check)
			want := c.reference()
			for i := range n {
				if nexmark.KindOf(i) != nexmark.KindBid {
					continue
				}
				b := g.Event(i).Bid
				k := Q18Key{Bidder: b.Bidder, Auction: b.Auction}
				w := g.Event(want[k]).Bid
				if want[k] == i || w.DateTime != b.DateTime {
					continue
				}
				key, _ := q18KeySerde{}.Serialize(nil, k)
				v, _ := nexmark.BidSerde().Serialize(nil, b)
				return withValue(outs, lastOf(outs, key), v)
			}
			panic("no tie")
		}},
	}
}

// TestQ18 runs the tests' slow rate, where a bidder's bids on an auction
// are seconds apart and delays reorder them, and the suite's rate, where
// many fall in one millisecond and the tie-break decides.
func TestQ18(t *testing.T) {
	const n = 30_000
	atBothRates(t, func(t *testing.T, name string, g *nexmark.Generator) {
		corruptions := q18Corruptions(g, n)
		if name == "100/s" {
			corruptions = corruptions[:4] // no two bids of a key share a millisecond
		}
		outs := driveChecked(t, q18(), g, n, nexmark.Topics{Bids: "bid"}, 1000, corruptions...)
		rows := testResultRows(t, q18(), outs, 7)
		b, _ := nexmark.BidSerde().Deserialize(outs[0].value)
		want := []any{b.Auction, b.Bidder, b.Price, b.Channel, b.URL, Timestamp(b.DateTime), b.Extra}
		if len(rows) != len(outs) || !slices.Equal(rows[0], want) {
			t.Errorf("%d rows of %d outputs, the first %v, want %v", len(rows), len(outs), rows[0], want)
		}
	})
}

// atBothRates runs test as a subtest at the tests' slow rate
// (testConfig, name "100/s") and at the suite's ("10M/s").
func atBothRates(t *testing.T, test func(t *testing.T, name string, g *nexmark.Generator)) {
	for _, r := range []struct {
		name string
		cfg  nexmark.Config
	}{{"100/s", testConfig}, {"10M/s", nexmark.Config{Seed: 7, EventsPerSecond: 10_000_000}}} {
		t.Run(r.name, func(t *testing.T) {
			g, err := nexmark.New(r.cfg)
			if err != nil {
				t.Fatal(err)
			}
			test(t, r.name, g)
		})
	}
}

func TestQ18KeySerde(t *testing.T) {
	in := Q18Key{Bidder: 1234, Auction: -5}
	b, _ := Q18KeySerde().Serialize(nil, in)
	out, err := Q18KeySerde().Deserialize(b)
	if err != nil || out != in || len(b) != 16 {
		t.Fatalf("round trip: %+v, %v (%d bytes)", out, err, len(b))
	}
	if _, err := Q18KeySerde().Deserialize(b[:15]); err == nil {
		t.Error("15 bytes decoded")
	}
}

// driveChecked runs q over events [0, n) of g through driveQuery, requires
// at least minOut outputs and q's check to pass, then requires the check
// to fail on each corruption of the output.
func driveChecked(t *testing.T, q Query, g *nexmark.Generator, n int64, in nexmark.Topics, minOut int, corruptions ...corruption) []output {
	t.Helper()
	recs := driveQuery(t, q, g, n, in, nil)
	outs := make([]output, len(recs))
	for i, r := range recs {
		outs[i] = output{key: r.Key, value: r.Value, ts: r.Timestamp}
	}
	if len(outs) < minOut {
		t.Fatalf("%s wrote %d records over %d events, want at least %d", q.Name, len(outs), n, minOut)
	}
	if err := verify(q, g, n, outs); err != nil {
		t.Fatalf("%s over %d events: %v", q.Name, n, err)
	}
	for _, c := range corruptions {
		if err := verify(q, g, n, c.fn(slices.Clone(outs))); err == nil {
			t.Errorf("%s: the check passed with %s", q.Name, c.name)
		} else {
			t.Logf("%s: %s: %v", q.Name, c.name, err)
		}
	}
	return outs
}

// testResultRows decodes every output with q.Result.Rows and requires
// each row to have a value per column, of the types Result allows; it
// returns the rows.
func testResultRows(t *testing.T, q Query, outs []output, columns int) [][]any {
	t.Helper()
	if len(q.Result.Columns) != columns {
		t.Fatalf("%d columns %v, want %d", len(q.Result.Columns), q.Result.Columns, columns)
	}
	var rows [][]any
	for i, o := range outs {
		err := q.Result.Rows(o.key, o.value, func(values ...any) {
			if len(values) != columns {
				t.Fatalf("output %d: a row of %d values, want %d", i, len(values), columns)
			}
			for j, v := range values {
				switch v.(type) {
				case int64, float64, string, nil:
				default:
					t.Fatalf("output %d, column %s: %T", i, q.Result.Columns[j], v)
				}
			}
			rows = append(rows, values)
		})
		if err != nil {
			t.Fatalf("output %d: %v", i, err)
		}
	}
	return rows
}
