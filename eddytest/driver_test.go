package eddytest_test

import (
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// punctuating counts records in a store and, from its punctuators,
// forwards "stream@<ts>=<count>" or "wall@<ts>=<count>".
type punctuating struct {
	ctx   *eddy.ProcessorContext[string, string]
	store *eddy.KeyValueStore[string, int64]
	fail  bool
}

var counts = eddy.NewKeyValueStoreSpec("counts", serde.String(), serde.Int64())

func (p *punctuating) Init(ctx *eddy.ProcessorContext[string, string]) error {
	p.ctx = ctx
	var err error
	if p.store, err = counts.Open(ctx); err != nil {
		return err
	}
	report := func(kind string) eddy.Punctuator {
		return func(ts int64) error {
			n, _, err := p.store.Get("n")
			if err != nil {
				return err
			}
			return ctx.Forward(eddy.Record[string, string]{Key: kind + "@" + strconv.FormatInt(ts, 10), Value: strconv.FormatInt(n, 10), Timestamp: ts})
		}
	}
	if _, err := ctx.Schedule(10*time.Second, eddy.StreamTime, report("stream")); err != nil {
		return err
	}
	_, err = ctx.Schedule(time.Minute, eddy.WallClockTime, report("wall"))
	return err
}

func (p *punctuating) Process(r eddy.Record[string, string]) error {
	if r.Value == "fail" {
		return errors.New("asked to fail")
	}
	n, _, err := p.store.Get("n")
	if err != nil {
		return err
	}
	return p.store.Put("n", n+1)
}

func (p *punctuating) Close() error { return nil }

func punctuationDriver(t *testing.T) (*eddytest.Driver, *eddytest.InputTopic[string, string], *eddytest.OutputTopic[string, string]) {
	topo := eddy.NewTopology()
	s := eddy.Source(topo, "in", serde.String(), serde.String())
	out := eddy.Process(s, "punctuating", func() eddy.Processor[string, string, string, string] { return &punctuating{} }, counts)
	eddy.To(out, "out", serde.String(), serde.String())
	d, err := eddytest.New(topo, eddytest.Options{WallClock: time.UnixMilli(0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, eddytest.Input(d, "in", serde.String(), serde.String()), eddytest.Output(d, "out", serde.String(), serde.String())
}

func readAll(t *testing.T, out *eddytest.OutputTopic[string, string]) []string {
	t.Helper()
	kvs, err := out.ReadKeyValues()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range kvs {
		got = append(got, kv.Key+"="+kv.Value)
	}
	return got
}

func TestPunctuation(t *testing.T) {
	d, in, out := punctuationDriver(t)
	for _, ts := range []int64{1000, 5000, 11000, 12000, 40000} {
		if err := in.Pipe("k", "v", ts); err != nil {
			t.Fatal(err)
		}
	}
	// Fires when stream time crosses a multiple of 10s: at 11s (count
	// 3), then at 40s (count 5), once although it crossed three.
	if got, want := readAll(t, out), []string{"stream@11000=3", "stream@40000=5"}; !slices.Equal(got, want) {
		t.Errorf("stream-time punctuation: got %q, want %q", got, want)
	}
	// The first wall-clock check (at 30s) starts the schedule: it fires
	// at the first check at or after 90s, then a minute after that.
	for _, step := range []time.Duration{30 * time.Second, 30 * time.Second, 59 * time.Second, time.Second} {
		if err := d.AdvanceWallClock(step); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := readAll(t, out), []string{"wall@119000=5"}; !slices.Equal(got, want) {
		t.Errorf("wall-clock punctuation: got %q, want %q", got, want)
	}
}

// TestFailedRecordRollsBack: a record whose processing fails leaves no
// trace, as an aborted transaction.
func TestFailedRecordRollsBack(t *testing.T) {
	d, in, _ := punctuationDriver(t)
	if err := in.Pipe("k", "v", 1); err != nil {
		t.Fatal(err)
	}
	if err := in.Pipe("k", "fail", 2); err == nil {
		t.Fatal("a failing record returned no error")
	}
	store, err := eddytest.KeyValueStore(d, counts)
	if err != nil {
		t.Fatal(err)
	}
	if n, _, err := store.Get("n"); err != nil || n != 1 {
		t.Errorf("count after a failed record = %d, %v; want 1", n, err)
	}
}

func TestDeadLetters(t *testing.T) {
	topo := eddy.NewTopology()
	eddy.To(eddy.Source(topo, "in", serde.String(), serde.Int64()), "out", serde.String(), serde.Int64())
	d, err := eddytest.New(topo, eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// Eleven good records, then a bad one: its dead letter names the
	// offset the driver gave it, 11, as a broker would have.
	for i := range 11 {
		if err := d.PipeRaw("in", []byte("k"), binary.BigEndian.AppendUint64(nil, uint64(i)), 5); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.PipeRaw("in", []byte("k"), []byte("not eight bytes"), 5); err != nil {
		t.Fatal(err)
	}
	dlq, err := eddytest.Output(d, eddy.DeadLetterTopic("in"), serde.String(), serde.String()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(dlq) != 1 || dlq[0].Value != "not eight bytes" {
		t.Fatalf("dead letters: %+v", dlq)
	}
	if off := headerValue(dlq[0].Headers, eddy.HeaderDLQOffset); off != "11" {
		t.Errorf("dead letter's %s header %q, want 11 (the 12th record piped)", eddy.HeaderDLQOffset, off)
	}
	if err := d.PipeRaw("nope", nil, nil, 0); err == nil {
		t.Error("piping into a topic the topology does not read gave no error")
	}
}

func headerValue(hs []eddy.Header, key string) string {
	for _, h := range hs {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// failOn fails on the value "fail".
type failOn struct{}

func (failOn) Init(*eddy.ProcessorContext[string, string]) error { return nil }
func (failOn) Close() error                                      { return nil }
func (failOn) Process(r eddy.Record[string, string]) error {
	if r.Value == "fail" {
		return errors.New("asked to fail")
	}
	return nil
}

// TestFailedRecordWritesNothing: the records a failing step wrote before it
// failed never reach the outputs, as an aborted transaction's never reach
// a read_committed consumer; those of the steps around it do.
func TestFailedRecordWritesNothing(t *testing.T) {
	topo := eddy.NewTopology()
	in := eddy.Source(topo, "in", serde.String(), serde.String())
	eddy.To(in, "out", serde.String(), serde.String())
	eddy.To(in, "chain", serde.String(), serde.String())
	eddy.Process(eddy.Source(topo, "chain", serde.String(), serde.String()), "fail-on", func() eddy.Processor[string, string, string, string] { return failOn{} })
	d, err := eddytest.New(topo, eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pipe := eddytest.Input(d, "in", serde.String(), serde.String())
	out := eddytest.Output(d, "out", serde.String(), serde.String())
	if err := pipe.Pipe("a", "1", 1); err != nil {
		t.Fatal(err)
	}
	if err := pipe.Pipe("b", "fail", 2); err == nil {
		t.Fatal("a failing record returned no error")
	}
	if err := pipe.Pipe("c", "3", 3); err != nil {
		t.Fatal(err)
	}
	if got, want := readAll(t, out), []string{"a=1", "c=3"}; !slices.Equal(got, want) {
		t.Errorf("out %q, want %q", got, want)
	}
	if n := eddytest.Output(d, "chain", serde.String(), serde.String()).Len(); n != 2 {
		t.Errorf("chain holds %d records, want 2", n)
	}
}
