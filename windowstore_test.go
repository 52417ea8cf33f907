package eddy_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// undecodable is a serde whose Deserialize always fails: it shows how a
// scan reports an entry it cannot decode.
type undecodable struct{}

func (undecodable) Serialize(dst []byte, v int64) ([]byte, error) {
	return serde.Int64().Serialize(dst, v)
}
func (undecodable) Deserialize([]byte) (int64, error) { return 0, errors.New("cannot decode") }

// TestWindowStoreScans: FetchAll and Fetch as iterators: their order, one
// key's windows, a loop that breaks early, and a decode error yielded once.
func TestWindowStoreScans(t *testing.T) {
	const s = 1000
	d, in, _ := windowCountDriver(t, eddy.TumblingWindows(10*time.Second), eddy.EmitEveryUpdate)
	pipeAll(t, in, timed{"b", 1 * s}, timed{"a", 2 * s}, timed{"a", 12 * s}, timed{"b", 13 * s}, timed{"a", 14 * s})
	spec := eddy.NewWindowStoreSpec("counts", 10*time.Second, serde.String(), serde.Int64())
	ws, err := eddytest.WindowStore(d, spec)
	if err != nil {
		t.Fatal(err)
	}
	render := func(e eddy.WindowEntry[string, int64]) string {
		return fmt.Sprintf("%s@%d=%d", e.Key, e.Start, e.Value)
	}
	var all, as, first []string
	for e, err := range ws.FetchAll(0, 1<<62) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, render(e))
	}
	if want := []string{"a@0=1", "b@0=1", "a@10000=2", "b@10000=1"}; !slices.Equal(all, want) {
		t.Errorf("FetchAll: %q, want %q (start order, then key order)", all, want)
	}
	for e, err := range ws.Fetch("a", 0, 1<<62) {
		if err != nil {
			t.Fatal(err)
		}
		as = append(as, render(e))
	}
	if want := []string{"a@0=1", "a@10000=2"}; !slices.Equal(as, want) {
		t.Errorf("Fetch(a): %q, want %q", as, want)
	}
	for e, err := range ws.FetchAll(0, 1<<62) {
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, render(e))
		break
	}
	if want := []string{"a@0=1"}; !slices.Equal(first, want) {
		t.Errorf("a loop that breaks at once saw %q, want %q", first, want)
	}

	bad, err := eddytest.WindowStore(d, eddy.NewWindowStoreSpec("counts", 10*time.Second, serde.String(), serde.Serde[int64](undecodable{})))
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	for _, err := range bad.FetchAll(0, 1<<62) {
		errs = append(errs, err)
	}
	if len(errs) != 1 || errs[0] == nil || !strings.HasPrefix(errs[0].Error(), "eddy: store counts: decode value") {
		t.Errorf("scan of undecodable values yielded %v, want one error naming the store", errs)
	}
}

// TestSessionStoreScans: Find and FetchEnded as iterators.
func TestSessionStoreScans(t *testing.T) {
	const s = 1000
	d, in, _ := windowCountDriver(t, eddy.SessionWindowsWithGap(5*time.Second).WithGrace(time.Hour), eddy.EmitEveryUpdate)
	pipeAll(t, in, timed{"a", 1 * s}, timed{"a", 3 * s}, timed{"b", 4 * s}, timed{"a", 20 * s})
	ss, err := eddytest.SessionStore(d, eddy.NewSessionStoreSpec("counts", time.Hour, serde.String(), serde.Int64()))
	if err != nil {
		t.Fatal(err)
	}
	render := func(kv eddy.KeyValue[eddy.Windowed[string], int64]) string {
		return fmt.Sprintf("%s@[%d,%d]=%d", kv.Key.Key, kv.Key.Start, kv.Key.End, kv.Value)
	}
	var found, ended []string
	for kv, err := range ss.Find("a", 0, 100*s, 100*s) {
		if err != nil {
			t.Fatal(err)
		}
		found = append(found, render(kv))
	}
	if want := []string{"a@[1000,3000]=2", "a@[20000,20000]=1"}; !slices.Equal(found, want) {
		t.Errorf("Find(a): %q, want %q", found, want)
	}
	for kv, err := range ss.FetchEnded(0, 10*s) {
		if err != nil {
			t.Fatal(err)
		}
		ended = append(ended, render(kv))
	}
	if want := []string{"a@[1000,3000]=2", "b@[4000,4000]=1"}; !slices.Equal(ended, want) {
		t.Errorf("FetchEnded(0, 10s): %q, want %q", ended, want)
	}
}
