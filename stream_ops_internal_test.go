package eddy

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/runtime"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/state"
)

// allocTask is a TaskContext with nothing behind it: enough for stateless
// operators, which only advance stream time.
type allocTask struct{ streamTime int64 }

func (*allocTask) ID() runtime.TaskID                               { return runtime.TaskID{Partition: 2} }
func (*allocTask) Store(string) (*state.StoreBuffer, error)         { return nil, io.EOF }
func (*allocTask) GlobalStore(string) (runtime.GlobalReader, error) { return nil, io.EOF }
func (t *allocTask) StreamTime() int64                              { return t.streamTime }
func (t *allocTask) AdvanceStreamTime(ts int64)                     { t.streamTime = max(t.streamTime, ts) }
func (*allocTask) WallClock() int64                                 { return 0 }
func (*allocTask) Produce(string, []byte, []byte, int64, []kgo.RecordHeader) error {
	return nil
}
func (*allocTask) ProduceTo(string, int32, []byte, []byte, int64, []kgo.RecordHeader) error {
	return nil
}
func (*allocTask) Logger() *slog.Logger                  { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func (*allocTask) TableCache() *runtime.TableCacheBudget { return nil }

// TestStreamOpsAllocs: the operators of stream_ops.go, the metadata ones
// included, allocate nothing per record once warm (RecordContext is built
// on the stack from the record the task already holds).
func TestStreamOpsAllocs(t *testing.T) {
	topo := NewTopology()
	in := Source(topo, "in", serde.Int64(), serde.Int64())
	var seen int64
	s := MapValuesWithContext(in, func(rc RecordContext, _ int64, v int64) int64 { return v + rc.Offset })
	s = FilterWithContext(s, func(rc RecordContext, _ int64, _ int64) bool { return rc.Topic == "in" })
	s = FilterNot(s, func(_, v int64) bool { return v < 0 })
	s = Peek(s, func(_, v int64) { seen += v })
	s = FlatMapValues(s, func(dst []int64, _ int64, v int64) []int64 { return append(dst, v, v) })
	sp := Split(s, "route")
	odd := sp.Branch("odd", func(_, v int64) bool { return v%2 == 1 })
	Foreach(odd, func(_, v int64) { seen += v })
	ForeachWithContext(sp.Default(), func(rc RecordContext, _ int64, v int64) { seen += rc.Offset })

	cfg := Config{AppID: "allocs"}
	cfg.applyDefaults()
	rt, err := topo.runtimeTopology(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	task, err := rt.Subtopologies[0].NewTask(&allocTask{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &kgo.Record{Topic: "in", Partition: 2, Key: binary.BigEndian.AppendUint64(nil, 7),
		Value: binary.BigEndian.AppendUint64(nil, 3), Timestamp: time.UnixMilli(1000)}
	process := func() {
		rec.Offset++
		if err := task.Process(rec); err != nil {
			t.Fatal(err)
		}
	}
	process() // warm: FlatMapValues grows its buffer once
	if n := testing.AllocsPerRun(100, process); n != 0 {
		t.Errorf("%v allocations per record, want 0", n)
	}
	if seen == 0 {
		t.Error("the operators never ran")
	}
}

// TestRecordContextPartition: the metadata carries the input record's
// partition (eddytest only has partition 0), and with no input record (a
// punctuator's) the task's partition, no topic and offset -1.
func TestRecordContextPartition(t *testing.T) {
	topo := NewTopology()
	var got []RecordContext
	ForeachWithContext(Source(topo, "in", serde.Int64(), serde.Int64()), func(rc RecordContext, _, _ int64) { got = append(got, rc) })
	cfg := Config{AppID: "partition"}
	cfg.applyDefaults()
	rt, err := topo.runtimeTopology(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	task, err := rt.Subtopologies[0].NewTask(&allocTask{})
	if err != nil {
		t.Fatal(err)
	}
	eight := binary.BigEndian.AppendUint64(nil, 8)
	if err := task.Process(&kgo.Record{Topic: "in", Partition: 2, Offset: 41, Key: eight, Value: eight, Timestamp: time.UnixMilli(9)}); err != nil {
		t.Fatal(err)
	}
	b := task.(*taskBuild)
	got = append(got, b.recordContext(10, nil)) // after the record: as a punctuator sees it
	want := []RecordContext{{Topic: "in", Partition: 2, Offset: 41, Timestamp: 9}, {Partition: 2, Offset: -1, Timestamp: 10}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("record contexts %+v, want %+v", got, want)
	}
}
