package memory_test

import (
	"fmt"
	"testing"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/memory"
	"github.com/eddy-streams/eddy/state/statetest"
)

func TestConformance(t *testing.T) {
	statetest.Run(t, func(t *testing.T) state.Backend { return memory.New() })
}

func TestDirs(t *testing.T) {
	b := memory.New()
	for _, dir := range []string{"/b", "/a/", "/a"} {
		db, err := b.Open(dir)
		if err != nil {
			t.Fatalf("Open(%s): %v", dir, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(b.Dirs()); got != "[/a /b]" {
		t.Fatalf("Dirs = %s; want [/a /b] (cleaned, sorted, no duplicates)", got)
	}
	if err := b.Destroy("/b"); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(b.Dirs()); got != "[/a]" {
		t.Fatalf("Dirs after Destroy = %s; want [/a]", got)
	}
}

// A scan's callback may apply a batch (the conformance suite does not ask
// what the scan then sees; this backend behaves as an iterator over a live
// structure): a key created after the scan began is not visited, a deleted
// one is skipped, a changed value is seen, and a key that the batch
// range-deletes and writes again existed all along, so it is visited.
func TestScanSeesApplyDuringIt(t *testing.T) {
	db, err := memory.New().Open("/d")
	if err != nil {
		t.Fatal(err)
	}
	var b state.Batch
	for i := range 200 { // more than one chunk
		b.Writes = append(b.Writes, state.Write{Store: "s", Key: fmt.Appendf(nil, "k%03d", i), Value: []byte("old")})
	}
	if err := db.Apply(&b); err != nil {
		t.Fatal(err)
	}
	during := state.Batch{
		Ranges: []state.DeleteRange{{Store: "s", Lower: []byte("k100"), Upper: []byte("k110")}},
		Writes: []state.Write{
			{Store: "s", Key: []byte("k001"), Value: []byte("new")},   // changed, same chunk
			{Store: "s", Key: []byte("k002"), Delete: true},           // deleted, same chunk
			{Store: "s", Key: []byte("k003x"), Value: []byte("born")}, // created, same chunk
			{Store: "s", Key: []byte("k105"), Value: []byte("again")}, // range-deleted and rewritten
			{Store: "s", Key: []byte("k150"), Value: []byte("new")},   // changed, later chunk
			{Store: "s", Key: []byte("k150x"), Value: []byte("born")}, // created, later chunk
		},
	}
	got := map[string]string{}
	err = db.Scan("s", nil, nil, func(k, v []byte) error {
		got[string(k)] = string(v)
		if string(k) == "k000" {
			return db.Apply(&during)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"k001": "new", "k105": "again", "k150": "new"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("scan saw %s=%q, want %q", k, got[k], v)
		}
	}
	for _, k := range []string{"k002", "k003x", "k150x", "k100", "k109"} {
		if v, ok := got[k]; ok {
			t.Errorf("scan saw %s=%q, want it skipped", k, v)
		}
	}
	if len(got) != 200-1-10+1 { // k002 and k100..k109 gone, k105 back
		t.Errorf("scan saw %d keys, want %d", len(got), 190)
	}
	// A scan after the batch sees its keys, born or not.
	n := 0
	if err := db.Scan("s", nil, nil, func(k, v []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 192 {
		t.Errorf("later scan saw %d keys, want 192", n)
	}
}
