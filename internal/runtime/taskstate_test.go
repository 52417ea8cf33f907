package runtime

import (
	"log/slog"
	"testing"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/memory"
)

func TestTaskState(t *testing.T) {
	db, err := memory.New().Open("solo")
	if err != nil {
		t.Fatal(err)
	}
	src := state.TopicPartition{Topic: "in"}
	task, err := NewTaskState(TaskID{Subtopology: 1}, []Store{{Name: "s"}}, []state.TopicPartition{src}, db, nil, slog.New(slog.DiscardHandler))
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

	s.Put([]byte("k"), []byte("1"))
	task.AdvanceStreamTime(10)
	if !task.Consume(0, 5) {
		t.Fatal("Consume(0, 5) on a new task reported the record as already in the state")
	}
	if err := task.Commit(); err != nil {
		t.Fatal(err)
	}
	// Rolled back: the write, the stream time and the consumed offset go,
	// the commit stays.
	s.Put([]byte("k"), []byte("2"))
	task.AdvanceStreamTime(20)
	task.Consume(0, 9)
	task.Rollback()
	if task.StreamTime() != 10 || task.Input(src) != 5 {
		t.Fatalf("after rollback: stream time %d, input %d; want 10, 5", task.StreamTime(), task.Input(src))
	}
	if task.Consume(0, 5) {
		t.Fatal("after rollback, the committed record 4 was consumed again")
	}
	if !task.Consume(0, 6) {
		t.Fatal("after rollback, record 5 (rolled back) was not consumable again")
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
