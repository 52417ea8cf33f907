package queries

import (
	"testing"
	"time"

	"github.com/eddy-streams/eddy/nexmark"
)

// TestQ16 runs q16 at 100 and 10M events/s, and at 100 events/s from
// 23:58 UTC, so the groups cross midnight and their minutes change.
func TestQ16(t *testing.T) {
	lateBase := time.Date(2026, 1, 1, 23, 58, 0, 0, time.UTC).UnixMilli()
	eachRate(t, func(t *testing.T, cfg nexmark.Config, g *nexmark.Generator) {
		const n = 30_000
		recs := driveQuery(t, q16(), g, n, nexmark.Topics{Bids: "bid"}, nil)
		requireUpsertChecked(t, func() Check { return q16().NewCheck(g, n) }, recs)
		minutes := map[string]bool{}
		for _, r := range recs {
			row, err := Q16RowSerde{}.Deserialize(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			minutes[row.Day+" "+row.Minute] = true
		}
		t.Logf("%d outputs, %d distinct (day, minute)s", len(recs), len(minutes))
	}, nexmark.Config{Seed: 9, EventsPerSecond: 100, BaseTime: lateBase})
}

func TestMinuteOfDay(t *testing.T) {
	for _, c := range []struct {
		at   time.Time
		want int64
	}{
		{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 0},
		{time.Date(2026, 1, 1, 23, 59, 59, 999e6, time.UTC), 1439},
		{time.Date(2026, 1, 1, 13, 7, 30, 0, time.UTC), 13*60 + 7},
	} {
		if got := minuteOfDay(c.at.UnixMilli()); got != c.want {
			t.Errorf("%v: %d, want %d", c.at, got, c.want)
		}
	}
}

func TestQ16Result(t *testing.T) {
	in := Q16Row{Channel: "Google", Day: "2026-01-01", Minute: "23:59", BidCounts: bidCountsOf([12]int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})}
	b, _ := Q16RowSerde{}.Serialize(nil, in)
	if out, err := (Q16RowSerde{}).Deserialize(b); err != nil || out != in {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	for k := range len(b) {
		if _, err := (Q16RowSerde{}).Deserialize(b[:k]); err == nil {
			t.Errorf("%d of %d bytes decoded", k, len(b))
		}
	}
	key, err := Q16KeySerde{}.Serialize(nil, Q16Key{Channel: "Google", Day: "2026-01-01"})
	if k, kerr := (Q16KeySerde{}).Deserialize(key); err != nil || kerr != nil || k != (Q16Key{Channel: "Google", Day: "2026-01-01"}) {
		t.Errorf("key round trip: %+v, %v, %v", k, err, kerr)
	}
	want := []any{"Google", "2026-01-01", "23:59"}
	for i := range 12 {
		want = append(want, int64(i+1))
	}
	requireRows(t, resultRows(t, q16(), key, b), want)
}
