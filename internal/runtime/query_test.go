package runtime

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/pebble"
)

// TestQueryViewClose: a task's close waits for the query reading its
// database, and a query after it gets ErrNotLocal (the router's "moved,
// retry"), never a closed database.
func TestQueryViewClose(t *testing.T) {
	b := pebble.New(pebble.Options{})
	defer b.Close()
	db, err := b.Open(filepath.Join(t.TempDir(), "0_1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Apply(&state.Batch{Writes: []state.Write{{Store: "s", Key: []byte("k"), Value: []byte("v")}}, Offsets: state.NewOffsets()}); err != nil {
		t.Fatal(err)
	}
	q := newQueries()
	tk := &task{TaskState: TaskState{id: TaskID{0, 1}, db: db, committed: state.NewOffsets()}}
	q.add(tk)
	reading, release := make(chan struct{}), make(chan struct{})
	readDone := make(chan error, 1)
	go func() {
		readDone <- q.read(tk.id, func(r state.SharedReader, _ int64) error {
			close(reading)
			<-release
			v, ok, err := r.SharedGet("s", []byte("k"))
			if err != nil || !ok || string(v) != "v" {
				return errors.Join(err, errors.New("the value is gone while the query held the task"))
			}
			return nil
		})
	}()
	<-reading
	removed := make(chan struct{})
	go func() {
		q.remove(tk)
		db.Close() // as task.close does, after remove
		close(removed)
	}()
	// remove must wait for the reader; give it a chance to be wrong.
	select {
	case <-removed:
		t.Fatal("the task closed while a query read it")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-readDone; err != nil {
		t.Fatal(err)
	}
	<-removed
	err = q.read(tk.id, func(state.SharedReader, int64) error { return nil })
	if !errors.Is(err, ErrNotLocal) {
		t.Fatalf("a query after close: %v, want ErrNotLocal", err)
	}
}
