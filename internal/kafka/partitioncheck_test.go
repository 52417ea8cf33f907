package kafka

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		keyed, murmur2, crc32, neither int64
		want                           Verdict
	}{
		{0, 0, 0, 0, VerdictNoKeys},
		{10, 10, 3, 0, VerdictMurmur2},
		{10, 2, 10, 0, VerdictCRC32},
		{10, 10, 10, 0, VerdictEither}, // one partition: both put every key there
		{10, 7, 6, 0, VerdictMixed},    // 3 fit murmur2 only, 4 CRC32 only
		{10, 9, 9, 1, VerdictUnknown},  // one fits neither
		{10, 10, 0, 0, VerdictMurmur2},
	} {
		if got := Judge(tc.keyed, tc.murmur2, tc.crc32, tc.neither); got != tc.want {
			t.Errorf("Judge(%d, %d, %d, %d) = %q, want %q", tc.keyed, tc.murmur2, tc.crc32, tc.neither, got, tc.want)
		}
	}
}

// TestPartitionSampleAdd: records placed by CRC32 give the CRC32 verdict,
// records placed by murmur2 the murmur2 one, and both together mixed.
func TestPartitionSampleAdd(t *testing.T) {
	const parts = 4
	place := func(samples []PartitionSample, p Partitioner, keys int) {
		for i := range keys {
			key := []byte(fmt.Sprintf("card-%d", i))
			samples[p.Partition(key, parts)].Add(key, parts)
		}
	}
	newTopic := func() *TopicSample {
		ts := &TopicSample{Partitions: make([]PartitionSample, parts)}
		for i := range ts.Partitions {
			ts.Partitions[i].Partition = int32(i)
		}
		return ts
	}
	for _, tc := range []struct {
		by   []Partitioner
		want Verdict
	}{
		{[]Partitioner{CRC32}, VerdictCRC32},
		{[]Partitioner{Murmur2}, VerdictMurmur2},
		{[]Partitioner{Murmur2, CRC32}, VerdictMixed},
	} {
		ts := newTopic()
		for _, p := range tc.by {
			place(ts.Partitions, p, 200)
		}
		ts.Partitions[0].Add(nil, parts) // a null key is read, not judged
		ts.judge()
		if ts.Verdict != tc.want {
			t.Errorf("written by %v: verdict %q, want %q (%+v)", tc.by, ts.Verdict, tc.want, ts.Partitions)
		}
		if ts.Partitions[0].Records != ts.Partitions[0].Keyed+1 {
			t.Errorf("partition 0: %d records, %d keyed: the null key was not counted as read only", ts.Partitions[0].Records, ts.Partitions[0].Keyed)
		}
	}
	// A key on a partition neither partitioner picks.
	ts := newTopic()
	key := []byte("card-1")
	for p := range int32(parts) {
		if p != KeyPartition(key, parts) && p != CRC32KeyPartition(key, parts) {
			ts.Partitions[p].Add(key, parts)
			break
		}
	}
	ts.judge()
	if ts.Verdict != VerdictUnknown {
		t.Errorf("a key where neither puts it: verdict %q, want unknown", ts.Verdict)
	}
}

// TestSamplePartitioner reads topics from the embedded broker: one written
// by franz-go's default partitioner, one with the partitions CRC32 picks,
// and, when kcat is installed, one written by kcat -P with librdkafka's
// default partitioner.
func TestSamplePartitioner(t *testing.T) {
	ctx := testContext(t)
	b := startTestBroker(t, BrokerConfig{Addr: "127.0.0.1:0", DefaultPartitions: 4})
	seeds := []kgo.Opt{kgo.SeedBrokers(b.Addr())}
	if err := CreateTopics(ctx, newTestClient(t, b.Addr()), TopicSpec{Name: "by-franz", Partitions: 4}, TopicSpec{Name: "by-crc32", Partitions: 4}, TopicSpec{Name: "by-kcat", Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	franz := newTestClient(t, b.Addr())
	manual := newTestClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 300 {
		key := []byte(fmt.Sprintf("card-%d", i))
		if err := franz.ProduceSync(ctx, &kgo.Record{Topic: "by-franz", Key: key}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		r := &kgo.Record{Topic: "by-crc32", Key: key, Partition: CRC32KeyPartition(key, 4)}
		if err := manual.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// 100 records per partition of 300 keys: the sample stops early.
	for topic, want := range map[string]Verdict{"by-franz": VerdictMurmur2, "by-crc32": VerdictCRC32} {
		got, err := SamplePartitioner(ctx, seeds, topic, 50)
		if err != nil {
			t.Fatal(err)
		}
		if got.Verdict != want {
			t.Errorf("%s: verdict %q, want %q (%+v)", topic, got.Verdict, want, got.Partitions)
		}
		for _, p := range got.Partitions {
			if p.Records != 50 {
				t.Errorf("%s/%d: read %d records, want the sample of 50", topic, p.Partition, p.Records)
			}
		}
	}

	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed: the check of a topic written by librdkafka's default partitioner is skipped (install kcat to run it)")
	}
	var lines strings.Builder
	for i := range 300 {
		fmt.Fprintf(&lines, "card-%d:v%d\n", i, i)
	}
	cmd := exec.CommandContext(ctx, kcat, "-P", "-b", b.Addr(), "-t", "by-kcat", "-K:")
	cmd.Stdin = strings.NewReader(lines.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	got, err := SamplePartitioner(ctx, seeds, "by-kcat", 10_000)
	if err != nil {
		t.Fatal(err)
	}
	var read int64
	for _, p := range got.Partitions {
		read += p.Records
	}
	if got.Verdict != VerdictCRC32 || read != 300 {
		t.Errorf("by-kcat: verdict %q over %d records, want crc32 over 300 (%+v)", got.Verdict, read, got.Partitions)
	}
}
