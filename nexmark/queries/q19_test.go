package queries

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

// lastIndex returns the index of the last output with key, or -1.
func lastIndex(outs []output, key []byte) int {
	for i := len(outs) - 1; i >= 0; i-- {
		if bytes.Equal(outs[i].key, key) {
			return i
		}
	}
	return -1
}

func q19Corruptions() []corruption {
	// withTop rewrites the last list of the last auction updated.
	withTop := func(outs []output, fn func(top []nexmark.Bid) []nexmark.Bid) []output {
		i := len(outs) - 1
		top, _ := Q19TopSerde().Deserialize(outs[i].value)
		v, _ := Q19TopSerde().Serialize(nil, fn(top))
		return withValue(outs, i, v)
	}
	return []corruption{
		{"two ranks swapped", func(outs []output) []output {
			return withTop(outs, func(top []nexmark.Bid) []nexmark.Bid { top[0], top[1] = top[1], top[0]; return top })
		}},
		{"the tenth left out", func(outs []output) []output {
			return withTop(outs, func(top []nexmark.Bid) []nexmark.Bid { return top[:len(top)-1] })
		}},
		{"a price changed", func(outs []output) []output {
			return withTop(outs, func(top []nexmark.Bid) []nexmark.Bid { top[0].Price++; return top })
		}},
		{"an auction's last update dropped", func(outs []output) []output {
			for i := len(outs) - 1; i >= 0; i-- {
				if lastIndex(outs[:i], outs[i].key) >= 0 {
					return append(outs[:i:i], outs[i+1:]...)
				}
			}
			panic("no auction updated twice")
		}},
		{"an auction missing", func(outs []output) []output {
			k := outs[0].key
			kept := outs[:0]
			for _, o := range outs {
				if !bytes.Equal(o.key, k) {
					kept = append(kept, o)
				}
			}
			return kept
		}},
		{"an unexpected auction", func(outs []output) []output {
			return append(outs, output{key: binary.BigEndian.AppendUint64(nil, 1<<40), value: outs[0].value})
		}},
	}
}

// TestQ19 runs the tests' slow rate and the suite's rate, where many bids
// of an auction share a millisecond.
func TestQ19(t *testing.T) {
	const n = 30_000
	atBothRates(t, func(t *testing.T, _ string, g *nexmark.Generator) {
		outs := driveChecked(t, q19(), g, n, nexmark.Topics{Bids: "bid"}, 1000, q19Corruptions()...)
		full := 0
		for _, o := range outs {
			top, _ := Q19TopSerde().Deserialize(o.value)
			if len(top) == q19N {
				full++
			}
		}
		if full == 0 {
			t.Fatal("no auction reached ten bids: the test does not exercise the top ten")
		}
		rows := testResultRows(t, q19(), outs, 8)
		last := outs[len(outs)-1]
		top, _ := Q19TopSerde().Deserialize(last.value)
		tail := rows[len(rows)-len(top):]
		for i, b := range top {
			if r := tail[i]; r[0] != b.Auction || r[2] != b.Price || r[5] != Timestamp(b.DateTime) || r[7] != int64(i+1) {
				t.Errorf("the last output's rank %d: %v, want auction %d, price %d, rank %d", i+1, r, b.Auction, b.Price, i+1)
			}
		}
	})
}
