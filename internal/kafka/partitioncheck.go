package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// PartitionSample is what a sample of one partition says about the
// partitioner that wrote it: of the keyed records read, how many each
// partitioner would have put on this partition.
type PartitionSample struct {
	Partition int32 `json:"partition"`
	// Records are the records read; Keyed those with a non-empty key
	// (librdkafka spreads records with an empty key at random, Kafka's
	// producer spreads null keys).
	Records int64 `json:"records"`
	Keyed   int64 `json:"keyed"`
	// Murmur2 and CRC32 count the keyed records each partitioner puts
	// on this partition.
	Murmur2 int64 `json:"murmur2"`
	CRC32   int64 `json:"crc32"`
	// Neither counts the keyed records neither puts here.
	Neither int64   `json:"neither"`
	Verdict Verdict `json:"verdict"`
}

// Add counts one record of the partition, of a topic of partitions.
func (s *PartitionSample) Add(key []byte, partitions int32) {
	s.Records++
	if len(key) == 0 {
		return
	}
	s.Keyed++
	m := KeyPartition(key, partitions) == s.Partition
	c := CRC32KeyPartition(key, partitions) == s.Partition
	if m {
		s.Murmur2++
	}
	if c {
		s.CRC32++
	}
	if !m && !c {
		s.Neither++
	}
}

// Verdict is which partitioner a sample says wrote a partition or topic.
type Verdict string

const (
	// VerdictMurmur2: every keyed record is where murmur2 puts it, and
	// some are not where CRC32 would.
	VerdictMurmur2 Verdict = "murmur2"
	// VerdictCRC32: every keyed record is where CRC32 puts it, and some
	// are not where murmur2 would.
	VerdictCRC32 Verdict = "crc32"
	// VerdictEither: every keyed record is where both put it (one
	// partition, or too few keys to tell).
	VerdictEither Verdict = "either"
	// VerdictMixed: every keyed record fits one of them, but both wrote.
	VerdictMixed Verdict = "mixed"
	// VerdictUnknown: some keyed records fit neither (another partitioner,
	// explicit partitions, or partitions added after they were written).
	VerdictUnknown Verdict = "unknown"
	// VerdictNoKeys: no keyed record was read.
	VerdictNoKeys Verdict = "no keys"
)

// Judge returns the verdict of a sample's counts.
func Judge(keyed, murmur2, crc32, neither int64) Verdict {
	switch {
	case keyed == 0:
		return VerdictNoKeys
	case neither > 0:
		return VerdictUnknown
	case murmur2 == keyed && crc32 == keyed:
		return VerdictEither
	case murmur2 == keyed:
		return VerdictMurmur2
	case crc32 == keyed:
		return VerdictCRC32
	}
	return VerdictMixed
}

// TopicSample is the sample of every partition of a topic and the verdict
// over all of them.
type TopicSample struct {
	Topic      string            `json:"topic"`
	Partitions []PartitionSample `json:"partitions"`
	Verdict    Verdict           `json:"verdict"`
}

// judge sets the verdicts of the partitions and of the topic.
func (t *TopicSample) judge() {
	var keyed, m, c, n int64
	for i := range t.Partitions {
		p := &t.Partitions[i]
		p.Verdict = Judge(p.Keyed, p.Murmur2, p.CRC32, p.Neither)
		keyed, m, c, n = keyed+p.Keyed, m+p.Murmur2, c+p.CRC32, n+p.Neither
	}
	t.Verdict = Judge(keyed, m, c, n)
}

// SamplePartitioner reads up to perPartition offsets from the start of
// each partition of topic (committed records only, as a read_committed
// consumer sees them) and reports which partitioner placed their keys.
func SamplePartitioner(ctx context.Context, opts []kgo.Opt, topic string, perPartition int64) (*TopicSample, error) {
	if perPartition < 1 {
		return nil, errors.New("kafka: sample partitioner: read at least 1 record per partition")
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: sample partitioner: %w", err)
	}
	defer cl.Close()
	counts, err := Partitions(ctx, cl, topic)
	if err != nil {
		return nil, err
	}
	n := counts[topic]
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: start offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: end offsets of %s: %w", topic, err)
	}
	out := &TopicSample{Topic: topic, Partitions: make([]PartitionSample, n)}
	spans := make(map[int32]Span, n)
	for p := range n {
		out.Partitions[p].Partition = p
		s, _ := starts.Lookup(topic, p)
		e, _ := ends.Lookup(topic, p)
		spans[p] = Span{From: s.Offset, End: min(e.Offset, s.Offset+perPartition)}
	}
	err = ReadCommitted(ctx, opts, map[string]map[int32]Span{topic: spans}, func(r *kgo.Record) error {
		if r.Partition >= 0 && r.Partition < n {
			out.Partitions[r.Partition].Add(r.Key, n)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kafka: read %s: %w", topic, err)
	}
	out.judge()
	return out, nil
}
