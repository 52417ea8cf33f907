package kafka

import (
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMurmur2Vectors checks the hash against the vectors in Kafka's own
// UtilsTest, which pin the Java client's signed results.
func TestMurmur2Vectors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	} {
		if got := int32(murmur2([]byte(tc.in))); got != tc.want {
			t.Errorf("murmur2(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestKeyPartitionFixed(t *testing.T) {
	for _, tc := range []struct {
		key        string
		partitions int32
		want       int32
	}{
		// (murmur2 & 0x7fffffff) % n, worked from the vectors above.
		{"21", 7, 3},       // 1173551340
		{"foobar", 10, 6},  // 1357151166
		{"abc", 100, 7},    // 479470107
		{"abc", 1, 0},      // one partition takes everything
		{"foobar", 0, -1},  // invalid count
		{"foobar", -3, -1}, // invalid count
	} {
		if got := KeyPartition([]byte(tc.key), tc.partitions); got != tc.want {
			t.Errorf("KeyPartition(%q, %d) = %d, want %d", tc.key, tc.partitions, got, tc.want)
		}
	}
}

// TestKeyPartitionMatchesFranzGo compares with franz-go's Kafka-compatible
// partitioner over random keys of every tail length and many partition
// counts.
func TestKeyPartitionMatchesFranzGo(t *testing.T) {
	p := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		key := make([]byte, rng.IntN(64))
		for j := range key {
			key[j] = byte(rng.Uint32())
		}
		n := int32(1 + rng.IntN(300))
		if i%10 == 0 {
			n = int32(1 + rng.Int32N(1<<30))
		}
		want := int32(p.Partition(&kgo.Record{Key: key}, int(n)))
		if got := KeyPartition(key, n); got != want {
			t.Fatalf("KeyPartition(%x, %d) = %d, franz-go says %d", key, n, got, want)
		}
	}
	// An empty, non-nil key is a key to franz-go too.
	if got, want := KeyPartition([]byte{}, 12), int32(p.Partition(&kgo.Record{Key: []byte{}}, 12)); got != want {
		t.Fatalf("KeyPartition(empty, 12) = %d, franz-go says %d", got, want)
	}
}

func TestKeyPartitionAllocs(t *testing.T) {
	key := []byte("customer-000042")
	if n := testing.AllocsPerRun(100, func() { KeyPartition(key, 12) }); n != 0 {
		t.Fatalf("KeyPartition allocates %v times per call, want 0", n)
	}
}

func BenchmarkKeyPartition(b *testing.B) {
	key := []byte("customer-000042")
	b.ReportAllocs()
	b.SetBytes(int64(len(key)))
	for b.Loop() {
		KeyPartition(key, 12)
	}
}

// TestCRC32KeyPartition pins librdkafka's consistent partitioner: the
// CRC-32 check value of "123456789" is 0xcbf43926, whose top bit is set,
// so a signed modulo would give a negative partition.
func TestCRC32KeyPartition(t *testing.T) {
	for _, tc := range []struct {
		key        string
		partitions int32
		want       int32
	}{
		{"123456789", 4, 2}, // 3421780262 % 4
		{"123456789", 7, 5}, // 3421780262 % 7
		{"a", 12, 3},        // 0xe8b7be43 = 3904356931
		{"card-0001", 4, 1}, // 0x14bd45e9 = 348997097
		{"", 4, 0},          // crc32 of nothing is 0
		{"a", 0, -1},
	} {
		if got := CRC32KeyPartition([]byte(tc.key), tc.partitions); got != tc.want {
			t.Errorf("CRC32KeyPartition(%q, %d) = %d, want %d", tc.key, tc.partitions, got, tc.want)
		}
		if got := CRC32.Partition([]byte(tc.key), tc.partitions); got != tc.want {
			t.Errorf("CRC32.Partition(%q, %d) = %d, want %d", tc.key, tc.partitions, got, tc.want)
		}
	}
	if got, want := Murmur2.Partition([]byte("21"), 7), KeyPartition([]byte("21"), 7); got != want {
		t.Errorf("Murmur2.Partition = %d, KeyPartition %d", got, want)
	}
}

func TestPartitionerAllocs(t *testing.T) {
	key := []byte("customer-000042")
	for _, p := range []Partitioner{Murmur2, CRC32} {
		if n := testing.AllocsPerRun(100, func() { p.Partition(key, 12) }); n != 0 {
			t.Errorf("%v.Partition allocates %v times per call, want 0", p, n)
		}
	}
}
