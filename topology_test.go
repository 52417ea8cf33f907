package eddy_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// TestTopologyLoopRefused: a topology that writes a topic it reads
// upstream of the writer, directly or through another topic, is refused
// with the writing operator named; a chain through a topic is not a loop.
func TestTopologyLoopRefused(t *testing.T) {
	direct := eddy.NewTopology()
	in := eddy.Source(direct, "in", serde.String(), serde.String())
	eddy.To(eddy.MapValues(in, func(_, v string) string { return v + "!" }), "in", serde.String(), serde.String())

	through := eddy.NewTopology()
	a := eddy.Source(through, "a", serde.String(), serde.String())
	eddy.To(a, "b", serde.String(), serde.String())
	b := eddy.Source(through, "b", serde.String(), serde.String())
	eddy.To(b, "a", serde.String(), serde.String())

	for name, topo := range map[string]*eddy.Topology{"direct": direct, "through another topic": through} {
		_, err := eddytest.New(topo, eddytest.Options{})
		if err == nil || !strings.Contains(err.Error(), "operator sink-") || !strings.Contains(err.Error(), "without end") {
			t.Errorf("%s: New: %v; want the loop refused, naming the writing operator", name, err)
		}
	}

	chain := eddy.NewTopology()
	eddy.To(eddy.Source(chain, "a", serde.String(), serde.String()), "b", serde.String(), serde.String())
	eddy.To(eddy.Source(chain, "b", serde.String(), serde.String()), "c", serde.String(), serde.String())
	d, err := eddytest.New(chain, eddytest.Options{})
	if err != nil {
		t.Fatalf("chain a → b → c: %v; want it accepted", err)
	}
	d.Close()
}

// TestSinklessTopologyWarned: a topology that writes no topic and keeps no
// store is accepted (a Process may have side effects) with a warning.
func TestSinklessTopologyWarned(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(*eddy.Topology)
		warn  bool
	}{
		{"filter only", func(topo *eddy.Topology) {
			eddy.Filter(eddy.Source(topo, "in", serde.String(), serde.String()), func(string, string) bool { return true })
		}, true},
		{"to", func(topo *eddy.Topology) {
			eddy.To(eddy.Source(topo, "in", serde.String(), serde.String()), "out", serde.String(), serde.String())
		}, false},
		{"store", func(topo *eddy.Topology) {
			eddy.Count(eddy.GroupByKey(eddy.Source(topo, "in", serde.String(), serde.String()), serde.String()), "counts")
		}, false},
	} {
		topo := eddy.NewTopology()
		tc.build(topo)
		var log bytes.Buffer
		_, err := eddy.New(topo, eddy.Config{AppID: "app", Brokers: []string{"127.0.0.1:1"}, StateDir: t.TempDir(),
			Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if err != nil {
			t.Fatalf("%s: New: %v", tc.name, err)
		}
		if warned := strings.Contains(log.String(), "results go nowhere"); warned != tc.warn {
			t.Errorf("%s: warned %v, want %v; log:\n%s", tc.name, warned, tc.warn, log.String())
		}
	}
}

// TestTopologyErrorsNameTheOperator: of two windowed aggregations, the one
// with a bad window is named in the error with its position.
func TestTopologyErrorsNameTheOperator(t *testing.T) {
	topo := eddy.NewTopology()
	g := eddy.GroupByKey(eddy.Source(topo, "in", serde.String(), serde.String()), serde.String())
	eddy.WindowCount(eddy.WindowedBy(g, eddy.TumblingWindows(time.Minute)), "good")
	eddy.WindowCount(eddy.WindowedBy(g, eddy.TumblingWindows(-time.Minute)), "bad")
	err := topo.Err()
	if err == nil || !strings.Contains(err.Error(), "WindowedBy after source-in-0 (operator 2 of the topology)") {
		t.Fatalf("Err() = %v; want the bad WindowedBy named with its position", err)
	}
}
