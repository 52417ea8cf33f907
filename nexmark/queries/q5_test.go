package queries

import (
	"encoding/binary"
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

// TestQ5 runs 40 s of events (1,000 a second) so that about fifteen
// windows close.
func TestQ5(t *testing.T) {
	cfg := nexmark.Config{Seed: 5, EventsPerSecond: 1000, ProbDelayedEvent: 0.1}
	lastWindow := func(outs []output) int64 { return int64(binary.BigEndian.Uint64(outs[len(outs)-1].key)) }
	outs := testQuery(t, q5(), cfg, 40_000, 10,
		corruption{"a window's count changed", func(outs []output) []output {
			i := last(outs, lastWindow(outs))
			h, _ := HotItemsSerde{}.Deserialize(outs[i].value)
			h.Count++
			v, _ := HotItemsSerde{}.Serialize(nil, h)
			return withValue(outs, i, v)
		}},
		corruption{"an auction added to a window's hot items", func(outs []output) []output {
			i := last(outs, lastWindow(outs))
			h, _ := HotItemsSerde{}.Deserialize(outs[i].value)
			h.Auctions = append(h.Auctions, h.Auctions[0]+1)
			v, _ := HotItemsSerde{}.Serialize(nil, h)
			return withValue(outs, i, v)
		}},
		corruption{"a window missing", func(outs []output) []output {
			w := lastWindow(outs)
			kept := outs[:0]
			for _, o := range outs {
				if int64(binary.BigEndian.Uint64(o.key)) != w {
					kept = append(kept, o)
				}
			}
			return kept
		}},
		corruption{"a window that did not close", func(outs []output) []output {
			o := outs[len(outs)-1]
			o.key = binary.BigEndian.AppendUint64(nil, uint64(lastWindow(outs)+q5Advance.Milliseconds()))
			return append(outs, o)
		}})
	windows := map[int64]bool{}
	for _, o := range outs {
		windows[int64(binary.BigEndian.Uint64(o.key))] = true
	}
	if len(windows) < 10 {
		t.Errorf("%d windows closed, want at least 10", len(windows))
	}
}

func TestHotItemsSerde(t *testing.T) {
	in := HotItems{Count: 17, Auctions: []int64{1000, 1100, -1}}
	b, _ := HotItemsSerde{}.Serialize(nil, in)
	out, err := HotItemsSerde{}.Deserialize(b)
	if err != nil || out.Count != in.Count || len(out.Auctions) != 3 || out.Auctions[2] != -1 {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	for k := range len(b) {
		if _, err := (HotItemsSerde{}).Deserialize(b[:k]); err == nil {
			t.Errorf("%d of %d bytes decoded", k, len(b))
		}
	}
}
