package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// PatternRefresh is how often a running instance lists the cluster's topics
// to notice one that starts or stops matching a source pattern.
const PatternRefresh = 5 * time.Second

// hasPatterns reports whether a sub-topology of topo reads a pattern.
func (topo *Topology) hasPatterns() bool {
	return slices.ContainsFunc(topo.Subtopologies, func(s Subtopology) bool { return len(s.Patterns) > 0 })
}

// PatternSub returns the sub-topology whose patterns match topic, if any.
// A pattern never matches a topic the app reads or writes by name (a
// source, a sink, a global store's topic), Kafka's own topics ("__…"), this
// app's internal topics ("<app-id>-…": changelogs, repartitions) nor a
// dead-letter topic ("….dlq"): reading those would loop the app's output
// back into it.
func (topo *Topology) PatternSub(appID, topic string) (int, bool) {
	if strings.HasPrefix(topic, appID+"-") {
		return 0, false
	}
	return topo.patternReader(topic)
}

// patternReader is PatternSub without the app's id: the sub-topology whose
// patterns match topic, unless topic is one a pattern never reads. The
// app's internal topics that a topology names (its repartition topics)
// are refused by name, so EndOrder, which has no app id, sees the same
// readers as the routing.
func (topo *Topology) patternReader(topic string) (int, bool) {
	if strings.HasPrefix(topic, "__") || strings.HasSuffix(topic, ".dlq") ||
		slices.Contains(topo.Sinks, topic) ||
		slices.ContainsFunc(topo.Globals, func(g GlobalStore) bool { return g.Topic == topic }) ||
		slices.ContainsFunc(topo.Repartitions, func(r Repartition) bool { return r.Topic == topic }) {
		return 0, false
	}
	for _, s := range topo.Subtopologies {
		if slices.Contains(s.Sources, topic) {
			return 0, false
		}
	}
	for i, s := range topo.Subtopologies {
		for _, re := range s.Patterns {
			if re.MatchString(topic) {
				return i, true
			}
		}
	}
	return 0, false
}

// matching returns the topics of topics that a pattern of topo matches,
// sorted, by sub-topology.
func (topo *Topology) matching(appID string, topics []string) map[int][]string {
	out := make(map[int][]string)
	for _, topic := range topics {
		if i, ok := topo.PatternSub(appID, topic); ok {
			out[i] = append(out[i], topic)
		}
	}
	for _, ts := range out {
		slices.Sort(ts)
	}
	return out
}

// resolvePatterns returns topo with the topics its patterns match among
// topics added to the sources of their sub-topologies, sorted after the
// topics named explicitly, so that a task's sources are deterministic.
func resolvePatterns(appID string, topo Topology, topics []string) Topology {
	matched := topo.matching(appID, topics)
	out := topo
	out.Subtopologies = slices.Clone(topo.Subtopologies)
	for i := range out.Subtopologies {
		s := &out.Subtopologies[i]
		s.Sources = append(slices.Clone(s.Sources), matched[i]...)
	}
	return out
}

// listTopics lists the cluster's topics for the patterns: waiting while
// the brokers cannot be reached (a re-plan during an outage must not stop
// the app), and without the topics the app may not describe.
func listTopics(ctx context.Context, cl *kgo.Client) ([]string, error) {
	topics, err := kafka.ListTopics(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("eddy: list topics for the source patterns: %w", err)
	}
	return topics, nil
}

// patternTopics lists the topics topo's patterns match, flattened and
// sorted: what the watcher compares between two listings.
func patternTopics(appID string, topo *Topology, topics []string) []string {
	var all []string
	for _, ts := range topo.matching(appID, topics) {
		all = append(all, ts...)
	}
	slices.Sort(all)
	return all
}
