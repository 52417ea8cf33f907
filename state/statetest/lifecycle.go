package statetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/eddy-streams/eddy/state"
)

// The tests in this file cover a database's life: reopen, destroy, several
// directories, and misuse.

func testReopen(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	offsets := sampleOffsets()
	if err := db.Apply(&state.Batch{Writes: []state.Write{put("s", "a", "1"), put("s", "b", "2"), put("t", "a", "3")}, Offsets: offsets}); err != nil {
		t.Fatal(err)
	}
	apply(t, db, del("s", "b"))
	mustClose(t, db)
	db = Open(t, b, dir)
	wantScan(t, db, "s", nil, nil, []KV{{"a", "1"}})
	wantGet(t, db, "t", "a", "3", true)
	wantOffsets(t, db, state.Offsets{}.Clone()) // the second Apply carried no offsets
	if err := db.Apply(&state.Batch{Offsets: offsets}); err != nil {
		t.Fatal(err)
	}
	mustClose(t, db)
	db = Open(t, b, dir)
	wantOffsets(t, db, offsets)
	wantGet(t, db, "s", "a", "1", true)
}

func testDestroy(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	if err := db.Apply(&state.Batch{Writes: []state.Write{put("s", "a", "1")}, Offsets: sampleOffsets()}); err != nil {
		t.Fatal(err)
	}
	if err := b.Destroy(dir); err == nil {
		t.Fatal("Destroy of an open database succeeded")
	}
	wantGet(t, db, "s", "a", "1", true)
	mustClose(t, db)
	if err := b.Destroy(dir); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if err := b.Destroy(dir); err != nil {
		t.Fatalf("Destroy of a destroyed database: %v", err)
	}
	db = Open(t, b, dir)
	wantScan(t, db, "s", nil, nil, nil)
	wantOffsets(t, db, state.NewOffsets())
}

func testDirsIndependent(t *testing.T, b state.Backend, dir string) {
	other := dir + "-other"
	db1 := Open(t, b, dir)
	db2 := Open(t, b, other)
	apply(t, db1, put("s", "k", "one"))
	apply(t, db2, put("s", "k", "two"))
	wantGet(t, db1, "s", "k", "one", true)
	wantGet(t, db2, "s", "k", "two", true)
	mustClose(t, db2)
	if err := b.Destroy(other); err != nil {
		t.Fatal(err)
	}
	wantGet(t, db1, "s", "k", "one", true)
}

func testOpenTwice(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	if db2, err := b.Open(dir); err == nil {
		_ = db2.Close()
		t.Fatal("second Open of an open directory succeeded")
	}
	if db2, err := b.Open(dir + "/."); err == nil {
		_ = db2.Close()
		t.Fatal("second Open of an open directory, spelled differently, succeeded")
	}
	mustClose(t, db)
	db = Open(t, b, dir)
	mustClose(t, db)
}

func testUseAfterClose(t *testing.T, b state.Backend, dir string) {
	db := Open(t, b, dir)
	mustClose(t, db)
	_, _, err := db.Get("s", []byte("k"))
	checkClosed(t, "Get", err)
	checkClosed(t, "Scan", db.Scan("s", nil, nil, func(k, v []byte) error { return nil }))
	checkClosed(t, "Apply", db.Apply(&state.Batch{}))
	_, err = db.Offsets()
	checkClosed(t, "Offsets", err)
	checkClosed(t, "Close", db.Close())
}

func checkClosed(t *testing.T, op string, err error) {
	t.Helper()
	if !errors.Is(err, state.ErrClosed) {
		t.Errorf("%s after Close: %v; want ErrClosed", op, err)
	}
}

func testConcurrentDirs(t *testing.T, b state.Backend, dir string) {
	// Workers open, write and close their own tasks' databases at the
	// same time; the backend's shared parts must cope (run with -race).
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			taskDir := fmt.Sprintf("%s-%d", dir, w)
			for round := range 3 {
				db, err := b.Open(taskDir)
				if err != nil {
					errs <- err
					return
				}
				key := fmt.Appendf(nil, "round-%d", round)
				if err := db.Apply(&state.Batch{Writes: []state.Write{{Store: "s", Key: key, Value: key}}}); err != nil {
					errs <- err
				}
				if _, ok, err := db.Get("s", key); err != nil || !ok {
					errs <- fmt.Errorf("worker %d: Get(%s) = %v, %v", w, key, ok, err)
				}
				if err := db.Close(); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for w := range 8 {
		db := Open(t, b, fmt.Sprintf("%s-%d", dir, w))
		if got := len(Scan(t, db, "s", nil, nil)); got != 3 {
			t.Errorf("worker %d: %d keys; want 3", w, got)
		}
	}
}
