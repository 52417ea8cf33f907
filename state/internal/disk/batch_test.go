package disk

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/internal/keys"
)

// orderWriter records the keys a batch sets or deletes, in order.
type orderWriter struct {
	keys   []string
	values map[string]string
}

func (w *orderWriter) Set(k, v []byte) error {
	w.keys = append(w.keys, string(k))
	w.values[string(k)] = string(v)
	return nil
}

func (w *orderWriter) Delete(k []byte) error {
	w.keys = append(w.keys, string(k))
	delete(w.values, string(k))
	return nil
}

func (w *orderWriter) DeleteRange(lo, hi []byte) error { return nil }

// Encode writes in database-key order whatever the keys share (long
// common prefixes, keys that are prefixes of others, zero bytes, which
// the sort's abbreviated keys pad with, the empty key) and whatever order
// they came in; of two writes of one key, the later wins; the offsets
// come last.
func TestEncodeSortsWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	alphabet := []byte{0, 1, 'a', 'b', 0xff}
	var enc Encoder
	for round := range 300 {
		b := &state.Batch{Offsets: sample()}
		want := map[string]string{}
		for i := range 1 + rng.IntN(60) {
			store := []string{"s", "s2", "t"}[rng.IntN(3)]
			k := []byte(strings.Repeat("shared-prefix/", rng.IntN(3)))
			for range rng.IntN(12) {
				k = append(k, alphabet[rng.IntN(len(alphabet))])
			}
			dbKey := string(keys.Append(nil, store, k))
			if rng.IntN(5) == 0 {
				b.Writes = append(b.Writes, state.Write{Store: store, Key: k, Delete: true})
				delete(want, dbKey)
				continue
			}
			v := fmt.Sprint(i)
			b.Writes = append(b.Writes, state.Write{Store: store, Key: k, Value: []byte(v)})
			want[dbKey] = v
		}
		if err := enc.Copy(b); err != nil {
			t.Fatal(err)
		}
		// Copy took the batch: changing it now changes nothing.
		for _, w := range b.Writes {
			clear(w.Key)
			clear(w.Value)
		}
		w := &orderWriter{values: map[string]string{}}
		if err := enc.Encode(w); err != nil {
			t.Fatal(err)
		}
		last := w.keys[len(w.keys)-1]
		if last != string(keys.Offsets()) {
			t.Fatalf("round %d: last key %q; want the offsets", round, last)
		}
		if !slices.IsSorted(w.keys) {
			t.Fatalf("round %d: keys not in order: %q", round, w.keys)
		}
		delete(w.values, last)
		if fmt.Sprint(w.values) != fmt.Sprint(want) {
			t.Fatalf("round %d: batch leaves\n%v\nwant\n%v", round, w.values, want)
		}
	}
}

// ApplyInBackground returns before the engine wrote the batch; Wait
// returns once it has, and a failed apply fails every later call, so no
// batch goes on top of one that is missing.
func TestApplyInBackground(t *testing.T) {
	e := &mapEngine{kv: map[string][]byte{}}
	c := &Core{Dir: "/d"}
	if err := c.Open(e); err != nil {
		t.Fatal(err)
	}
	put := func(k, v string) *state.Batch {
		o := sample()
		o.StreamTime = int64(len(v))
		return &state.Batch{Writes: []state.Write{{Store: "s", Key: []byte(k), Value: []byte(v)}}, Offsets: o}
	}
	b := put("k", "v1")
	if err := c.ApplyInBackground(e, b); err != nil {
		t.Fatal(err)
	}
	b.Writes[0].Value[1] = '9' // the caller's memory is its own again
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := string(e.kv[string(keys.Append(nil, "s", []byte("k")))]); got != "v1" {
		t.Fatalf("k = %q; want v1", got)
	}
	if c.Offsets().StreamTime != 2 {
		t.Fatalf("offsets not kept: %v", c.Offsets())
	}

	e.fail = errors.New("disk full")
	if err := c.ApplyInBackground(e, put("k", "v22")); err != nil {
		t.Fatalf("ApplyInBackground = %v; want the error from a later call", err)
	}
	if err := c.Wait(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Wait = %v; want the apply's error", err)
	}
	e.fail = nil
	if err := c.Apply(e, put("k", "v333")); err == nil {
		t.Fatal("Apply after a failed background apply succeeded")
	}
	if err := c.ApplyInBackground(e, put("k", "v333")); err == nil {
		t.Fatal("ApplyInBackground after a failed background apply succeeded")
	}
	if got := string(e.kv[string(keys.Append(nil, "s", []byte("k")))]); got != "v1" || c.Offsets().StreamTime != 2 {
		t.Fatalf("k = %q, offsets %v; want v1 and the first batch's", got, c.Offsets())
	}
}
