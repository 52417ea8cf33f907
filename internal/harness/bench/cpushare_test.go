package bench

import "testing"

func TestCPUKind(t *testing.T) {
	for fn, want := range map[string]string{
		"github.com/eddy-streams/eddy/nexmark.bidSerde.Deserialize":              "encoding",
		"github.com/eddy-streams/eddy/nexmark.(*decoder).uvarint":                "encoding",
		"github.com/eddy-streams/eddy/nexmark.(*Generator).drawPerson":           "generator",
		"github.com/eddy-streams/eddy/nexmark/queries.(*q7Highest).offer":        "query",
		"github.com/eddy-streams/eddy/nexmark/queries.Q7RowSerde.Deserialize":    "encoding",
		"github.com/cockroachdb/pebble/v2.(*Batch).Set":                          "pebble",
		"github.com/eddy-streams/eddy/state.(*StoreBuffer).Get":                  "state",
		"github.com/eddy-streams/eddy.(*windowAggregator[...]).receive":          "engine",
		"github.com/eddy-streams/eddy/internal/runtime.(*InProcessTask).produce": "engine",
		"runtime.memmove":            "copy",
		"runtime.mapaccess2_faststr": "maps",
		"runtime.mallocgc":           "runtime",
		"syscall.Syscall6":           "syscalls",
		"crypto/sha256.block":        "other",
	} {
		if got := cpuKind(fn); got != want {
			t.Errorf("cpuKind(%q) = %s, want %s", fn, got, want)
		}
	}
}
