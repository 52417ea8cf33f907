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
		if got := p.ForTopic("app-s-changelog").Partition(&kgo.Record{Key: []byte("k"), Partition: 3}, 4); got != 3 {
			t.Errorf("%v: a changelog record for partition 3 placed on %d", hash, got)
		}
	}
}
