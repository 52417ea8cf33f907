package runtime

import "github.com/twmb/franz-go/pkg/kgo"

// recordArena holds the records one transaction produces and their keys
// and values, laid out in the order they were produced, for reuse by the
// next transaction once this one ended (franz-go then holds none of them).
//
// A pool of records that each kept its own key and value buffers cost no
// allocation either, but at a hundred thousand keys a transaction's ninety
// thousand records (outputs and changelog) and their buffers lay all over
// the heap, and filling each one missed the CPU cache: copying keys and
// values was a tenth of the ledger's CPU. Filled in order, the arena's
// memory is written the way the CPU's prefetcher expects.
type recordArena struct {
	// records are chunks of recordChunk records; used counts those handed
	// out in this transaction.
	records [][]kgo.Record
	used    int
	// bytes are chunks of byteChunk bytes; bytes[chunk] is being filled
	// and each is used up to its length.
	bytes [][]byte
	chunk int
	// headers holds the records' headers (the structs; their values are
	// the producer's), grown as needed: a record keeps the array it got.
	headers []kgo.RecordHeader
}

const (
	recordChunk = 1024
	byteChunk   = 256 << 10
	// A key or value larger than a quarter of a chunk gets memory of its
	// own, which the transaction's end lets go of.
	ownBytes = byteChunk / 4
)

// record returns a zeroed record for the open transaction.
func (a *recordArena) record() *kgo.Record {
	c, i := a.used/recordChunk, a.used%recordChunk
	if c == len(a.records) {
		a.records = append(a.records, make([]kgo.Record, recordChunk))
	}
	a.used++
	r := &a.records[c][i]
	*r = kgo.Record{}
	return r
}

// len returns the number of records the open transaction produced.
func (a *recordArena) len() int { return a.used }

// copy returns a copy of b in the arena, keeping nil (a null key, a
// tombstone) apart from empty.
func (a *recordArena) copy(b []byte) []byte {
	switch {
	case b == nil:
		return nil
	case len(b) > ownBytes:
		return append(make([]byte, 0, len(b)), b...)
	}
	if len(a.bytes) == 0 || len(a.bytes[a.chunk])+len(b) > byteChunk {
		if len(a.bytes) != 0 {
			a.chunk++
		}
		if a.chunk == len(a.bytes) {
			a.bytes = append(a.bytes, make([]byte, 0, byteChunk))
		}
	}
	buf := a.bytes[a.chunk]
	n := len(buf)
	buf = append(buf, b...)
	a.bytes[a.chunk] = buf
	return buf[n:len(buf):len(buf)]
}

// copyHeaders returns a copy of h in the arena (nil for none).
func (a *recordArena) copyHeaders(h []kgo.RecordHeader) []kgo.RecordHeader {
	if len(h) == 0 {
		return nil
	}
	n := len(a.headers)
	a.headers = append(a.headers, h...)
	return a.headers[n:len(a.headers):len(a.headers)]
}

// reset makes the arena's memory reusable: the transaction that produced
// into it has ended.
func (a *recordArena) reset() {
	for i := range a.bytes[:min(a.chunk+1, len(a.bytes))] {
		a.bytes[i] = a.bytes[i][:0]
	}
	a.used, a.chunk = 0, 0
	clear(a.headers) // the producers' header values
	a.headers = a.headers[:0]
}
