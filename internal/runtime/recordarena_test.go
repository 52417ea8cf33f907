package runtime

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestRecordArenaKeepsEmptyApartFromNil(t *testing.T) {
	var a recordArena
	for range 2 { // a fresh arena, then a reused one
		if a.copy(nil) != nil {
			t.Fatal("nil must stay nil (a tombstone or a null key)")
		}
		if got := a.copy([]byte{}); got == nil || len(got) != 0 {
			t.Fatalf("empty must stay empty and non-nil, got %#v", got)
		}
		if got := a.copy([]byte("v")); string(got) != "v" {
			t.Fatalf("got %q", got)
		}
		a.reset()
	}
}

// Records and copies of one transaction never share memory, whatever
// their sizes (chunks fill up, large values get their own), and a record
// comes zeroed even when reused.
func TestRecordArenaTransaction(t *testing.T) {
	var a recordArena
	for txn := range 3 {
		type want struct {
			r          *kgo.Record
			key, value []byte
		}
		var made []want
		for i := range 3000 {
			r := a.record()
			if r.Key != nil || r.Value != nil || r.Headers != nil || r.Topic != "" || !r.Timestamp.IsZero() {
				t.Fatalf("txn %d: record %d not zeroed: %+v", txn, i, r)
			}
			key := fmt.Appendf(nil, "key-%d-%d", txn, i)
			value := bytes.Repeat([]byte{byte(i)}, (i*997)%(3*ownBytes/2))
			r.Key, r.Value = a.copy(key), a.copy(value)
			r.Headers = a.copyHeaders([]kgo.RecordHeader{{Key: "h", Value: key}})
			r.Topic = "t"
			made = append(made, want{r, key, value})
		}
		if a.len() != len(made) {
			t.Fatalf("len = %d; want %d", a.len(), len(made))
		}
		for i, m := range made {
			if !bytes.Equal(m.r.Key, m.key) || !bytes.Equal(m.r.Value, m.value) || string(m.r.Headers[0].Value) != string(m.key) {
				t.Fatalf("txn %d: record %d overwritten", txn, i)
			}
			if cap(m.r.Key) != len(m.r.Key) {
				t.Fatalf("txn %d: record %d's key can grow into its neighbour", txn, i)
			}
		}
		a.reset()
	}
}
