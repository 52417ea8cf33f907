package queries

import (
	"encoding/binary"
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

// TestQ5 runs 40 s of events (1,000 a second) so that about twenty
// windows close, then the suite's rate; the check must catch a count
// changed, a row added, a window missing and one that never held bids.
func TestQ5(t *testing.T) {
	lastWindow := func(outs []output) int64 { return int64(binary.BigEndian.Uint64(outs[len(outs)-1].key)) }
	for _, cfg := range []nexmark.Config{{Seed: 5, EventsPerSecond: 1000, ProbDelayedEvent: 0.1}, {Seed: 5}} {
		outs := testQuery(t, q5(), cfg, 40_000, 5,
			corruption{"a window's count changed", func(outs []output) []output {
				i := len(outs) - 1
				r, _ := Q5RowSerde{}.Deserialize(outs[i].value)
				r.Num++
				v, _ := Q5RowSerde{}.Serialize(nil, r)
				return withValue(outs, i, v)
			}},
			corruption{"an auction added to a window's hot items", func(outs []output) []output {
				o := outs[len(outs)-1]
				r, _ := Q5RowSerde{}.Deserialize(o.value)
				r.Auction++
				o.value, _ = Q5RowSerde{}.Serialize(nil, r)
				return append(outs, o)
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
			corruption{"a window that had no bids", func(outs []output) []output {
				o := outs[len(outs)-1]
				o.key = binary.BigEndian.AppendUint64(nil, uint64(lastWindow(outs)+100*q5Advance.Milliseconds()))
				return append(outs, o)
			}})
		windows := map[int64]bool{}
		for _, o := range outs {
			windows[int64(binary.BigEndian.Uint64(o.key))] = true
		}
		if want := 5; len(windows) < want {
			t.Errorf("%d windows, want at least %d", len(windows), want)
		}
		t.Logf("%d rows in %d windows", len(outs), len(windows))
	}
}

func TestQ5RowSerde(t *testing.T) {
	in := Q5Row{Auction: 1100, Num: -17}
	b, _ := Q5RowSerde{}.Serialize(nil, in)
	if out, err := (Q5RowSerde{}).Deserialize(b); err != nil || out != in {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	for k := range len(b) {
		if _, err := (Q5RowSerde{}).Deserialize(b[:k]); err == nil {
			t.Errorf("%d of %d bytes decoded", k, len(b))
		}
	}
}
