package eddy

import (
	"github.com/eddy-streams/eddy/internal/runtime"
)

// Named names the operator that produced s, and returns s. An unnamed
// operator is called "<kind>-<position>" ("select-key-3"): adding an
// operator before it renumbers it, and with it the names derived from it.
// The one such name that reaches Kafka is the repartition topic a grouping
// or a join adds after a key change (GroupByKey, JoinStreamTable, ToTable
// after SelectKey or a Filter of it): "<app-id>-rekey-<position>-repartition"
// unnamed, "<app-id>-<name>-repartition" named, whatever is added before it.
// Stores are always named by their operators (Aggregate's store argument,
// ...), so their changelogs never move.
//
// Name the operator right before the grouping or the join: the
// repartition is named after the stream's last operator, not after an
// earlier one. Named must come before the stream is grouped or joined.
//
// name names a topic: letters, digits, '.', '_' and '-', unique among the
// topology's operator names and repartitions. Topology.Describe shows it
// (NodeDescription.Named). A topology whose unnamed repartition moved is
// refused at start while the old topic holds records the app has not
// consumed (see Config.AllowTopologyChange).
func Named[K, V any](s Stream[K, V], name string) Stream[K, V] {
	t := s.t
	at := displayName(s.n)
	switch {
	case !runtime.ValidName(name):
		t.fail("eddy: Named(%s, %q): use letters, digits, '.', '_' and '-' (the name may name a topic)", at, name)
	case s.n.named:
		t.fail("eddy: Named(%s, %q): the operator is already named %q; name it once", at, name, s.n.name)
	case t.rekeyed[s.n] != nil:
		t.fail("eddy: Named(%s, %q): the stream is already grouped or joined, through repartition topic %s; call Named before GroupByKey, JoinStreamTable or ToTable", at, name, RepartitionTopic("<app-id>", autoRepartitionName(s.n)))
	case t.named[name] != nil || t.hasNode(name):
		t.fail("eddy: Named(%s, %q): another operator is called %q; give each operator its own name", at, name, name)
	default:
		t.named[name] = s.n
		s.n.name, s.n.named = name, true
	}
	return s
}

// hasNode reports whether an operator of t is called name.
func (t *Topology) hasNode(name string) bool {
	for _, n := range t.nodes {
		if n.name == name {
			return true
		}
	}
	return false
}
