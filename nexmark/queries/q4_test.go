package queries

import (
	"encoding/binary"
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

func q4Corruptions() []corruption {
	lastCat := func(outs []output) int64 { return int64(binary.BigEndian.Uint64(outs[len(outs)-1].key)) }
	return []corruption{
		{"a category's last average changed", func(outs []output) []output {
			i := len(outs) - 1
			return withValue(outs, i, binary.BigEndian.AppendUint64(nil, binary.BigEndian.Uint64(outs[i].value)+1))
		}},
		{"a category's last update dropped", func(outs []output) []output {
			// The update before the last of a category is the
			// subtraction of the same auction's old maximum: it differs.
			return outs[:len(outs)-1]
		}},
		{"a category missing", func(outs []output) []output {
			c := lastCat(outs)
			kept := outs[:0]
			for _, o := range outs {
				if int64(binary.BigEndian.Uint64(o.key)) != c {
					kept = append(kept, o)
				}
			}
			return kept
		}},
		{"an unexpected category", func(outs []output) []output {
			o := outs[0]
			o.key = binary.BigEndian.AppendUint64(nil, nexmark.FirstCategoryID+nexmark.NumCategories)
			return append(outs, o)
		}},
	}
}

// TestQ4 runs the suite's rate, where an auction lasts milliseconds.
func TestQ4(t *testing.T) {
	testQuery(t, q4(), nexmark.Config{Seed: 7, EventsPerSecond: 10_000_000}, 30_000, 100, q4Corruptions()...)
}

// TestQ4SlowRate runs 100 events a second with delays up to 3 s, where
// auctions last up to half a minute and delayed auctions often arrive
// after bids within them.
func TestQ4SlowRate(t *testing.T) {
	cfg := testConfig
	const n = 20_000
	testQuery(t, q4(), cfg, n, 100, q4Corruptions()...)
	g, err := nexmark.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The valid pairs whose bid comes before its auction: the SQL join
	// matches them, and so must eddy's.
	auctionAt := map[int64]int64{}
	auctions := map[int64]nexmark.Auction{}
	for i := range int64(n) {
		if nexmark.KindOf(i) == nexmark.KindAuction {
			e := g.Event(i)
			auctionAt[e.Auction.ID], auctions[e.Auction.ID] = i, e.Auction
		}
	}
	early := 0
	for i := range int64(n) {
		if nexmark.KindOf(i) != nexmark.KindBid {
			continue
		}
		b := g.Event(i).Bid
		if a, ok := auctions[b.Auction]; ok && auctionAt[b.Auction] > i && a.DateTime <= b.DateTime && b.DateTime <= a.Expires {
			early++
		}
	}
	if early == 0 {
		t.Fatal("no valid bid arrived before its auction: the test does not exercise the join's other side")
	}
	t.Logf("%d valid bids arrived before their auction", early)
}

func TestQ4Result(t *testing.T) {
	var cols []any
	if err := q4().Result.Rows(int64Key(nil, 12), int64Key(nil, 3456), func(values ...any) { cols = values }); err != nil {
		t.Fatal(err)
	}
	if len(cols) != len(q4().Result.Columns) || cols[0] != int64(12) || cols[1] != int64(3456) {
		t.Errorf("row %v for columns %v", cols, q4().Result.Columns)
	}
	if err := q4().Result.Rows(int64Key(nil, 12), []byte{1}, func(...any) {}); err == nil {
		t.Error("a value of 1 byte decoded")
	}
}

func TestSumCount(t *testing.T) {
	for _, c := range []struct {
		s    sumCount
		want int64
	}{{sumCount{7, 2}, 3}, {sumCount{0, 0}, 0}, {sumCount{10, 5}, 2}} {
		if got := c.s.avg(); got != c.want {
			t.Errorf("%+v.avg() = %d, want %d", c.s, got, c.want)
		}
	}
}
