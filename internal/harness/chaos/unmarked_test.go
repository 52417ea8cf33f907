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
