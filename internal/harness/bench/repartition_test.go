package bench

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
)

// topicSize against the embedded broker: offsets and bytes of a topic, then
// the same after DeleteRecords moved one partition's log start offset; a
// topic that does not exist is empty, not an error.
func TestRepartitionTopicSize(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	broker, err := kafka.StartBroker(kafka.BrokerConfig{Addr: "127.0.0.1:0", DefaultPartitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const topic = "sized"
	if err := kafka.CreateTopics(ctx, cl, kafka.TopicSpec{Name: topic, Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)

	empty, err := topicSize(ctx, adm, "no-such-topic")
	if err != nil || empty.Records != 0 || empty.EndOffsets != 0 {
		t.Fatalf("a missing topic: %+v, %v; want empty, no error", empty, err)
	}

	// One batch per record, so that a deletion frees whole batches.
	for i := 0; i < 10; i++ {
		r := &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: fmt.Appendf(nil, "record %d", i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	before, err := topicSize(ctx, adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	if before.StartOffsets != 0 || before.EndOffsets != 10 || before.Records != 10 {
		t.Errorf("before the deletion: %+v, want start 0, end 10, 10 records", before)
	}
	if before.Bytes <= 0 {
		t.Errorf("before the deletion: %d bytes; the embedded broker answers DescribeLogDirs", before.Bytes)
	}

	var to kadm.Offsets
	to.Add(kadm.Offset{Topic: topic, Partition: 0, At: 3})
	resps, err := adm.DeleteRecords(ctx, to)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	after, err := topicSize(ctx, adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	if after.StartOffsets != 3 || after.EndOffsets != 10 || after.Records != 7 {
		t.Errorf("after deleting 3 records: %+v, want start 3, end 10, 7 records", after)
	}
	if after.Bytes <= 0 || after.Bytes >= before.Bytes {
		t.Errorf("after deleting 3 of 10 batches: %d bytes, before %d", after.Bytes, before.Bytes)
	}
}

// The whole benchmark, short, with a short purge interval and without a
// purge: with it the repartition topic's log start offsets move, never
// past what the app's group committed; without it they stay at zero
// while the topic grows. No figure is checked against a threshold.
func TestRepartitionRunPurgesOrNot(t *testing.T) {
	for _, purge := range []time.Duration{100 * time.Millisecond, -1} {
		t.Run(fmt.Sprint("purge=", purge), func(t *testing.T) {
			var out bytes.Buffer
			res, err := Repartition(t.Context(), RepartitionOptions{
				Rate: 200, Duration: 10 * time.Second, Sample: time.Second, Partitions: 2, Accounts: 100,
				PurgeInterval: purge, Out: &out,
			})
			t.Logf("samples:\n%s", out.String())
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Samples) == 0 {
				t.Fatal("no samples")
			}
			last := res.Samples[len(res.Samples)-1]
			if last.Produced == 0 || last.Committed == 0 || last.Repartition.EndOffsets == 0 || last.Output == 0 {
				t.Fatalf("last sample %+v: the app did not run through the repartition topic", last)
			}
			for _, s := range res.Samples {
				if s.Repartition.StartOffsets > s.Consumed {
					t.Errorf("sample %+v: the log start offsets are past the group's committed offsets", s)
				}
				if purge < 0 && s.Repartition.StartOffsets != 0 {
					t.Errorf("sample %+v: records deleted with the purge off", s)
				}
				if s.Repartition.Records != s.Repartition.EndOffsets-s.Repartition.StartOffsets {
					t.Errorf("sample %+v: retained records are not end - start", s)
				}
			}
			if purge > 0 && last.Repartition.StartOffsets == 0 {
				t.Errorf("last sample %+v: the purge never moved the log start offsets", last)
			}
		})
	}
}

// The table puts the runs side by side, a row per sample; a run with fewer
// samples leaves its cells empty, and unknown bytes read n/a.
func TestRepartitionTable(t *testing.T) {
	on := RepartitionResult{PurgeInterval: 30 * time.Second, Samples: []RepartitionSample{
		{Seconds: 15, Produced: 100, Lag: 2, Repartition: TopicSize{StartOffsets: 0, EndOffsets: 90, Records: 90, Bytes: 2048}},
		{Seconds: 30, Produced: 200, Lag: 1, Repartition: TopicSize{StartOffsets: 150, EndOffsets: 190, Records: 40, Bytes: -1}},
	}}
	off := RepartitionResult{PurgeInterval: -1, Samples: []RepartitionSample{
		{Seconds: 15, Produced: 101, Lag: 3, Repartition: TopicSize{EndOffsets: 95, Records: 95, Bytes: 100}},
	}}
	var b bytes.Buffer
	WriteRepartitionTable(&b, []RepartitionResult{on, off})
	want := `| elapsed | payments produced | purge 30s: retained records | purge 30s: log start offsets | purge 30s: bytes | purge 30s: lag | purge off: retained records | purge off: log start offsets | purge off: bytes | purge off: lag |
|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
| 15 s | 100 | 90 | 0 | 2.0 KiB | 2 | 95 | 0 | 100 B | 3 |
| 30 s | 200 | 40 | 150 | n/a | 1 |  |  |  |  |
`
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}
