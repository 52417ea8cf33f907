package eddy

import (
	"regexp"

	"github.com/eddy-streams/eddy/serde"
)

// SourcePattern reads every topic whose whole name matches pattern (as
// Kafka Streams' pattern subscription, "orders-.*" matches "orders-eu" and
// not "eu-orders-x"), decoding keys and values with the serdes, with the
// options of Source. Topics created while the app runs are read too: Run
// lists the cluster's topics every 5 seconds, and when the matching set
// changes the instance commits, closes its tasks and starts again with the
// new set, as Kafka Streams rebalances on a new matching topic. A new
// topic is read from its start; the other topics' state and offsets carry
// on. Each matched topic gets its dead-letter topic as a Source's does.
//
// The matched topics end up in one task per partition number, as the
// sources of a Merge do, so they must be co-partitioned: the same
// partition count as each other and as the other sources they are joined
// or merged with (Run says which topic differs). A pattern never matches a
// topic the app names itself (a Source, a sink, a global table's topic),
// Kafka's own topics ("__…"), the app's internal topics ("<app-id>-…":
// changelogs, repartitions) nor dead-letter topics ("….dlq").
func SourcePattern[K, V any](t *Topology, pattern *regexp.Regexp, keys serde.Serde[K], values serde.Serde[V], opts ...SourceOption) Stream[K, V] {
	n := t.add("source-pattern")
	if pattern == nil {
		t.fail("eddy: SourcePattern %s: the pattern is nil", n.name)
		return Stream[K, V]{t: t, n: n, values: values}
	}
	// Anchored, so a match is a whole name. Not every pattern that
	// compiled compiles inside a group (an unterminated \Q), so that is
	// reported, not assumed.
	whole, err := regexp.Compile("^(?:" + pattern.String() + ")$")
	if err != nil {
		t.fail("eddy: SourcePattern %q: %w; end a \\Q quote with \\E", pattern.String(), err)
		return Stream[K, V]{t: t, n: n, values: values}
	}
	t.patterns[n], t.patternText[n] = whole, pattern.String()
	sc, extract := sourceOptions[K, V](t, "source pattern "+pattern.String(), opts)
	n.build = func(b *taskBuild) error {
		out := &emitter[K, V]{}
		b.out[n] = out
		b.patterns = append(b.patterns, patternReceiver{pattern: whole, open: func(topic string) rawReceiver {
			return &sourceNode[K, V]{b: b, topic: topic, keys: keys, values: values, out: out, ts: extract, table: sc.table,
				wallClock: sc.wallClock, maxAhead: aheadMillis(b.cfg.MaxEventTimeAhead)}
		}})
		return nil
	}
	return Stream[K, V]{t: t, n: n, values: values}
}

// patternReceiver opens the receiver of a topic that a SourcePattern
// matches, the first time the task meets one of its records.
type patternReceiver struct {
	pattern *regexp.Regexp
	open    func(topic string) rawReceiver
}

// patternSource returns the receiver of topic, a topic that no Source
// names, opened by the first pattern that matches it; nil if none does.
// The runtime hands a task only the topics its sub-topology's patterns
// matched, so the lookup runs once per topic and task.
func (b *taskBuild) patternSource(topic string) rawReceiver {
	for _, p := range b.patterns {
		if p.pattern.MatchString(topic) {
			r := p.open(topic)
			b.sources[topic] = r
			return r
		}
	}
	return nil
}
