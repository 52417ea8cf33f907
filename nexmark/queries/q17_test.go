package queries

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
)

// TestQ17 runs q17 at 100 and 10M events/s. At 100 the delayed events of the
// first 3 s fall on the day before the base time's midnight, at 10M the run starts a millisecond before it, so some
// auctions have rows of two days.
func TestQ17(t *testing.T) {
	eachRate(t, func(t *testing.T, cfg nexmark.Config, g *nexmark.Generator) {
		const n = 30_000
		recs := driveQuery(t, q17(), g, n, nexmark.Topics{Bids: "bid"}, nil)
		requireUpsertChecked(t, func() Check { return q17().NewCheck(g, n) }, recs)
		days := map[int64]map[string]bool{}
		for _, r := range recs {
			k, err := Q17KeySerde{}.Deserialize(r.Key)
			if err != nil {
				t.Fatal(err)
			}
			if days[k.Auction] == nil {
				days[k.Auction] = map[string]bool{}
			}
			days[k.Auction][k.Day] = true
		}
		twoDays := 0
		for _, d := range days {
			if len(d) > 1 {
				twoDays++
			}
		}
		t.Logf("%d outputs, %d auctions, %d of them with two days", len(recs), len(days), twoDays)
		if twoDays == 0 {
			t.Error("no auction has rows of two days")
		}
	})
}

// TestQ17AuctionSerde round-trips an auction of three days and refuses
// damaged encodings.
func TestQ17AuctionSerde(t *testing.T) {
	var a q17Auction
	base := time.Date(2026, 1, 1, 23, 59, 59, 0, time.UTC).UnixMilli()
	for i, p := range []int64{5, 20_000, 2_000_000, 7, 30} {
		a.add(p, base+int64(i)*1000*60*60*12) // half a day apart: three days
	}
	b, _ := q17AuctionSerde{}.Serialize(nil, a)
	got, err := q17AuctionSerde{}.Deserialize(b)
	if err != nil {
		t.Fatal(err)
	}
	var rows []Q17Row
	got.eachDay(func(d *q17Day) { rows = append(rows, d.row(1001)) })
	want := []Q17Row{
		{Auction: 1001, Day: "2026-01-01", TotalBids: 1, Rank1Bids: 1, MinPrice: 5, MaxPrice: 5, AvgPrice: 5, SumPrice: 5},
		{Auction: 1001, Day: "2026-01-02", TotalBids: 2, Rank2Bids: 1, Rank3Bids: 1, MinPrice: 20_000, MaxPrice: 2_000_000, AvgPrice: 1_010_000, SumPrice: 2_020_000},
		{Auction: 1001, Day: "2026-01-03", TotalBids: 2, Rank1Bids: 2, MinPrice: 7, MaxPrice: 30, AvgPrice: 18, SumPrice: 37},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows %+v, want %+v", rows, want)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("day %d: %+v, want %+v", i, rows[i], want[i])
		}
	}
	// A prefix decodes only if it ends at a day's end: it holds fewer days.
	for k := 1; k < len(b); k++ {
		a, err := q17AuctionSerde{}.Deserialize(b[:k])
		if n := 0; err == nil {
			a.eachDay(func(*q17Day) { n++ })
			if n >= 3 {
				t.Errorf("%d of %d bytes decoded as all three days", k, len(b))
			}
		}
	}
}

func TestUTCDay(t *testing.T) {
	for _, c := range []struct {
		ts   time.Time
		want string
	}{
		{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), "2026-01-01"},
		{time.Date(2025, 12, 31, 23, 59, 59, 999e6, time.UTC), "2025-12-31"},
		{time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC), "1969-12-31"},
		{time.Date(2024, 2, 29, 12, 0, 0, 0, time.UTC), "2024-02-29"},
	} {
		if got := formatDay(utcDay(c.ts.UnixMilli())); got != c.want {
			t.Errorf("%v: %s, want %s", c.ts, got, c.want)
		}
	}
}

func TestQ17Result(t *testing.T) {
	in := Q17Row{Auction: 1001, Day: "2026-01-01", TotalBids: 4, Rank1Bids: 1, Rank2Bids: 2, Rank3Bids: 1, MinPrice: 5, MaxPrice: 2_000_000, AvgPrice: 505_003, SumPrice: 2_020_012}
	b, _ := Q17RowSerde{}.Serialize(nil, in)
	if out, err := (Q17RowSerde{}).Deserialize(b); err != nil || out != in {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	for k := range len(b) {
		if _, err := (Q17RowSerde{}).Deserialize(b[:k]); err == nil {
			t.Errorf("%d of %d bytes decoded", k, len(b))
		}
	}
	key, _ := Q17KeySerde{}.Serialize(nil, Q17Key{Auction: 1001, Day: "2026-01-01"})
	if k, err := (Q17KeySerde{}).Deserialize(key); err != nil || k != (Q17Key{Auction: 1001, Day: "2026-01-01"}) {
		t.Errorf("key round trip: %+v, %v", k, err)
	}
	if !q17().Result.Upsert {
		t.Error("q17's result is not an upsert")
	}
	requireRows(t, resultRows(t, q17(), key, b), []any{int64(1001), "2026-01-01", int64(4), int64(1), int64(2), int64(1), int64(5), int64(2_000_000), int64(505_003), int64(2_020_012)})
}

// requireUpsertChecked requires the check of an updating result to pass
// on recs and to fail when a key's final row is dropped (every record of
// it: a query may repeat a row) or changed, when a stale record of a key
// comes last, and when a key not in the result is added. (A record
// dropped or repeated before its key's last one leaves an upsert result
// unchanged.)
func requireUpsertChecked(t *testing.T, newCheck func() Check, recs []eddy.Record[[]byte, []byte]) {
	t.Helper()
	if err := verifyRecords(newCheck, recs); err != nil {
		t.Fatalf("check of the query's output: %v", err)
	}
	// k is the key of a final row (at last) that had an earlier, other
	// value (at stale): the latest such key.
	var k []byte
	last, stale := -1, -1
	finals := map[string]bool{}
	for i := len(recs) - 1; i >= 0 && stale < 0; i-- {
		if finals[string(recs[i].Key)] {
			continue
		}
		finals[string(recs[i].Key)] = true
		for j := i - 1; j >= 0; j-- {
			if bytes.Equal(recs[j].Key, recs[i].Key) && !bytes.Equal(recs[j].Value, recs[i].Value) {
				k, last, stale = recs[i].Key, i, j
				break
			}
		}
	}
	if stale < 0 {
		t.Fatal("no key of the output has two values: the test proves little")
	}
	changed := slices.Clone(recs)
	v := bytes.Clone(changed[last].Value)
	v[len(v)-1] ^= 1
	changed[last].Value = v
	final := recs[last].Value
	var dropped []eddy.Record[[]byte, []byte]
	for _, r := range recs {
		if !bytes.Equal(r.Key, k) || !bytes.Equal(r.Value, final) {
			dropped = append(dropped, r)
		}
	}
	extra := recs[0]
	extra.Key = append(bytes.Clone(extra.Key), 0xff)
	wrongs := map[string][]eddy.Record[[]byte, []byte]{
		"a key's final row dropped": dropped,
		"a key's final row changed": changed,
		"an unexpected key":         append(slices.Clone(recs), extra),
		"a stale row last":          append(slices.Clone(recs), recs[stale]),
	}
	for name, wrong := range wrongs {
		if err := verifyRecords(newCheck, wrong); err == nil {
			t.Errorf("check passed with %s", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}
