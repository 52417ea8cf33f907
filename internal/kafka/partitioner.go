package kafka

import "encoding/binary"

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
