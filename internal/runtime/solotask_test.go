package runtime

import (
	"log/slog"
	"testing"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/memory"
)

func TestSoloTask(t *testing.T) {
	db, err := memory.New().Open("solo")
	if err != nil {
		t.Fatal(err)
	}
	sub := Subtopology{Stores: []Store{{Name: "s"}}}
	task, err := NewSoloTask(TaskID{Subtopology: 1}, sub, db, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := task.Store("other"); err == nil {
		t.Fatal("an undeclared store was handed out")
	}
	s, err := task.Store("s")
	if err != nil {
		t.Fatal(err)
	}
	src := state.TopicPartition{Topic: "in"}

	s.Put([]byte("k"), []byte("1"))
	task.AdvanceStreamTime(10)
	if err := task.Commit(&src, 5); err != nil {
		t.Fatal(err)
	}
	// Rolled back: the write and the stream time go, the commit stays.
	s.Put([]byte("k"), []byte("2"))
	task.AdvanceStreamTime(20)
	task.Rollback()
	if task.StreamTime() != 10 || task.Input(src) != 5 {
		t.Fatalf("after rollback: stream time %d, input %d; want 10, 5", task.StreamTime(), task.Input(src))
	}
	if v, ok, err := db.Get("s", []byte("k")); err != nil || !ok || string(v) != "1" {
		t.Fatalf("db holds %q, %v, %v; want the committed 1", v, ok, err)
	}
	offsets, err := db.Offsets()
	if err != nil || offsets.StreamTime != 10 || offsets.Input[src] != 5 {
		t.Fatalf("db offsets %+v, %v; want stream time 10, input 5", offsets, err)
	}
	if err := task.Close(); err != nil {
		t.Fatal(err)
	}
}
