package chaos

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestUnmarkedScan(t *testing.T) {
	txn := kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true})
	ctrl := kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true, Control: true})
	rec := func(p int32, pid int64, epoch int16, v string) *kgo.Record {
		return &kgo.Record{Partition: p, ProducerID: pid, ProducerEpoch: epoch, Attrs: txn, Value: []byte(v)}
	}
	marker := func(p int32, pid int64) *kgo.Record { return &kgo.Record{Partition: p, ProducerID: pid, Attrs: ctrl} }
	s := newUnmarkedScan()
	for _, r := range []*kgo.Record{
		rec(0, 1, 5, "marked"), marker(0, 1),
		rec(0, 1, 6, "torn-a"), rec(0, 1, 6, "torn-b"), rec(0, 2, 1, "other producer"),
		rec(0, 1, 8, "next epoch"), marker(0, 1), marker(0, 2),
		rec(1, 1, 6, "other partition, marked"), marker(1, 1),
		rec(1, 1, 9, "open at the end"),
		{Partition: 1, Value: []byte("not transactional")},
	} {
		s.add(r)
	}
	var got []string
	for _, r := range s.unmarked {
		got = append(got, string(r.Value))
	}
	if len(got) != 2 || got[0] != "torn-a" || got[1] != "torn-b" {
		t.Fatalf("unmarked %q, want the two records a higher epoch followed before any marker", got)
	}
}

// TestBrokerGapAccounting checks that only what a torn transaction
// explains is counted as the broker's: a late record lost or repeated next
// to a tear, but not through it, stays eddy's.
func TestBrokerGapAccounting(t *testing.T) {
	txn := kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true})
	ctrl := kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true, Control: true})
	late := func(pid int64, epoch int16, id string) *kgo.Record {
		return &kgo.Record{ProducerID: pid, ProducerEpoch: epoch, Attrs: txn, Value: []byte(`{"id":"` + id + `","account":"a","amount":1}`)}
	}
	commit := func(pid int64, epoch int16) *kgo.Record {
		return &kgo.Record{ProducerID: pid, ProducerEpoch: epoch, Attrs: ctrl, Key: []byte{0, 0, 0, 1}}
	}
	abort := func(pid int64, epoch int16) *kgo.Record {
		return &kgo.Record{ProducerID: pid, ProducerEpoch: epoch, Attrs: ctrl, Key: []byte{0, 0, 0, 0}}
	}
	changelog := newUnmarkedScan()
	for _, r := range []*kgo.Record{
		late(7, 1, "state"), commit(7, 1), // epoch 1 committed on the changelog
		late(7, 2, "state"), abort(7, 2), // epoch 2 aborted
		late(7, 3, "state"), late(7, 4, "state"), commit(7, 4), // epoch 3 torn
	} {
		changelog.add(r)
	}
	if !changelog.committed[producerEpoch{7, 1}] || changelog.committed[producerEpoch{7, 2}] || !changelog.committed[producerEpoch{7, 4}] {
		t.Fatalf("committed epochs %v, want 1 and 4 (2 aborted)", changelog.committed)
	}
	if torn := changelog.torn(); len(torn) != 1 || !torn[producerEpoch{7, 3}] {
		t.Fatalf("torn epochs %v, want only 3", torn)
	}

	// Missing late records: p1's unmarked copy is of epoch 1, which
	// committed on the changelog (the broker's); p2's of epoch 2, which
	// aborted (eddy should have processed it again: eddy's); p3 has no
	// unmarked copy (eddy's).
	unmarkedLate := []*kgo.Record{late(7, 1, "p1"), late(7, 2, "p2")}
	missing := map[string]int{"p1": 1, "p2": 1, "p3": 1}
	if n := unmarkedLateMissing(missing, unmarkedLate, changelog.committed); n != 1 {
		t.Fatalf("%d missing late records excused, want 1 (p1 only)", n)
	}

	// Repeated late records: p4's first copy is of the torn epoch 3 (the
	// broker's), p5's of the intact epoch 1 (eddy's), p6 is an extra
	// without a repeat (eddy's).
	committedLate := []*kgo.Record{late(7, 3, "p4"), late(7, 5, "p4"), late(7, 1, "p5"), late(7, 5, "p5"), late(7, 5, "p6")}
	extra := map[string]int{"p4": 1, "p5": 1, "p6": 1}
	if n := tornLateDuplicates(committedLate, extra, changelog.torn()); n != 1 {
		t.Fatalf("%d repeated late records excused, want 1 (p4 only)", n)
	}

	// Repeated totals: w1's first copy is of the torn epoch 3 (the
	// broker's), w2's of the intact epoch 1 (eddy's), and w3's repeat
	// differs from its first copy (not identical: eddy's).
	total := func(epoch int16, key, value string) *kgo.Record {
		return &kgo.Record{ProducerID: 7, ProducerEpoch: epoch, Attrs: txn, Key: []byte(key), Value: []byte(value)}
	}
	totals := []*kgo.Record{total(3, "w1", "2"), total(5, "w1", "2"), total(1, "w2", "4"), total(5, "w2", "4"), total(3, "w3", "1"), total(5, "w3", "9")}
	if n := tornTotalsDuplicates(totals, changelog.torn()); n != 1 {
		t.Fatalf("%d repeated totals excused, want 1 (w1 only)", n)
	}
}
