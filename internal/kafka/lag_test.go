package kafka

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestGroupLag(t *testing.T) {
	ctx := testContext(t)
	b := startTestBroker(t, BrokerConfig{})
	cl := newTestClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := CreateTopics(ctx, cl, TopicSpec{Name: "in", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	produce := func(p int32, n int) {
		for range n {
			r := &kgo.Record{Topic: "in", Partition: p, Value: []byte("v")}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, 10)
	produce(1, 4)

	if _, err := GroupLag(ctx, cl, "nobody"); err == nil || !strings.Contains(err.Error(), "no committed offsets and no members") {
		t.Fatalf("GroupLag of an unknown group: %v", err)
	}

	var offsets kadm.Offsets
	offsets.Add(kadm.Offset{Topic: "in", Partition: 0, At: 6, LeaderEpoch: -1})
	if _, err := kadm.NewClient(cl).CommitOffsets(ctx, "g", offsets); err != nil {
		t.Fatal(err)
	}
	lags, err := GroupLag(ctx, cl, "g")
	if err != nil {
		t.Fatal(err)
	}
	want := []PartitionLag{
		{Topic: "in", Partition: 0, Committed: 6, End: 10, Lag: 4},
		{Topic: "in", Partition: 1, Committed: -1, End: 4, Lag: 4}, // nothing committed: from the start
	}
	if len(lags) != len(want) || lags[0] != want[0] || lags[1] != want[1] {
		t.Fatalf("lags %+v, want %+v", lags, want)
	}

	// A member with a static id is named as the owner of what it consumes.
	member := newTestClient(t, b.Addr(), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("in"), kgo.InstanceID("instance-a"), kgo.DisableAutoCommit())
	for deadline := time.Now().Add(30 * time.Second); ; {
		member.PollRecords(ctx, 1)
		if lags, err = GroupLag(ctx, cl, "g"); err == nil && lags[0].Member == "instance-a" && lags[1].Member == "instance-a" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the member never showed as the owner: %+v, %v", lags, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
