package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func rec(off, pid int64, epoch int16, txn bool, value string) *kgo.Record {
	r := &kgo.Record{Offset: off, ProducerID: pid, ProducerEpoch: epoch, Value: []byte(value)}
	if txn {
		r.Attrs = kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true})
	}
	return r
}

func marker(off, pid int64, commit bool) *kgo.Record {
	key := binary.BigEndian.AppendUint16(nil, 0)
	t := uint16(0)
	if commit {
		t = 1
	}
	key = binary.BigEndian.AppendUint16(key, t)
	return &kgo.Record{Offset: off, ProducerID: pid, Key: key,
		Attrs: kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true, Control: true})}
}

func TestTxnFilter(t *testing.T) {
	for _, tc := range []struct {
		name string
		recs []*kgo.Record
		end  int64
		want []string
	}{
		{"plain", []*kgo.Record{rec(0, 1, 0, false, "a"), rec(1, 1, 0, false, "b")}, 2, []string{"a", "b"}},
		{"commit", []*kgo.Record{rec(0, 1, 0, true, "a"), rec(1, 1, 0, true, "b"), marker(2, 1, true)}, 3, []string{"a", "b"}},
		{"abort", []*kgo.Record{rec(0, 1, 0, true, "a"), marker(1, 1, false), rec(2, 1, 1, true, "b"), marker(3, 1, true)}, 4, []string{"b"}},
		{"interleaved in offset order", []*kgo.Record{rec(0, 1, 0, true, "a1"), rec(1, 2, 0, true, "b1"), rec(2, 1, 0, true, "a2"), marker(3, 2, true), marker(4, 1, true)}, 5, []string{"a1", "b1", "a2"}},
		{"unmarked abort then new epoch", []*kgo.Record{rec(0, 1, 3, true, "lost"), rec(1, 1, 4, true, "kept"), marker(2, 1, true)}, 3, []string{"kept"}},
		{"open at end", []*kgo.Record{rec(0, 1, 0, false, "a"), rec(1, 2, 0, true, "open")}, 2, []string{"a"}},
		{"records past end ignored", []*kgo.Record{rec(0, 1, 0, false, "a"), rec(1, 1, 0, false, "late")}, 1, []string{"a"}},
		// Producer 2 opened a transaction at 2 before producer 1's marker
		// at 3: the stable range ends at 2, yet producer 1 committed.
		{"marker past end", []*kgo.Record{rec(0, 1, 0, true, "a1"), rec(1, 1, 0, true, "a2"), rec(2, 2, 0, true, "open"), marker(3, 1, true)}, 2, []string{"a1", "a2"}},
		{"abort marker past end", []*kgo.Record{rec(0, 1, 0, true, "a1"), rec(1, 2, 0, true, "open"), marker(2, 1, false), rec(3, 2, 0, true, "open2")}, 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &txnFilter{end: tc.end, hwm: int64(len(tc.recs)), pending: map[int64]int16{}}
			var got []string
			for _, r := range tc.recs {
				if f.done {
					break
				}
				if err := f.add(r, func(r *kgo.Record) error { got = append(got, string(r.Value)); return nil }); err != nil {
					t.Fatal(err)
				}
			}
			if !f.done {
				t.Fatal("filter did not reach the end")
			}
			if !slices.Equal(got, tc.want) && (len(got) != 0 || len(tc.want) != 0) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestReadCommittedAgainstBroker writes committed, aborted and plain
// records and checks ReadCommitted returns what read_committed does.
func TestReadCommittedAgainstBroker(t *testing.T) {
	b, err := StartBroker(BrokerConfig{Addr: "127.0.0.1:0", DefaultPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	txn, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.TransactionalID("t"), kgo.DefaultProduceTopic("topic"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	var want []string
	for i := 0; i < 4; i++ {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		v := fmt.Sprintf("txn-%d", i)
		if err := txn.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		commit := i%2 == 0
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
		if commit {
			want = append(want, v)
		}
	}
	plain, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("topic"))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("plain")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	want = append(want, "plain")
	ends, err := kadm.NewClient(plain).ListCommittedOffsets(ctx, "topic")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup("topic", 0)
	var got []string
	err = ReadCommitted(ctx, []kgo.Opt{kgo.SeedBrokers(b.Addr())}, map[string]map[int32]Span{"topic": {0: {0, end.Offset}}},
		func(r *kgo.Record) error { got = append(got, string(r.Value)); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// FuzzTxnFilter decodes a random partition log (plain records, records of
// up to four transactional producers whose epochs grow, commit and abort
// markers) with txnFilter and compares what it passes on with a reference:
// a transactional record counts iff the next record of its producer that
// settles it is a commit marker (a marker settles; a record of a higher
// epoch aborts; nothing before the high watermark aborts).
func FuzzTxnFilter(f *testing.F) {
	f.Add([]byte{3, 0x04, 0x05, 0x08, 0x00, 0x0c})
	f.Add([]byte{2, 0x04, 0x74, 0x08, 0x09})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 2 {
			return
		}
		ops := in[1:]
		epochs := map[int64]int16{}
		var log []*kgo.Record
		for i, b := range ops {
			off, pid := int64(i), int64(b&3)+1
			if b>>4&7 == 7 {
				epochs[pid]++
			}
			switch b >> 2 & 3 {
			case 0:
				log = append(log, rec(off, pid, 0, false, fmt.Sprint(off)))
			case 1:
				log = append(log, rec(off, pid, epochs[pid], true, fmt.Sprint(off)))
			case 2:
				log = append(log, marker(off, pid, true))
			case 3:
				log = append(log, marker(off, pid, false))
			}
		}
		end := int64(in[0]) % int64(len(log)+1)

		var want []string
		for _, r := range log[:end] {
			if r.Attrs.IsControl() {
				continue
			}
			if !r.Attrs.IsTransactional() {
				want = append(want, string(r.Value))
				continue
			}
			for _, next := range log[r.Offset+1:] {
				if next.ProducerID != r.ProducerID {
					continue
				}
				if next.Attrs.IsControl() {
					if len(next.Key) >= 4 && binary.BigEndian.Uint16(next.Key[2:4]) == 1 {
						want = append(want, string(r.Value))
					}
					break
				}
				if next.Attrs.IsTransactional() && next.ProducerEpoch > r.ProducerEpoch {
					break // fenced: its transaction ended unmarked
				}
			}
		}

		flt := &txnFilter{end: end, hwm: int64(len(log)), pending: map[int64]int16{}}
		var got []string
		emit := func(r *kgo.Record) error { got = append(got, string(r.Value)); return nil }
		if end == 0 {
			flt.done = true // ReadCommitted does not read an empty span
		}
		for _, r := range log {
			if flt.done {
				break
			}
			if err := flt.add(r, emit); err != nil {
				t.Fatal(err)
			}
		}
		if !flt.done {
			if err := flt.finish(emit); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("log %v end %d: filter passed %v, reference %v", ops, end, got, want)
		}
	})
}
