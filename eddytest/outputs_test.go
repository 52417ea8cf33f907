package eddytest

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func record(key, value []byte, ts int64, headers ...kgo.RecordHeader) *kgo.Record {
	return &kgo.Record{Key: key, Value: value, Timestamp: time.UnixMilli(ts), Headers: headers}
}

func TestOutputQueueKeepsNilApartFromEmpty(t *testing.T) {
	var q outputQueue
	q.push(record(nil, []byte{}, 1))
	q.push(record([]byte{}, nil, 2, kgo.RecordHeader{Key: "h", Value: nil}, kgo.RecordHeader{Key: "", Value: []byte{}}))
	q.commit()
	r, ok := q.pop()
	if !ok || r.key != nil || r.value == nil || len(r.value) != 0 || r.timestamp != 1 || r.headers != nil {
		t.Fatalf("first: %+v %v, want nil key, empty value, ts 1, no headers", r, ok)
	}
	r, ok = q.pop()
	if !ok || r.key == nil || len(r.key) != 0 || r.value != nil || r.timestamp != 2 {
		t.Fatalf("second: %+v %v, want empty key, tombstone, ts 2", r, ok)
	}
	if len(r.headers) != 2 || r.headers[0].Key != "h" || r.headers[0].Value != nil || r.headers[1].Key != "" || r.headers[1].Value == nil {
		t.Fatalf("second's headers: %+v, want h=nil and \"\"=empty", r.headers)
	}
	if _, ok := q.pop(); ok {
		t.Fatal("a third record out of two")
	}
}

// A reader appending to a key or value it got writes to memory of its own.
func TestOutputQueueCapsReadSlices(t *testing.T) {
	var q outputQueue
	q.push(record([]byte("a"), []byte("1"), 1))
	q.push(record([]byte("b"), []byte("2"), 2))
	q.commit()
	first, _ := q.pop()
	_ = append(first.key, 'x')
	_ = append(first.value, 'x')
	if second, _ := q.pop(); string(second.key) != "b" || string(second.value) != "2" {
		t.Fatalf("second record %s=%s after appends to the first, want b=2", second.key, second.value)
	}
}

func TestOutputQueueShowsCommittedRecordsOnly(t *testing.T) {
	var q outputQueue
	q.push(record([]byte("a"), []byte("1"), 1))
	if q.len() != 0 {
		t.Fatalf("len %d before the commit, want 0", q.len())
	}
	if _, ok := q.pop(); ok {
		t.Fatal("read a record before its commit")
	}
	q.commit()
	q.push(record([]byte("b"), []byte("2"), 2))
	q.rollback()
	q.push(record([]byte("c"), []byte("3"), 3))
	q.commit()
	var got []string
	for r, ok := q.pop(); ok; r, ok = q.pop() {
		got = append(got, string(r.key)+"="+string(r.value))
	}
	if fmt.Sprint(got) != "[a=1 c=3]" {
		t.Fatalf("got %v, want [a=1 c=3] (b rolled back)", got)
	}
}

// A reader keeps the slices it was given: neither a drained queue's next
// records nor a compaction may write over them.
func TestOutputQueueNeverOverwritesReadBytes(t *testing.T) {
	var q outputQueue
	type kept struct{ key, value, header []byte }
	var reads []kept
	want := func(i int) (k, v, h string) {
		return fmt.Sprintf("key-%d", i), fmt.Sprintf("value-%d", i), fmt.Sprintf("h-%d", i)
	}
	pushed := 0
	push := func(n int) {
		for range n {
			k, v, h := want(pushed)
			q.push(record([]byte(k), []byte(v), int64(pushed), kgo.RecordHeader{Key: "h", Value: []byte(h)}))
			pushed++
		}
		q.commit()
	}
	pop := func(n int) {
		for range n {
			r, ok := q.pop()
			if !ok {
				t.Fatalf("queue empty after %d reads", len(reads))
			}
			if r.timestamp != int64(len(reads)) {
				t.Fatalf("read %d has timestamp %d", len(reads), r.timestamp)
			}
			reads = append(reads, kept{r.key, r.value, r.headers[0].Value})
		}
	}
	// Drain fully (the queue starts over), then read about as fast as
	// writing, so that the queue compacts several times.
	push(10)
	pop(10)
	for range 20 {
		push(700)
		pop(600)
	}
	pop(q.len())
	push(5)
	pop(5)
	if len(reads) != pushed {
		t.Fatalf("%d reads of %d records", len(reads), pushed)
	}
	for i, r := range reads {
		k, v, h := want(i)
		if string(r.key) != k || string(r.value) != v || string(r.header) != h {
			t.Fatalf("read %d now holds %s=%s (%s), want %s=%s (%s)", i, r.key, r.value, r.header, k, v, h)
		}
	}
}

// The records of a queue read as fast as it is written, never drained,
// do not pile up.
func TestOutputQueueLetsReadRecordsGo(t *testing.T) {
	var q outputQueue
	value := bytes.Repeat([]byte("v"), 100)
	q.push(record([]byte("k"), value, 0))
	for i := range 100_000 {
		q.push(record([]byte("k"), value, int64(i+1)))
		q.commit()
		if r, ok := q.pop(); !ok || r.timestamp != int64(i) {
			t.Fatalf("read %d: timestamp %d, %v", i, r.timestamp, ok)
		}
	}
	if q.len() != 1 {
		t.Fatalf("%d unread, want 1", q.len())
	}
	if n := len(q.recs); n > 2*compactAfter {
		t.Fatalf("%d records held for 1 unread", n)
	}
	if n := len(q.data); n > 2*compactAfter*(1+len(value)) {
		t.Fatalf("%d bytes held for 1 unread record", n)
	}
}
