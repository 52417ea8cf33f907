package queries

import (
	"encoding/binary"
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

func TestQ2(t *testing.T) {
	outs := testQuery(t, q2(), nexmark.Config{Seed: 3}, 60_000, 20,
		dropOne(func(n int) int { return n - 1 }),
		corruption{"one price changed", func(outs []output) []output {
			return withValue(outs, 1, binary.BigEndian.AppendUint64(nil, binary.BigEndian.Uint64(outs[1].value)+1))
		}},
		corruption{"one unselected bid added", func(outs []output) []output {
			o := outs[0]
			o.key = binary.BigEndian.AppendUint64(nil, binary.BigEndian.Uint64(o.key)+1)
			return append(outs, o)
		}})
	for _, o := range outs {
		if a := int64(binary.BigEndian.Uint64(o.key)); a%q2Modulus != 0 {
			t.Fatalf("auction %d selected", a)
		}
	}
}
