package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/metrics"
)

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func guardForTest(hash kafka.Partitioner, every int, fail bool) (*partitionGuard, *metrics.Metrics, *bytes.Buffer) {
	var logs bytes.Buffer
	m := metrics.New()
	cfg := Config{Partitioner: hash, PartitionCheckEvery: every, FailOnMisplaced: fail, Metrics: m}
	return newPartitionGuard(cfg, &loggedTopics{}, slog.New(slog.NewTextHandler(&logs, nil))), m, &logs
}

// crc32Records are records with keys "card-0".."card-<n-1>" on the
// partition CRC32 puts them on, as kcat would produce them, and how many
// of them murmur2 puts elsewhere.
func crc32Records(topic string, n int, partitions int32) (recs []*kgo.Record, misplaced int) {
	for i := range n {
		key := []byte(fmt.Sprintf("card-%d", i))
		p := kafka.CRC32KeyPartition(key, partitions)
		if kafka.KeyPartition(key, partitions) != p {
			misplaced++
		}
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Offset: int64(i), Key: key})
	}
	return recs, misplaced
}

func TestPartitionGuardWarnsAndCounts(t *testing.T) {
	g, m, logs := guardForTest(kafka.Murmur2, 1, false)
	sub := &subPlan{copartitioned: 4}
	recs, misplaced := crc32Records("limits", 200, 4)
	if misplaced == 0 {
		t.Fatal("no key of the sample hashes differently: the test tests nothing")
	}
	// Records without a key are not checked, nor those of a sub-topology
	// that is not co-partitioned.
	recs = append(recs, &kgo.Record{Topic: "limits", Partition: 3}, &kgo.Record{Topic: "limits", Partition: 3, Key: []byte{}})
	for _, r := range recs {
		if err := g.check(sub, r); err != nil {
			t.Fatalf("warn policy returned %v", err)
		}
		if err := g.check(&subPlan{}, r); err != nil {
			t.Fatal(err)
		}
	}
	var counted float64
	for p := range int32(4) {
		counted += counterValue(t, m.Misplaced("limits", p))
	}
	if int(counted) != misplaced {
		t.Errorf("eddy_misplaced_records_total sums to %v, want %d", counted, misplaced)
	}
	out := logs.String()
	if n := strings.Count(out, "misplaced records"); n != 1 {
		t.Errorf("logged %d times, want once per topic:\n%s", n, out)
	}
	for _, want := range []string{"topic=limits", "key_partition=", "looks produced with CRC32", "murmur2_random", "Config.Partitioner"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
}

// TestPartitionGuardCRC32: with CRC32 declared, CRC32-placed records are
// where they belong, and murmur2-placed ones are named as such.
func TestPartitionGuardCRC32(t *testing.T) {
	g, _, logs := guardForTest(kafka.CRC32, 1, false)
	sub := &subPlan{copartitioned: 4}
	recs, _ := crc32Records("limits", 200, 4)
	for _, r := range recs {
		if err := g.check(sub, r); err != nil {
			t.Fatal(err)
		}
	}
	if logs.Len() != 0 {
		t.Fatalf("well placed records were reported:\n%s", logs)
	}
	for i := range 50 {
		key := []byte(fmt.Sprintf("k%d", i))
		g.check(sub, &kgo.Record{Topic: "payments", Partition: kafka.KeyPartition(key, 4), Key: key})
	}
	if !strings.Contains(logs.String(), "looks produced with murmur2") {
		t.Fatalf("murmur2-placed records not named as such:\n%s", logs)
	}
}

func TestPartitionGuardFails(t *testing.T) {
	g, _, _ := guardForTest(kafka.Murmur2, 1, true)
	sub := &subPlan{copartitioned: 4}
	recs, _ := crc32Records("limits", 200, 4)
	var err error
	for _, r := range recs {
		if err = g.check(sub, r); err != nil {
			break
		}
	}
	if err == nil {
		t.Fatal("no error for misplaced records under the fail policy")
	}
	var perm permanentError
	if !errors.As(err, &perm) {
		t.Errorf("%v is not permanent: a new session would fail again", err)
	}
	for _, want := range []string{"eddy: misplaced record limits/", "@", "CRC32"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestPartitionGuardSamples: with PartitionCheckEvery n, one keyed
// record in n is checked.
func TestPartitionGuardSamples(t *testing.T) {
	g, m, _ := guardForTest(kafka.Murmur2, 10, false)
	sub := &subPlan{copartitioned: 4}
	key := []byte("card-1") // CRC32 and murmur2 disagree on 4 partitions
	if kafka.CRC32KeyPartition(key, 4) == kafka.KeyPartition(key, 4) {
		t.Fatal("pick a key the partitioners disagree on")
	}
	r := &kgo.Record{Topic: "limits", Partition: kafka.CRC32KeyPartition(key, 4), Key: key}
	for range 100 {
		g.check(sub, r)
	}
	if got := counterValue(t, m.Misplaced("limits", r.Partition)); got != 10 {
		t.Fatalf("counted %v of 100 misplaced records, checking one in 10: want 10", got)
	}
	if g, _, _ := guardForTest(kafka.Murmur2, 0, false); g != nil {
		t.Fatal("PartitionCheckEvery 0 did not turn the guard off")
	}
}

func TestPartitionGuardAllocs(t *testing.T) {
	g, _, _ := guardForTest(kafka.Murmur2, 1, false)
	sub := &subPlan{copartitioned: 12}
	key := []byte("customer-000042")
	r := &kgo.Record{Topic: "t", Partition: kafka.KeyPartition(key, 12), Key: key}
	if n := testing.AllocsPerRun(100, func() { g.check(sub, r) }); n != 0 {
		t.Fatalf("check of a well placed record allocates %v times, want 0", n)
	}
}

// BenchmarkPartitionGuard measures the check of one well placed record,
// the common case, per partitioner.
func BenchmarkPartitionGuard(b *testing.B) {
	for _, hash := range []kafka.Partitioner{kafka.Murmur2, kafka.CRC32} {
		b.Run(hash.String(), func(b *testing.B) {
			g, _, _ := guardForTest(hash, 1, false)
			sub := &subPlan{copartitioned: 12}
			key := []byte("customer-000042")
			r := &kgo.Record{Topic: "t", Partition: hash.Partition(key, 12), Key: key}
			b.ReportAllocs()
			for b.Loop() {
				if err := g.check(sub, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
