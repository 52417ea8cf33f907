package runtime

import (
	"errors"
	"fmt"
	"slices"
)

// repartitionCounts decides the partition count of each repartition topic,
// as Kafka Streams does (its RepartitionTopics and
// CopartitionedTopicsEnforcer), given the counts of the external sources:
//
//   - a count the topology declares (Repartition.Partitions) wins;
//   - a topic read with a source whose count is settled (an external
//     topic, a declared or already sized repartition topic) takes that
//     count: the reading task joins partition p of both, so they must be
//     co-partitioned (a re-keyed stream joined with a table);
//   - topics read only with other repartition topics (or alone) take the
//     largest count of the topics their writers read: the most parallelism
//     the input allows. A topic whose writers are unknown (Writers empty)
//     takes the largest count of the external sources.
//
// Counts that disagree are not reported here: prepareTopics checks every
// sub-topology's co-partitioning once the topics exist. fromWriters marks
// the counts taken from known writers: only parallelism depends on them,
// so a topic that exists with another count (created by an older eddy,
// which gave every repartition topic the largest external count) may keep
// it.
func repartitionCounts(p *plan, repartitions []Repartition, external map[string]int32) (counts map[string]int32, fromWriters map[string]bool, err error) {
	counts = make(map[string]int32, len(repartitions))
	fromWriters = make(map[string]bool)
	open := make(map[string]Repartition) // not sized yet
	for _, r := range repartitions {
		if r.Partitions > 0 {
			counts[r.Topic] = r.Partitions
		} else {
			open[r.Topic] = r
		}
	}
	settled := func(topic string) (int32, bool) {
		if n, ok := external[topic]; ok {
			return n, true
		}
		n, ok := counts[topic]
		return n, ok
	}
	var widest int32
	for _, n := range external {
		widest = max(widest, n)
	}
	// upstream is the largest count of the topics r's writers read, once
	// they are all settled, leaving out the topics of group, sized with r:
	// a sub-topology may write a repartition topic it reads itself (a join
	// of a stream with a re-keyed branch of it), whose count then comes
	// from its other sources.
	upstream := func(r Repartition, group []string) (int32, bool) {
		if len(r.Writers) == 0 {
			return widest, widest > 0
		}
		var n int32
		for _, w := range r.Writers {
			for _, src := range p.subs[w].Sources {
				if slices.Contains(group, src) {
					continue
				}
				c, ok := settled(src)
				if !ok {
					return 0, false
				}
				n = max(n, c)
			}
		}
		return n, true
	}
	names := make([]string, 0, len(open))
	for t := range open {
		names = append(names, t)
	}
	slices.Sort(names)
	// Each round sizes at least one topic, or sizing is stuck: a topic's
	// count may wait on another repartition topic upstream of it.
	for progress := true; progress && len(open) > 0; {
		progress = false
		for _, topic := range names {
			if _, ok := open[topic]; !ok {
				continue
			}
			group := []string{topic} // the topics read with it
			if s, read := p.subOf[topic]; read {
				group = p.subs[s].Sources
			}
			var fixed int32
			for _, src := range group {
				if _, isOpen := open[src]; !isOpen {
					if n, ok := settled(src); ok {
						fixed = n
						break
					}
				}
			}
			if fixed > 0 {
				counts[topic] = fixed
				delete(open, topic)
				progress = true
				continue
			}
			// Only open repartition topics in the group: the largest of
			// their upstream counts, for all of them.
			var n int32
			for _, src := range group {
				r, isOpen := open[src]
				u, ok := upstream(r, group)
				if !isOpen || !ok {
					n = 0
					break
				}
				n = max(n, u)
			}
			if n == 0 {
				continue
			}
			for _, src := range group {
				counts[src] = n
				fromWriters[src] = len(open[src].Writers) > 0
				delete(open, src)
			}
			progress = true
		}
	}
	var errs []error
	for _, topic := range names {
		if _, ok := open[topic]; ok {
			errs = append(errs, fmt.Errorf("eddy: repartition topic %s: no source to take a partition count from; set Repartition.Partitions", topic))
		}
	}
	return counts, fromWriters, errors.Join(errs...)
}
