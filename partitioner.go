package eddy

import (
	"fmt"

	"github.com/eddy-streams/eddy/internal/kafka"
)

// Partitioner is the function that maps a record's key to a partition.
// Task p of a join reads partition p of both sides, so every producer of
// co-partitioned topics must use the same one; eddy's own producers
// (repartition topics, outputs with a key) use Config.Partitioner, and the
// partition guard checks the keys it reads against it (docs/partitioners.md).
type Partitioner int

const (
	// Murmur2 is Kafka's default partitioner: murmur2 of the key, modulo
	// the partition count. The Java client, Kafka Streams, franz-go and
	// librdkafka's "murmur2_random" use it. The default.
	Murmur2 Partitioner = iota
	// CRC32 is librdkafka's default ("consistent_random", and
	// "consistent"): CRC-32 of the key, modulo the partition count. kcat,
	// confluent-kafka-go, confluent-kafka-python and node-rdkafka use it
	// unless configured otherwise.
	CRC32
)

func (p Partitioner) String() string {
	if p != Murmur2 && p != CRC32 {
		return fmt.Sprintf("Partitioner(%d)", int(p))
	}
	return p.kafka().String()
}

// ParsePartitioner parses "murmur2" or "crc32", and librdkafka's names
// for them: "murmur2_random", "consistent" and "consistent_random".
func ParsePartitioner(s string) (Partitioner, error) {
	switch s {
	case "murmur2", "murmur2_random":
		return Murmur2, nil
	case "crc32", "consistent", "consistent_random":
		return CRC32, nil
	}
	return 0, fmt.Errorf("eddy: partitioner %q: use murmur2 (Kafka's default) or crc32 (librdkafka's default)", s)
}

func (p Partitioner) kafka() kafka.Partitioner {
	if p == CRC32 {
		return kafka.CRC32
	}
	return kafka.Murmur2
}

// MisplacedPolicy says what a misplaced record does: a record of a
// co-partitioned source whose key Config.Partitioner puts on another
// partition than the one it was read from, so that it never meets the
// records of its key in the other sources.
type MisplacedPolicy int

const (
	// WarnMisplaced counts the record in eddy_misplaced_records_total,
	// logs the first of each topic with the fix, and processes it (the
	// default).
	WarnMisplaced MisplacedPolicy = iota
	// FailMisplaced stops the app with an error naming the record's
	// topic, partition and offset.
	FailMisplaced
)

func (p MisplacedPolicy) String() string {
	switch p {
	case WarnMisplaced:
		return "warn"
	case FailMisplaced:
		return "fail"
	}
	return fmt.Sprintf("MisplacedPolicy(%d)", int(p))
}
