package local_test

import (
	"context"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/harness/local"
	"github.com/eddy-streams/eddy/internal/plan"
	"github.com/eddy-streams/eddy/nexmark"
	"github.com/eddy-streams/eddy/nexmark/queries"
	"github.com/eddy-streams/eddy/state/pebble"
)

// BenchmarkRunner measures the in-process runner's cost per source event
// on Nexmark q1 (a map of every bid to the output): the generator, the
// decode, the topology and the runner's per-record path, one commit at the
// end. Allocations per event should stay near zero.
func BenchmarkRunner(b *testing.B) {
	q, ok := queries.Lookup("q1")
	if !ok {
		b.Fatal("no q1")
	}
	g, err := nexmark.New(nexmark.Config{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	topo := eddy.NewTopology()
	q.Build(topo, nexmark.DefaultTopics(), "out")
	rt, err := plan.Build(topo, eddy.Config{AppID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	backend := pebble.New(pebble.Options{})
	defer backend.Close()
	r, err := local.New(rt, []local.Source{g.Source(nexmark.DefaultTopics())}, local.Config{Backend: backend, Dir: b.TempDir(), CommitInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	b.ReportAllocs()
	b.ResetTimer()
	if err := r.Run(context.Background(), int64(b.N), nil); err != nil {
		b.Fatal(err)
	}
}
