package eddy_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
)

// clicksTopology counts clicks per user: the clicks are keyed by session,
// so SelectKey re-keys them by user and GroupByKey repartitions them.
// filter adds an operator before the re-key (a change of the topology);
// name names the re-keyed stream's operator (eddy.Named) unless empty.
func clicksTopology(filter bool, name string) *eddy.Topology {
	topo := eddy.NewTopology()
	clicks := eddy.Source(topo, "clicks", serde.String(), serde.String()) // session -> user
	if filter {
		clicks = eddy.Filter(clicks, func(_, user string) bool { return user != "bot" })
	}
	byUser := eddy.SelectKey(clicks, func(_, user string) string { return user })
	if name != "" {
		byUser = eddy.Named(byUser, name)
	}
	counts := eddy.Count(eddy.GroupByKey(byUser, serde.String()), "clicks-per-user")
	eddy.To(eddy.ToStream(counts), "click-counts", serde.String(), serde.Int64())
	return topo
}

// internalTopics are the topics of d that carry the app id: repartition
// topics and changelogs.
func internalTopics(d eddy.TopologyDescription) []string {
	topics := slices.Clone(d.RepartitionTopics)
	for _, sub := range d.Subtopologies {
		for _, st := range sub.Stores {
			topics = append(topics, st.Name+"="+st.Changelog)
		}
	}
	return topics
}

// TestNamedKeepsInternalTopics: adding a Filter before a named re-key
// keeps the repartition topic, the store and its changelog; without
// Named the repartition topic moves (the store, named by Count, stays).
func TestNamedKeepsInternalTopics(t *testing.T) {
	before := clicksTopology(false, "by-user").Describe("app")
	after := clicksTopology(true, "by-user").Describe("app")
	want := []string{"app-by-user-repartition", "clicks-per-user=app-clicks-per-user-changelog"}
	if got := internalTopics(before); !slices.Equal(got, want) {
		t.Errorf("named, before the filter: %v, want %v", got, want)
	}
	if got := internalTopics(after); !slices.Equal(got, want) {
		t.Errorf("named, after the filter: %v, want %v", got, want)
	}

	before = clicksTopology(false, "").Describe("app")
	after = clicksTopology(true, "").Describe("app")
	if got, want := internalTopics(before), []string{"app-rekey-1-repartition", "clicks-per-user=app-clicks-per-user-changelog"}; !slices.Equal(got, want) {
		t.Errorf("unnamed, before the filter: %v, want %v", got, want)
	}
	if got, want := internalTopics(after), []string{"app-rekey-2-repartition", "clicks-per-user=app-clicks-per-user-changelog"}; !slices.Equal(got, want) {
		t.Errorf("unnamed, after the filter: %v, want %v (the repartition moves with the operator's position)", got, want)
	}
}

// TestDescribeShowsNamed: the named operator is described by its name,
// marked Named, and its neighbours link to it by that name; the others
// keep their "<kind>-<position>" names.
func TestDescribeShowsNamed(t *testing.T) {
	d := clicksTopology(true, "by-user").Describe("app")
	var named []string
	nodes := map[string]eddy.NodeDescription{}
	for _, sub := range d.Subtopologies {
		for _, n := range sub.Nodes {
			nodes[n.Name] = n
			if n.Named {
				named = append(named, n.Name)
			}
		}
	}
	if !slices.Equal(named, []string{"by-user"}) {
		t.Fatalf("named nodes %v, want [by-user]", named)
	}
	n := nodes["by-user"]
	if n.Kind != eddy.NodeProcessor || !slices.Equal(n.Parents, []string{"filter-1"}) || len(n.Children) != 1 {
		t.Errorf("by-user: %+v", n)
	}
	sink := nodes[n.Children[0]]
	if sink.Kind != eddy.NodeSink || sink.Topic != "app-by-user-repartition" || !sink.Internal || sink.Named {
		t.Errorf("by-user's child: %+v, want the unnamed sink of app-by-user-repartition", sink)
	}
}

// TestNamedRefusesBadNames: a name that cannot name a topic, one already
// taken, a second name, and a name given after the grouping are refused
// with an error naming the operator and the name.
func TestNamedRefusesBadNames(t *testing.T) {
	src := func() (*eddy.Topology, eddy.Stream[string, string]) {
		topo := eddy.NewTopology()
		return topo, eddy.Source(topo, "clicks", serde.String(), serde.String())
	}
	rekey := func(s eddy.Stream[string, string]) eddy.Stream[string, string] {
		return eddy.SelectKey(s, func(_, v string) string { return v })
	}
	cases := []struct {
		name  string
		build func() *eddy.Topology
		want  []string
	}{
		{"topic characters", func() *eddy.Topology {
			topo, s := src()
			eddy.Named(rekey(s), "by user")
			return topo
		}, []string{`Named(select-key-1, "by user")`, "letters, digits"}},
		{"taken by a named operator", func() *eddy.Topology {
			topo, s := src()
			eddy.Named(eddy.Filter(s, func(string, string) bool { return true }), "x")
			eddy.Named(rekey(s), "x")
			return topo
		}, []string{`Named(select-key-2, "x")`, `another operator is called "x"`}},
		{"taken by an unnamed operator", func() *eddy.Topology {
			topo, s := src()
			eddy.Named(rekey(s), "source-clicks-0")
			return topo
		}, []string{`another operator is called "source-clicks-0"`}},
		{"an unnamed operator added later takes it", func() *eddy.Topology {
			topo, s := src()
			eddy.Named(rekey(s), "filter-2")
			eddy.Filter(s, func(string, string) bool { return true })
			return topo
		}, []string{`"filter-2"`, "operator 2 of the topology"}},
		{"named twice", func() *eddy.Topology {
			topo, s := src()
			eddy.Named(eddy.Named(rekey(s), "a"), "b")
			return topo
		}, []string{`Named(a, "b")`, `already named "a"`}},
		{"after the grouping", func() *eddy.Topology {
			topo, s := src()
			r := rekey(s)
			eddy.Count(eddy.GroupByKey(r, serde.String()), "counts")
			eddy.Named(r, "by-user")
			return topo
		}, []string{`Named(select-key-1, "by-user")`, "<app-id>-rekey-1-repartition", "call Named before"}},
		{"repartition name taken", func() *eddy.Topology {
			topo, s := src()
			eddy.Repartition(s, "by-user", serde.String(), serde.String())
			eddy.Count(eddy.GroupByKey(eddy.Named(rekey(s), "by-user"), serde.String()), "counts")
			return topo
		}, []string{"GroupByKey after by-user", `repartition is named "by-user"`, "already declared"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.build().Err()
			if missing := errLacks(err, c.want...); len(missing) > 0 {
				t.Errorf("error %v lacks %q", err, missing)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "eddy: ") {
				t.Errorf("error %q lacks the eddy: prefix", err)
			}
		})
	}
	// A valid name is no error.
	if err := clicksTopology(true, "by-user").Err(); err != nil {
		t.Errorf("valid topology: %v", err)
	}
}
