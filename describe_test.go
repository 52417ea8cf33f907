package eddy_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/internal/plan"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
)

// TestDescribe: a grouping by a new key splits the topology in two
// sub-topologies joined by a repartition topic; Describe numbers them as
// Build does and names every node, topic and store with the app's names.
func TestDescribe(t *testing.T) {
	topo := eddy.NewTopology()
	s := eddy.Source(topo, "words", serde.String(), serde.String())
	g := eddy.GroupBy(s, func(_, word string) string { return word }, "by-word", serde.String(), serde.String())
	eddy.To(eddy.ToStream(eddy.Count(g, "word-counts")), "counts", serde.String(), serde.Int64())
	eddy.GlobalTableFrom(topo, "dictionary", "dict", serde.String(), serde.String())

	d := topo.Describe("wc")
	rt, err := plan.Build(topo, eddy.Config{AppID: "wc"})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Subtopologies) != len(rt.Subtopologies) {
		t.Fatalf("%d sub-topologies described, %d built", len(d.Subtopologies), len(rt.Subtopologies))
	}
	for i, sub := range d.Subtopologies {
		if sub.ID != i || !slices.Equal(sub.Sources, rt.Subtopologies[i].Sources) {
			t.Errorf("sub-topology %d: id %d, sources %v; built with %v", i, sub.ID, sub.Sources, rt.Subtopologies[i].Sources)
		}
	}
	if got := d.RepartitionTopics; !slices.Equal(got, []string{"wc-by-word-repartition"}) {
		t.Errorf("repartition topics %v", got)
	}
	if got := d.Subtopologies[0].Sinks; !slices.Equal(got, []string{"wc-by-word-repartition"}) {
		t.Errorf("first sub-topology writes %v, want the repartition topic", got)
	}
	if got := d.Subtopologies[1].Sinks; !slices.Equal(got, []string{"counts"}) {
		t.Errorf("second sub-topology writes %v, want counts", got)
	}
	if got := d.Subtopologies[1].Stores; len(got) != 1 || got[0].Name != "word-counts" || got[0].Changelog != "wc-word-counts-changelog" {
		t.Errorf("second sub-topology's stores %+v", got)
	}
	if got := d.GlobalStores; len(got) != 1 || got[0].Name != "dict" || got[0].Topic != "dictionary" {
		t.Errorf("global stores %+v", got)
	}

	// Each node: its kind, topic and links, consistent both ways.
	nodes := map[string]eddy.NodeDescription{}
	for _, sub := range d.Subtopologies {
		for _, n := range sub.Nodes {
			nodes[n.Name] = n
		}
	}
	var kinds []string
	for _, sub := range d.Subtopologies {
		for _, n := range sub.Nodes {
			kinds = append(kinds, n.Kind+":"+n.Topic)
			if strings.ContainsFunc(n.Name, func(r rune) bool { return r < ' ' }) {
				t.Errorf("node name %q holds a control character", n.Name)
			}
			for _, c := range n.Children {
				if !slices.Contains(nodes[c].Parents, n.Name) {
					t.Errorf("%s has child %s, which does not list it as a parent", n.Name, c)
				}
			}
			if (n.Kind == eddy.NodeSource || n.Kind == eddy.NodeSink) != (n.Topic != "") {
				t.Errorf("node %s of kind %s has topic %q", n.Name, n.Kind, n.Topic)
			}
			if n.Internal != strings.HasSuffix(n.Topic, "-repartition") {
				t.Errorf("node %s: internal %v for topic %s", n.Name, n.Internal, n.Topic)
			}
		}
	}
	for _, want := range []string{"source:words", "sink:wc-by-word-repartition", "source:wc-by-word-repartition", "sink:counts"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("nodes %v, want one %s", kinds, want)
		}
	}
	if _, err := json.Marshal(d); err != nil {
		t.Fatal(err)
	}
}
