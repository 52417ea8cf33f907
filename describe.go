package eddy

import (
	"slices"
	"strings"

	"github.com/eddy-streams/eddy/internal/runtime"
)

// TopologyDescription is the shape of a topology, as Kafka Streams'
// Topology.describe() gives it: its sub-topologies (the parts that only
// topics connect, each run as one task per partition), their nodes and
// stores, the repartition topics that link them, and the global stores.
// Topic names are the real ones (internal topics carry the app id). The
// web UI draws it; GET /v1/topology serves it.
type TopologyDescription struct {
	AppID         string                   `json:"app_id"`
	Subtopologies []SubtopologyDescription `json:"subtopologies"`
	// RepartitionTopics are the internal topics that one sub-topology
	// writes and another reads.
	RepartitionTopics []string                 `json:"repartition_topics"`
	GlobalStores      []GlobalStoreDescription `json:"global_stores"`
}

// SubtopologyDescription is one sub-topology.
type SubtopologyDescription struct {
	ID int `json:"id"`
	// Nodes are in the order the topology declared them, parents first.
	Nodes []NodeDescription `json:"nodes"`
	// Sources and Sinks are the topics it reads and writes.
	Sources []string `json:"sources"`
	// Patterns are the regular expressions of its SourcePatterns: it
	// reads the topics they match too, resolved when the app runs.
	Patterns []string           `json:"patterns,omitempty"`
	Sinks    []string           `json:"sinks"`
	Stores   []StoreDescription `json:"stores"`
}

// Node kinds.
const (
	NodeSource    = "source"
	NodeProcessor = "processor"
	NodeSink      = "sink"
)

// NodeDescription is one node of a sub-topology.
type NodeDescription struct {
	// Name is "<kind>-<position>", which moves when an operator is added
	// before the node, or the name eddy.Named gave it (then Named is set).
	Name  string `json:"name"`
	Named bool   `json:"named,omitempty"`
	// Kind is NodeSource, NodeProcessor or NodeSink. Every operator
	// between sources and sinks is a processor named after it ("filter-1",
	// "split-<name>-2" with children "branch-<name>-<branch>-3", a
	// childless "foreach-4"), as Kafka Streams describes them.
	Kind string `json:"kind"`
	// Topic is what a source reads or a sink writes; Internal marks a
	// repartition topic.
	Topic    string `json:"topic,omitempty"`
	Internal bool   `json:"internal,omitempty"`
	// Pattern is what a SourcePattern's node ("source-pattern-3") reads:
	// every topic whose whole name matches it.
	Pattern string `json:"pattern,omitempty"`
	// Stores are the stores the node owns.
	Stores   []string `json:"stores,omitempty"`
	Parents  []string `json:"parents,omitempty"`
	Children []string `json:"children,omitempty"`
}

// StoreDescription is a store of a sub-topology and its changelog topic.
type StoreDescription struct {
	Name      string `json:"name"`
	Changelog string `json:"changelog"`
	// Windowed marks a window or session store (its changelog also
	// expires by time).
	Windowed bool `json:"windowed,omitempty"`
}

// GlobalStoreDescription is a global store: every instance holds it whole,
// read from its topic.
type GlobalStoreDescription struct {
	Name  string `json:"name"`
	Topic string `json:"topic"`
}

// Describe returns the topology's shape, with the topic names of an app
// whose Config.AppID is appID. It numbers sub-topologies as Run does, so
// task "1_3" is partition 3 of Subtopologies[1].
func (t *Topology) Describe(appID string) TopologyDescription {
	d := TopologyDescription{AppID: appID, Subtopologies: []SubtopologyDescription{}, RepartitionTopics: []string{}, GlobalStores: []GlobalStoreDescription{}}
	for _, r := range t.repartitions {
		d.RepartitionTopics = append(d.RepartitionTopics, RepartitionTopic(appID, r))
	}
	for _, g := range t.globals {
		d.GlobalStores = append(d.GlobalStores, GlobalStoreDescription{Name: g.Name, Topic: g.Topic})
	}
	sourceOf := make(map[*node]string, len(t.sources))
	for topic, n := range t.sources {
		sourceOf[n] = topic
	}
	children := make(map[*node][]string)
	for _, n := range t.nodes {
		for _, p := range n.parents {
			children[p] = append(children[p], displayName(n))
		}
	}
	comp := t.components()
	subIndex := map[int]int{}
	for _, n := range t.nodes {
		i, ok := subIndex[comp[n]]
		if !ok {
			i = len(d.Subtopologies)
			subIndex[comp[n]] = i
			d.Subtopologies = append(d.Subtopologies, SubtopologyDescription{ID: i, Sources: []string{}, Sinks: []string{}, Stores: []StoreDescription{}})
		}
		sub := &d.Subtopologies[i]
		nd := NodeDescription{Name: displayName(n), Named: n.named, Kind: NodeProcessor, Stores: slices.Clone(n.stores), Children: children[n]}
		for _, p := range n.parents {
			nd.Parents = append(nd.Parents, displayName(p))
		}
		if pattern, ok := t.patternText[n]; ok {
			nd.Kind, nd.Pattern = NodeSource, pattern
			sub.Patterns = append(sub.Patterns, nd.Pattern)
		} else if topic, ok := sourceOf[n]; ok {
			nd.Kind, nd.Topic = NodeSource, topicName(appID, topic)
			nd.Internal = strings.HasPrefix(topic, repartitionPrefix)
			sub.Sources = append(sub.Sources, nd.Topic)
		} else if topic, ok := t.writers[n]; ok {
			nd.Kind, nd.Topic = NodeSink, topicName(appID, topic)
			nd.Internal = strings.HasPrefix(topic, repartitionPrefix)
			sub.Sinks = append(sub.Sinks, nd.Topic)
		}
		for _, s := range n.stores {
			sub.Stores = append(sub.Stores, StoreDescription{
				Name: s, Changelog: runtime.ChangelogTopic(appID, s), Windowed: t.stores[s].retention > 0,
			})
		}
		sub.Nodes = append(sub.Nodes, nd)
	}
	return d
}

// displayName is a node's name without the marker of a repartition topic
// (a control character): "sink-repartition-by-word-2".
func displayName(n *node) string {
	return strings.ReplaceAll(n.name, repartitionPrefix, "repartition-")
}
