package queries

import (
	"fmt"
	"testing"

	"github.com/eddy-streams/eddy/nexmark"
)

// BenchmarkDriver runs q4 (a stream-stream join) and q11 (session windows)
// through eddytest, whose in-memory store they scan on every record, at
// 25k to 500k events: the cost per event must not grow with the events
// (the store's scans are O(log n + k), and what the driver keeps of the
// outputs costs the GC nothing). Run it once per size:
//
//	go test -run XXX -bench BenchmarkDriver -benchtime 1x ./nexmark/queries/
//
// Compare the ns/event of the sizes (BENCHMARKS.md, "eddytest at scale").
func BenchmarkDriver(b *testing.B) {
	for _, tc := range []struct {
		name string
		in   nexmark.Topics // only the topics the query reads
	}{
		{"q4", nexmark.Topics{Auctions: "auction", Bids: "bid"}},
		{"q11", nexmark.Topics{Bids: "bid"}},
	} {
		name := tc.name
		q, ok := Lookup(name)
		if !ok {
			b.Fatalf("no %s", name)
		}
		for _, n := range []int64{25_000, 50_000, 100_000, 250_000, 500_000} {
			b.Run(fmt.Sprintf("%s/%dk", name, n/1000), func(b *testing.B) {
				g, err := nexmark.New(testConfig)
				if err != nil {
					b.Fatal(err)
				}
				for range b.N {
					driveQuery(b, q, g, n, tc.in, nil)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*n), "ns/event")
			})
		}
	}
}
