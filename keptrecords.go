package eddy

import (
	"github.com/twmb/franz-go/pkg/kgo"
)

// keptRecords keeps copies of input records until a commit, for a policy
// that may have to dead-letter one of them later (a write a
// TransactionalSink refuses at prepare). A runtime may reuse an input
// record and its bytes once processed (records read back from a
// repartition topic do), so pointers would not do; the copies' bytes go
// into one arena, so that keeping a record allocates nothing once the
// arena has grown to a transaction's size.
type keptRecords struct {
	recs    []keptRecord
	headers []keptHeader
	arena   []byte
}

// keptRecord is a record's metadata; its key, value and headers are
// spans of the arena and of headers.
type keptRecord struct {
	meta                 kgo.Record // Key, Value and Headers nil
	key, value           span
	headerFrom, headerTo int
}

type keptHeader struct {
	key   string
	value span
}

// span is a slice of the arena; nil keeps a nil slice apart from an
// empty one (a tombstone from an empty value).
type span struct {
	from, to int
	nil      bool
}

func (k *keptRecords) span(b []byte) span {
	from := len(k.arena)
	k.arena = append(k.arena, b...)
	return span{from: from, to: len(k.arena), nil: b == nil}
}

func (k *keptRecords) bytes(s span) []byte {
	if s.nil {
		return nil
	}
	return append([]byte(nil), k.arena[s.from:s.to]...)
}

// add keeps a copy of r and returns its index.
func (k *keptRecords) add(r *kgo.Record) int {
	kr := keptRecord{meta: *r, key: k.span(r.Key), value: k.span(r.Value), headerFrom: len(k.headers)}
	kr.meta.Key, kr.meta.Value, kr.meta.Headers = nil, nil, nil
	kr.meta.Context = nil
	for _, h := range r.Headers {
		k.headers = append(k.headers, keptHeader{key: h.Key, value: k.span(h.Value)})
	}
	kr.headerTo = len(k.headers)
	k.recs = append(k.recs, kr)
	return len(k.recs) - 1
}

// same reports whether the record kept at index i is r, the same record
// of the same partition.
func (k *keptRecords) same(i int, r *kgo.Record) bool {
	m := &k.recs[i].meta
	return m.Offset == r.Offset && m.Partition == r.Partition && m.Topic == r.Topic
}

// record returns a copy of the record kept at index i, its own bytes.
func (k *keptRecords) record(i int) *kgo.Record {
	kr := &k.recs[i]
	r := kr.meta
	r.Key, r.Value = k.bytes(kr.key), k.bytes(kr.value)
	for _, h := range k.headers[kr.headerFrom:kr.headerTo] {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.key, Value: k.bytes(h.value)})
	}
	return &r
}

// reset drops the kept records, keeping the memory for the next ones.
func (k *keptRecords) reset() {
	clear(k.recs) // the topics' strings
	clear(k.headers)
	k.recs, k.headers, k.arena = k.recs[:0], k.headers[:0], k.arena[:0]
	if cap(k.arena) > maxKeptArena {
		k.arena = nil // one huge transaction does not pin its size for good
	}
}

// maxKeptArena is the most arena kept from one transaction to the next.
const maxKeptArena = 16 << 20
