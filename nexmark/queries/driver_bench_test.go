//go:build unix

package queries

import (
	"fmt"
	"syscall"
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
// Compare the sizes' ns/event (wall clock) and cpu-ns/event (the CPU time
// the process used, the GC's included): on a machine shared with other
// work, the CPU time is the steadier of the two, since waiting for a core
// does not count in it. BENCHMARKS.md, "eddytest at scale", has figures.
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
				cpu := cpuTime(b)
				for range b.N {
					driveQuery(b, q, g, n, tc.in, nil)
				}
				cpu = cpuTime(b) - cpu
				events := float64(int64(b.N) * n)
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/events, "ns/event")
				b.ReportMetric(float64(cpu)/events, "cpu-ns/event")
			})
		}
	}
}

// cpuTime is the user and system CPU time the process used so far, in ns.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
