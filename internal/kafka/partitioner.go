package kafka

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// KeyPartition returns the partition Kafka's default partitioner picks for
// a record with this key: (murmur2(key) & 0x7fffffff) % partitions, the
// same as the Java client and franz-go's StickyKeyPartitioner. eddy
// computes it itself, rather than leaving it to the producer, so a task
// knows where a key lives (repartitioning, interactive queries) and so
// records written by eddy land where Kafka Streams or any Java producer
// would put them.
//
// An empty or nil key hashes like any other byte string; Kafka's producer
// spreads nil-key records instead, which is the caller's choice to make.
// partitions < 1 returns -1, an invalid partition, so the mistake
// surfaces as a produce error instead of a silently wrong placement.
func KeyPartition(key []byte, partitions int32) int32 {
	if partitions < 1 {
		return -1
	}
	return int32(murmur2(key)&0x7fffffff) % partitions
}

// murmur2 is MurmurHash2 (32-bit) with the seed Kafka's Java client uses.
// The Java code works on signed ints with unsigned shifts; uint32
// arithmetic gives the same bits.
func murmur2(data []byte) uint32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	h := seed ^ uint32(len(data))
	for ; len(data) >= 4; data = data[4:] {
		k := binary.LittleEndian.Uint32(data)
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	// The tail bytes, as the C and Java switch with fall-through does.
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// Partitioner is a key-to-partition function a producer may use. eddy
// must know which one wrote a topic it joins with another: task p reads
// partition p of each, so a key must hash to the same partition in both.
type Partitioner int

const (
	// Murmur2 is Kafka's default partitioner (KeyPartition): the Java
	// client, Kafka Streams, franz-go's default, librdkafka's
	// murmur2_random.
	Murmur2 Partitioner = iota
	// CRC32 is librdkafka's default, consistent_random, and its
	// consistent: CRC-32 (IEEE) of the key modulo the partition count, as
	// rd_crc32 computes it. kcat, confluent-kafka-go, -python and
	// node-rdkafka use it unless told otherwise.
	CRC32
)

func (p Partitioner) String() string {
	switch p {
	case Murmur2:
		return "murmur2"
	case CRC32:
		return "crc32"
	}
	return fmt.Sprintf("Partitioner(%d)", int(p))
}

// Partition returns the partition p puts key on, of partitions;
// partitions < 1 returns -1 as KeyPartition does.
func (p Partitioner) Partition(key []byte, partitions int32) int32 {
	if p == CRC32 {
		return CRC32KeyPartition(key, partitions)
	}
	return KeyPartition(key, partitions)
}

// CRC32KeyPartition returns the partition librdkafka's consistent
// partitioner picks for key: crc32(key) % partitions, the CRC-32 being the
// IEEE one of zlib and rd_crc32, the modulo unsigned as in C.
func CRC32KeyPartition(key []byte, partitions int32) int32 {
	if partitions < 1 {
		return -1
	}
	return int32(crc32.ChecksumIEEE(key) % uint32(partitions))
}
