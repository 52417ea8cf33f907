package runtime

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
)

// TestPartitionerFollowsConfig: eddy's producer places keyed records with
// the configured partitioner, records with a partition where they say, and
// changelog records where the task put them.
func TestPartitionerFollowsConfig(t *testing.T) {
	for _, hash := range []kafka.Partitioner{kafka.Murmur2, kafka.CRC32} {
		p := newPartitioner(hash, []string{"app-s-changelog"})
		out := p.ForTopic("out")
		differ := 0
		for i := range 100 {
			key := []byte(fmt.Sprintf("card-%d", i))
			if got, want := out.Partition(&kgo.Record{Key: key, Partition: -1}, 4), int(hash.Partition(key, 4)); got != want {
				t.Fatalf("%v: %q placed on %d, want %d", hash, key, got, want)
			}
			if kafka.KeyPartition(key, 4) != kafka.CRC32KeyPartition(key, 4) {
				differ++
			}
		}
		if differ == 0 {
			t.Fatal("the partitioners agree on every key: the test cannot tell them apart")
		}
		if got := out.Partition(&kgo.Record{Key: []byte("k"), Partition: 2}, 4); got != 2 {
			t.Errorf("%v: a record for partition 2 placed on %d", hash, got)
		}
		// A keyless record for a chosen partition (a foreign-key join's
		// answer) must go there even while some partition has no leader:
		// it asks for consistency, so franz-go counts every partition.
		answer := &kgo.Record{Partition: 3}
		if !out.RequiresConsistency(answer) || out.Partition(answer, 4) != 3 {
			t.Errorf("%v: a keyless record for partition 3: consistency %v, placed on %d", hash, out.RequiresConsistency(answer), out.Partition(answer, 4))
		}
		if out.RequiresConsistency(&kgo.Record{Partition: -1}) {
			t.Errorf("%v: a keyless record for no partition asks for consistency", hash)
		}
		if got := p.ForTopic("app-s-changelog").Partition(&kgo.Record{Key: []byte("k"), Partition: 3}, 4); got != 3 {
			t.Errorf("%v: a changelog record for partition 3 placed on %d", hash, got)
		}
	}
}
