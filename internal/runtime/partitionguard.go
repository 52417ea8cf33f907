package runtime

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/metrics"
)

// partitionGuard checks that the records of co-partitioned sources (the
// sources of a sub-topology that reads more than one: a join, a table and
// a repartitioned stream, merged streams) sit on the partition their key
// hashes to under the partitioner the app assumes (Config.Partitioner).
// Task p joins partition p of each source: a record that a producer with
// another partitioner put elsewhere never meets its key's rows, and the
// join silently misses it. Kafka's partition counts can match while the
// hashes differ (librdkafka's CRC32 against Kafka's murmur2), so the check
// is on the keys themselves.
//
// Each worker has its own guard, used by its goroutine only; the topics
// already logged are shared by the instance's workers, so a topic is
// logged once per instance. The check of a well placed record hashes its
// key and compares: no allocation, no lock.
type partitionGuard struct {
	hash kafka.Partitioner
	// every: one keyed record in every is checked (1: all of them); n
	// counts the keyed records since the last one checked.
	every, n int
	fail     bool
	log      *slog.Logger
	m        *metrics.Metrics
	// counters are eddy_misplaced_records_total's children, resolved at a
	// partition's first misplaced record.
	counters map[topicPartition]prometheus.Counter
	logged   *loggedTopics
}

// loggedTopics are the topics whose misplaced records an instance logged.
type loggedTopics struct {
	mu     sync.Mutex
	topics map[string]bool
}

// first reports whether topic is logged for the first time.
func (l *loggedTopics) first(topic string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.topics[topic] {
		return false
	}
	if l.topics == nil {
		l.topics = make(map[string]bool)
	}
	l.topics[topic] = true
	return true
}

// newPartitionGuard returns a worker's guard, or nil when cfg turns the
// check off.
func newPartitionGuard(cfg Config, logged *loggedTopics, log *slog.Logger) *partitionGuard {
	if cfg.PartitionCheckEvery < 1 {
		return nil
	}
	return &partitionGuard{
		hash: cfg.Partitioner, every: cfg.PartitionCheckEvery, fail: cfg.FailOnMisplaced,
		log: log, m: cfg.Metrics, counters: make(map[topicPartition]prometheus.Counter), logged: logged,
	}
}

// check checks r, read by a task of sub. A misplaced record is counted and
// logged (the first of its topic); with FailOnMisplaced it is an error
// that stops the app. Records without a key (nil or empty: librdkafka
// spreads empty keys at random) are not checked, nor the records of a
// sub-topology with one source, which needs no co-partitioning.
func (g *partitionGuard) check(sub *subPlan, r *kgo.Record) error {
	if g == nil || sub.copartitioned == 0 || len(r.Key) == 0 {
		return nil
	}
	if g.every > 1 {
		if g.n++; g.n < g.every {
			return nil
		}
		g.n = 0
	}
	want := g.hash.Partition(r.Key, sub.copartitioned)
	if want == r.Partition {
		return nil
	}
	return g.misplaced(r, want, sub.copartitioned)
}

func (g *partitionGuard) misplaced(r *kgo.Record, want, partitions int32) error {
	tp := topicPartition{r.Topic, r.Partition}
	c := g.counters[tp]
	if c == nil && g.m != nil {
		c = g.m.Misplaced(r.Topic, r.Partition)
		g.counters[tp] = c
	}
	if c != nil {
		c.Inc()
	}
	fix := misplacedFix(g.hash, r.Key, r.Partition, partitions)
	if g.fail {
		return permanent(fmt.Errorf("eddy: misplaced record %s/%d@%d: its key hashes to partition %d under %s (Config.Partitioner), so it cannot meet the records of its key in the sources it is co-partitioned with; %s",
			r.Topic, r.Partition, r.Offset, want, g.hash, fix))
	}
	if g.logged.first(r.Topic) {
		g.log.Warn("misplaced records: a key is not on the partition the app's partitioner puts it on, so joins and co-partitioned sources miss it (counted in eddy_misplaced_records_total; this is logged once per topic)",
			"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "key_partition", want, "partitioner", g.hash.String(), "fix", fix)
	}
	return nil
}

// misplacedFix says what to do about a record with key found on partition
// got: which partitioner the topic looks produced with, and how to agree.
func misplacedFix(assumed kafka.Partitioner, key []byte, got, partitions int32) string {
	switch {
	case assumed == kafka.Murmur2 && kafka.CRC32.Partition(key, partitions) == got:
		return "this topic looks produced with CRC32 (librdkafka's default); set partitioner=murmur2_random on the producer, or Config.Partitioner = eddy.CRC32 if every producer of the app's co-partitioned topics uses CRC32"
	case assumed == kafka.CRC32 && kafka.Murmur2.Partition(key, partitions) == got:
		return "this topic looks produced with murmur2 (Kafka's default: Java, franz-go, librdkafka's murmur2_random); set partitioner=consistent_random on the producer, or leave Config.Partitioner at its default (murmur2) if every producer uses murmur2"
	}
	return "the key hashes there under neither murmur2 nor CRC32: a custom partitioner, explicit partitions, or partitions added after it was written; produce with Kafka's default partitioner (murmur2), and see eddy partitions check"
}
