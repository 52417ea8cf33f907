package queries

import (
	"testing"
	"time"

	"github.com/eddy-streams/eddy/nexmark"
)

// TestQ14 runs q14 at the test rate (100 events/s), at the suite's rate
// (10M events/s), and at half an event a second, where 30,000 events span
// 16 hours and the output has all three kinds of hour.
func TestQ14(t *testing.T) {
	eachRate(t, func(t *testing.T, cfg nexmark.Config, g *nexmark.Generator) {
		const n = 30_000
		recs := driveQuery(t, q14(), g, n, nexmark.Topics{Bids: "bid"}, nil)
		requireChecked(t, func() Check { return q14().NewCheck(g, n) }, recs)
		kinds := map[string]int{}
		for _, r := range recs {
			row, err := Q14RowSerde{}.Deserialize(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			kinds[row.BidTimeType]++
		}
		t.Logf("%d rows of %d events: %v", len(recs), n, kinds)
		if cfg.EventsPerSecond < 1 && len(kinds) != 3 {
			t.Errorf("kinds of hour %v, want all three over 16 hours", kinds)
		}
	}, nexmark.Config{Seed: 8, EventsPerSecond: 0.5})
}

// eachRate runs test once per config: the test rate (100 events/s), the
// suite's (10M events/s), then more; each subtest named after its rate.
func eachRate(t *testing.T, test func(t *testing.T, cfg nexmark.Config, g *nexmark.Generator), more ...nexmark.Config) {
	// The suite's rate, in order, from a millisecond before midnight: the
	// queries keyed by day see two days (at the test rate, the delayed
	// events of the first 3 s fall on the day before).
	suite := nexmark.Config{Seed: 7, EventsPerSecond: 10_000_000, BaseTime: nexmark.DefaultBaseTime - 1}
	for _, cfg := range append([]nexmark.Config{testConfig, suite}, more...) {
		t.Run(eventRateName(cfg), func(t *testing.T) {
			g, err := nexmark.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			test(t, cfg, g)
		})
	}
}

// eventRateName names a subtest after its config's event rate.
func eventRateName(cfg nexmark.Config) string {
	return time.Duration(float64(time.Second)/cfg.EventsPerSecond).String() + "-per-event"
}

func TestBidTimeType(t *testing.T) {
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for h := range 24 {
		for _, m := range []time.Duration{0, 59*time.Minute + 59*time.Second + 999*time.Millisecond} {
			ts := day.Add(time.Duration(h)*time.Hour + m).UnixMilli()
			want := "otherTime"
			switch h {
			case 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18:
				want = "dayTime"
			case 0, 1, 2, 3, 4, 5, 6, 20, 21, 22, 23:
				want = "nightTime"
			}
			if got := bidTimeType(ts); got != want {
				t.Errorf("hour %d + %v: %s, want %s", h, m, got, want)
			}
		}
	}
}

func TestQ14Result(t *testing.T) {
	in := Q14Row{Auction: 1001, Bidder: 2002, PriceMilli: 908 * 1_234_567, BidTimeType: "dayTime", DateTime: 1_767_225_600_123, Extra: "accbc", CCounts: 3}
	b, _ := Q14RowSerde{}.Serialize(nil, in)
	if out, err := (Q14RowSerde{}).Deserialize(b); err != nil || out != in {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	for k := range len(b) {
		if _, err := (Q14RowSerde{}).Deserialize(b[:k]); err == nil {
			t.Errorf("%d of %d bytes decoded", k, len(b))
		}
	}
	got := resultRows(t, q14(), nil, b)
	want := []any{int64(1001), int64(2002), "1120986.836", "dayTime", "2026-01-01 00:00:00.123", "accbc", int64(3)}
	requireRows(t, got, want)
	for _, c := range []struct {
		v    int64
		want string
	}{{0, "0.000"}, {7, "0.007"}, {1000, "1.000"}, {908_000_000_001, "908000000.001"}, {-1500, "-1.500"}} {
		if got := decimal3(c.v); got != c.want {
			t.Errorf("decimal3(%d) = %s, want %s", c.v, got, c.want)
		}
	}
}

// resultRows decodes one output record with q's Result.Rows, requiring
// one value per column, each int64, float64, string or nil.
func resultRows(t *testing.T, q Query, key, value []byte) [][]any {
	t.Helper()
	var rows [][]any
	err := q.Result.Rows(key, value, func(values ...any) {
		if len(values) != len(q.Result.Columns) {
			t.Errorf("%s: a row of %d values, want %d (%v)", q.Name, len(values), len(q.Result.Columns), q.Result.Columns)
		}
		for i, v := range values {
			switch v.(type) {
			case int64, float64, string, nil:
			default:
				t.Errorf("%s: column %d is a %T", q.Name, i, v)
			}
		}
		rows = append(rows, values)
	})
	if err != nil {
		t.Fatalf("%s: Rows: %v", q.Name, err)
	}
	return rows
}

// requireRows requires rows to be want, row by row.
func requireRows(t *testing.T, rows [][]any, want ...[]any) {
	t.Helper()
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i := range rows {
		if len(rows[i]) != len(want[i]) {
			t.Fatalf("row %d: %v, want %v", i, rows[i], want[i])
		}
		for j := range rows[i] {
			if rows[i][j] != want[i][j] {
				t.Errorf("row %d column %d: %#v, want %#v", i, j, rows[i][j], want[i][j])
			}
		}
	}
}
