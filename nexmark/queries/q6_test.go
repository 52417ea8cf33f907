package queries

import (
	"encoding/binary"
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

func q6Corruptions() []corruption {
	lastSeller := func(outs []output) int64 { return int64(binary.BigEndian.Uint64(outs[len(outs)-1].key)) }
	return []corruption{
		{"a seller's last average changed", func(outs []output) []output {
			i := len(outs) - 1
			return withValue(outs, i, binary.BigEndian.AppendUint64(nil, binary.BigEndian.Uint64(outs[i].value)+1))
		}},
		{"a seller missing", func(outs []output) []output {
			s := lastSeller(outs)
			kept := outs[:0]
			for _, o := range outs {
				if int64(binary.BigEndian.Uint64(o.key)) != s {
					kept = append(kept, o)
				}
			}
			return kept
		}},
		{"a seller's last update a tombstone", func(outs []output) []output {
			return append(outs, output{key: outs[0].key})
		}},
		{"an unexpected seller", func(outs []output) []output {
			return append(outs, output{key: binary.BigEndian.AppendUint64(nil, 1<<40), value: outs[0].value})
		}},
	}
}

// TestQ6 runs the tests' slow rate, where auctions last up to half a
// minute, and the suite's rate, where a seller's auctions follow one
// another within milliseconds. At both, valid bids come before their
// auction (the generator delays some events), which the join must keep.
func TestQ6(t *testing.T) {
	const n = 40_000
	atBothRates(t, func(t *testing.T, _ string, g *nexmark.Generator) {
		auctionAt := map[int64]int64{}
		auctions := map[int64]nexmark.Auction{}
		for i := range int64(n) {
			if nexmark.KindOf(i) == nexmark.KindAuction {
				a := g.Event(i).Auction
				auctionAt[a.ID], auctions[a.ID] = i, a
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
			t.Fatal("no valid bid came before its auction: the test does not exercise the join's pending bids")
		}
		outs := driveChecked(t, q6(), g, n, nexmark.Topics{Auctions: "auction", Bids: "bid"}, 100, q6Corruptions()...)
		want := q6().NewCheck(g, n).(*q6Check).reference()
		full := 0
		for _, w := range want {
			if len(w.rows) == q6Rows {
				full++
			}
		}
		if full == 0 {
			t.Fatal("no seller has 11 auctions with bids: the test does not exercise the window")
		}
		t.Logf("%d outputs, %d sellers, %d with a full window, %d valid bids before their auction", len(outs), len(want), full, early)
		rows := testResultRows(t, q6(), outs[len(outs)-1:], 2)
		if len(rows) != 1 || rows[0][0] != int64(binary.BigEndian.Uint64(outs[len(outs)-1].key)) {
			t.Errorf("the last output's row: %v", rows)
		}
	})
}

func TestQ6AuctionSerde(t *testing.T) {
	in := q6Auction{Known: true, HasTop: true, Start: 1, Expires: 9, Seller: 1001, Top: q6Bid{Price: 70, DateTime: 5},
		Pending: []q6Bid{{Price: 3, DateTime: -1}}}
	b, _ := q6AuctionSerde{}.Serialize(nil, in)
	out, err := q6AuctionSerde{}.Deserialize(b)
	if err != nil || out.Known != in.Known || out.HasTop != in.HasTop || out.Top != in.Top || out.Seller != in.Seller ||
		len(out.Pending) != 1 || out.Pending[0] != in.Pending[0] {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	for k := range len(b) {
		if _, err := (q6AuctionSerde{}).Deserialize(b[:k]); err == nil {
			t.Errorf("%d of %d bytes decoded", k, len(b))
		}
	}
}
