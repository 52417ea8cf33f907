package eddytest

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
)

// outputQueue holds the records of one topic that the topology wrote and
// the test has not read, oldest first, in memory the garbage collector does
// not scan: their bytes in one arena, their fields in a slice of plain
// values. A test that pipes half a million records and reads the output at
// the end keeps them all (a repartition topic's too, which nobody reads);
// as a *kgo.Record each, with its key and value cloned, they were three
// allocations and a dozen pointers per record that every GC cycle visited
// again, so that the cost per piped record grew with the records piped.
type outputQueue struct {
	topic string
	recs  []outputRecord
	// data holds the bytes of recs. Bytes handed to a reader are never
	// overwritten: a drained queue goes on appending after them, and a
	// compaction copies the unread part to a new array.
	data []byte
	// committed is the queue's length at the last commit: the records
	// past it belong to the step under way, which a reader does not see
	// and a rollback drops.
	committed queueMark
	// head is the first unread record.
	head int
	// inStep is set once the driver's current step has written to the
	// queue (see Driver.step).
	inStep bool
}

// outputRecord is one record of an outputQueue: at data[off:], its key,
// its value, then each header as uvarint(len(key)), key,
// uvarint(len(value)+1) (0 for a nil value), value.
type outputRecord struct {
	off       int
	timestamp int64
	// keyLen and valueLen are -1 for a nil key or value (a tombstone),
	// which an empty one is not.
	keyLen, valueLen int32
	headers          int32
}

// queueMark is the length of a queue's parts, to truncate it back to.
type queueMark struct{ recs, data int }

// len is the number of committed records not read yet.
func (q *outputQueue) len() int { return q.committed.recs - q.head }

func (q *outputQueue) mark() queueMark { return queueMark{len(q.recs), len(q.data)} }

// commit makes the records pushed since the last commit readable.
func (q *outputQueue) commit() { q.committed = q.mark() }

// rollback drops the records pushed since the last commit. Nobody read
// them, so their bytes may be overwritten.
func (q *outputQueue) rollback() {
	q.recs, q.data = q.recs[:q.committed.recs], q.data[:q.committed.data]
}

// uncommitted returns the records pushed since the last commit, oldest
// first.
func (q *outputQueue) uncommitted() []outputRecord { return q.recs[q.committed.recs:] }

// push appends a copy of r.
func (q *outputQueue) push(r *kgo.Record) {
	q.recs = append(q.recs, outputRecord{
		off:       len(q.data),
		timestamp: r.Timestamp.UnixMilli(),
		keyLen:    length(r.Key),
		valueLen:  length(r.Value),
		headers:   int32(len(r.Headers)),
	})
	q.data = append(q.data, r.Key...)
	q.data = append(q.data, r.Value...)
	for _, h := range r.Headers {
		q.data = binary.AppendUvarint(q.data, uint64(len(h.Key)))
		q.data = append(q.data, h.Key...)
		q.data = binary.AppendUvarint(q.data, uint64(length(h.Value)+1))
		q.data = append(q.data, h.Value...)
	}
}

// length is len(b), or -1 for nil. A record's key or value (which the
// runtime caps at MaxRecordBytes) fits in an int32.
func length(b []byte) int32 {
	if b == nil {
		return -1
	}
	return int32(len(b))
}

// outputRead is a record taken from an outputQueue. Its slices are the
// queue's and stay valid: the queue never writes over bytes it handed out.
type outputRead struct {
	key, value []byte
	timestamp  int64
	headers    []eddy.Header
}

// pop removes and returns the oldest unread committed record.
func (q *outputQueue) pop() (outputRead, bool) {
	if q.head == q.committed.recs {
		return outputRead{}, false
	}
	r := q.read(&q.recs[q.head])
	q.head++
	q.reclaim()
	return r, true
}

// read returns o's fields, its slices aliasing the queue's data.
func (q *outputQueue) read(o *outputRecord) outputRead {
	r := outputRead{timestamp: o.timestamp}
	at := o.off
	r.key, at = q.bytes(at, int(o.keyLen))
	r.value, at = q.bytes(at, int(o.valueLen))
	if o.headers > 0 {
		r.headers = make([]eddy.Header, o.headers)
		for i := range r.headers {
			n, w := binary.Uvarint(q.data[at:])
			key, next := q.bytes(at+w, int(n))
			n, w = binary.Uvarint(q.data[next:])
			r.headers[i].Key = string(key)
			r.headers[i].Value, at = q.bytes(next+w, int(n)-1)
		}
	}
	return r
}

// bytes returns the n bytes at data[at:] (nil for n == -1), capped so that
// a caller appending to them reallocates instead of writing over the next
// ones, and where they end.
func (q *outputQueue) bytes(at, n int) ([]byte, int) {
	if n < 0 {
		return nil, at
	}
	return q.data[at : at+n : at+n], at + n
}

// compactAfter is how many records must have been read before a queue that
// still holds unread ones moves them to the front.
const compactAfter = 1024

// reclaim lets the memory of read records go. A drained queue starts over
// at the front of recs and after the last byte of data (whose
// read bytes belong to the readers now). A queue read as fast as it is
// written never drains, so once at least half of it (and compactAfter
// records) was read, the unread part moves to new memory: a copy of the
// unread records per as many read, O(1) per record.
func (q *outputQueue) reclaim() {
	if len(q.recs) != q.committed.recs {
		return // a step under way (after a failed commit): keep it as it is
	}
	if q.head == len(q.recs) {
		q.recs, q.data = q.recs[:0], q.data[len(q.data):]
		q.head = 0
		q.commit()
		return
	}
	if q.head < compactAfter || 2*q.head < len(q.recs) {
		return
	}
	base := q.recs[q.head].off // the unread records' bytes start here
	data := make([]byte, len(q.data)-base, cap(q.data)-base)
	copy(data, q.data[base:])
	recs := append([]outputRecord(nil), q.recs[q.head:]...)
	for i := range recs {
		recs[i].off -= base
	}
	q.recs, q.data = recs, data
	q.head = 0
	q.commit()
}
