package eddy_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/state"
)

// picky forwards a value unchanged, except: "bad" returns an error, "boom"
// panics, "big" forwards 2,000 bytes, "disk" returns a state read error.
type picky struct {
	ctx *eddy.ProcessorContext[string, string]
}

func (p *picky) Init(ctx *eddy.ProcessorContext[string, string]) error { p.ctx = ctx; return nil }
func (p *picky) Close() error                                          { return nil }
func (p *picky) Process(r eddy.Record[string, string]) error {
	switch r.Value {
	case "bad":
		return errors.New("bad value")
	case "boom":
		panic("boom")
	case "big":
		r.Value = strings.Repeat("x", 2000)
	case "disk":
		return fmt.Errorf("reading: %w", state.ErrRead)
	case "fatal":
		panic(state.Fatal{Msg: "wal write failed"})
	}
	return p.ctx.Forward(r)
}

func pickyDriver(t *testing.T, cfg eddy.Config) (*eddytest.Driver, *eddytest.InputTopic[string, string]) {
	t.Helper()
	topo := eddy.NewTopology()
	in := eddy.Source(topo, "in", serde.String(), serde.String())
	out := eddy.Process(in, "picky", func() eddy.Processor[string, string, string, string] { return &picky{} })
	eddy.To(out, "out", serde.String(), serde.String())
	cfg.MaxRecordBytes = 1000
	d, err := eddytest.New(topo, eddytest.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, eddytest.Input(d, "in", serde.String(), serde.String())
}

func values(t *testing.T, d *eddytest.Driver, topic string) []string {
	t.Helper()
	recs, err := eddytest.Output(d, topic, serde.String(), serde.String()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var vs []string
	for _, r := range recs {
		vs = append(vs, r.Value)
	}
	return vs
}

func dlqHeader(r eddy.Record[string, string], key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func TestProcessErrorFailIsTheDefault(t *testing.T) {
	d, in := pickyDriver(t, eddy.Config{})
	if err := in.Pipe("k", "ok", 1); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"bad", "boom"} {
		err := in.Pipe("k", v, 2)
		if err == nil || !strings.Contains(err.Error(), "eddy: process in/") || !strings.Contains(err.Error(), "OnProcessError") {
			t.Fatalf("%s: error %v, want the record and the policy named", v, err)
		}
	}
	err := in.Pipe("k", "big", 3)
	if !errors.Is(err, eddy.ErrRecordTooLarge) || !strings.Contains(err.Error(), "OnProduceError") || !strings.Contains(err.Error(), "more than MaxRecordBytes (1000)") {
		t.Fatalf("big: error %v, want ErrRecordTooLarge naming the size limit and OnProduceError", err)
	}
	if got := values(t, d, "out"); len(got) != 1 || got[0] != "ok" {
		t.Fatalf("out %v, want [ok]", got)
	}
}

func TestProcessErrorLogAndContinue(t *testing.T) {
	d, in := pickyDriver(t, eddy.Config{OnProcessError: eddy.LogAndContinue, OnProduceError: eddy.LogAndContinue})
	for _, v := range []string{"a", "bad", "boom", "big", "b"} {
		if err := in.Pipe("k", v, 1); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
	}
	if got := values(t, d, "out"); strings.Join(got, ",") != "a,b" {
		t.Fatalf("out %v, want [a b]", got)
	}
	if got := values(t, d, "in.dlq"); len(got) != 0 {
		t.Fatalf("dead letters %v, want none", got)
	}
}

func TestProcessErrorDeadLetter(t *testing.T) {
	d, in := pickyDriver(t, eddy.Config{OnProcessError: eddy.DeadLetter, OnProduceError: eddy.DeadLetter})
	for _, v := range []string{"a", "bad", "boom", "big", "b"} {
		if err := in.Pipe("key-"+v, v, 7); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
	}
	if got := values(t, d, "out"); strings.Join(got, ",") != "a,b" {
		t.Fatalf("out %v, want [a b]", got)
	}
	dlq, err := eddytest.Output(d, "in.dlq", serde.String(), serde.String()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ value, stage, err string }{
		{"bad", "process", "bad value"},
		{"boom", "process", "panic: boom"},
		{"big", "produce", "more than MaxRecordBytes"},
	}
	if len(dlq) != len(want) {
		t.Fatalf("%d dead letters, want %d", len(dlq), len(want))
	}
	for i, w := range want {
		r := dlq[i]
		if r.Key != "key-"+w.value || r.Value != w.value || r.Timestamp != 7 {
			t.Errorf("dead letter %d: %q=%q at %d, want the original record key-%s=%s at 7", i, r.Key, r.Value, r.Timestamp, w.value, w.value)
		}
		if dlqHeader(r, eddy.HeaderDLQStage) != w.stage || !strings.Contains(dlqHeader(r, eddy.HeaderDLQError), w.err) ||
			dlqHeader(r, eddy.HeaderDLQTopic) != "in" || dlqHeader(r, eddy.HeaderDLQPartition) != "0" || dlqHeader(r, eddy.HeaderDLQOffset) == "" {
			t.Errorf("dead letter %d headers: %v", i, r.Headers)
		}
	}
}

// A failure of the state store is not the record's: no policy skips or
// dead-letters it; the transaction aborts.
func TestStateErrorsAreNotDeadLettered(t *testing.T) {
	d, in := pickyDriver(t, eddy.Config{OnProcessError: eddy.DeadLetter})
	err := in.Pipe("k", "disk", 1)
	if !errors.Is(err, state.ErrRead) {
		t.Fatalf("error %v, want the state error itself", err)
	}
	if got := values(t, d, "in.dlq"); len(got) != 0 {
		t.Fatalf("dead letters %v, want none", got)
	}
}

// A backend's fatal panic is not a record's: it is never recovered.
func TestStateFatalIsNotRecovered(t *testing.T) {
	_, in := pickyDriver(t, eddy.Config{OnProcessError: eddy.DeadLetter})
	defer func() {
		if p := recover(); p == nil {
			t.Fatal("no panic: a state.Fatal was recovered as a record's failure")
		} else if _, ok := p.(state.Fatal); !ok {
			t.Fatalf("panic %v, want the state.Fatal itself", p)
		}
	}()
	_ = in.Pipe("k", "fatal", 1)
}

func TestDecodeErrorLogAndContinue(t *testing.T) {
	topo := eddy.NewTopology()
	eddy.To(eddy.Source(topo, "in", serde.String(), serde.Int64()), "out", serde.String(), serde.Int64())
	d, err := eddytest.New(topo, eddytest.Options{Config: eddy.Config{OnDecodeError: eddy.LogAndContinue}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.PipeRaw("in", []byte("k"), []byte{1, 2, 3}, 1); err != nil {
		t.Fatal(err)
	}
	if err := eddytest.Input(d, "in", serde.String(), serde.Int64()).Pipe("k", 42, 2); err != nil {
		t.Fatal(err)
	}
	out, err := eddytest.Output(d, "out", serde.String(), serde.Int64()).ReadAll()
	if err != nil || len(out) != 1 || out[0].Value != 42 {
		t.Fatalf("out %v %v, want the valid record only", out, err)
	}
	if n := eddytest.Output(d, "in.dlq", serde.Bytes(), serde.Bytes()).Len(); n != 0 {
		t.Fatalf("%d dead letters, want none", n)
	}
}

func TestBadPolicies(t *testing.T) {
	_, err := eddy.New(eddy.NewTopology(), eddy.Config{OnProcessError: 9, OnProduceError: -1, OnDecodeError: 7, MaxRecordBytes: -5})
	for _, want := range []string{"OnProcessError 9", "OnProduceError -1", "OnDecodeError 7", "MaxRecordBytes -5"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

// TestTooLargeWithRun: against a broker, an output larger than
// MaxRecordBytes is refused at once (not failed by the producer, which
// would abort every retry): with OnProduceError DeadLetter the input goes to
// the dead-letter topic once and processing goes on.
func TestTooLargeWithRun(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	in, out := "sizes", "padded"
	createTopics(t, addr, 1, in, out)
	topo := eddy.NewTopology()
	s := eddy.Source(topo, in, serde.Int64(), serde.Int64())
	eddy.To(eddy.MapValues(s, func(_, v int64) string { return strings.Repeat("x", int(v)) }), out, serde.Int64(), serde.String())
	cfg := config(t, addr)
	cfg.MaxRecordBytes = 5000
	cfg.OnProduceError = eddy.DeadLetter
	app := run(t, topo, cfg)
	produce(t, addr, in, rec(i64(1), i64(10)), rec(i64(2), i64(6000)), rec(i64(3), i64(20)))

	got := waitRecords(t, addr, out, 2, app)
	if len(got) != 2 || len(got[0].Value) != 10 || len(got[1].Value) != 20 {
		t.Fatalf("outputs %d, want the two small ones", len(got))
	}
	dlq := waitRecords(t, addr, eddy.DeadLetterTopic(in), 1, app)
	if len(dlq) != 1 || string(dlq[0].Key) != string(i64(2)) {
		t.Fatalf("dead letters %v, want the record of key 2", dlq)
	}
	for _, h := range dlq[0].Headers {
		if h.Key == eddy.HeaderDLQStage && string(h.Value) != "produce" {
			t.Fatalf("stage %q, want produce", h.Value)
		}
	}
}

// TestMissingOutputTopic: an output topic that does not exist stops Run at
// once with an error naming it, rather than failing every transaction.
func TestMissingOutputTopic(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	createTopics(t, addr, 1, "present")
	topo := eddy.NewTopology()
	eddy.To(eddy.Source(topo, "present", serde.Int64(), serde.Int64()), "absent", serde.Int64(), serde.Int64())
	err := eddy.Run(t.Context(), topo, config(t, addr))
	if err == nil || !strings.Contains(err.Error(), "output topics") || !strings.Contains(err.Error(), "absent") {
		t.Fatalf("Run: %v, want an error naming the missing output topic", err)
	}
}

// A record too large to dead-letter whole (its key and value with the
// dead-letter headers exceed MaxRecordBytes) is dead-lettered truncated and
// marked, not left to stop the app on every restart: a value that does not
// decode, and one whose output is too large with OnProduceError DeadLetter.
func TestDeadLetterTooLargeIsTruncated(t *testing.T) {
	d, in := pickyDriver(t, eddy.Config{OnProduceError: eddy.DeadLetter})
	huge := strings.Repeat("z", 3000) // more than MaxRecordBytes (1000)
	if err := d.PipeRaw("in", []byte("k1"), []byte(huge), 5); err != nil {
		t.Fatalf("too large to process: %v", err)
	}
	if err := in.Pipe("k2", "ok", 6); err != nil {
		t.Fatal(err)
	}
	if got := values(t, d, "out"); len(got) != 1 || got[0] != "ok" {
		t.Fatalf("out %v, want [ok]", got)
	}
	dlq, err := eddytest.Output(d, "in.dlq", serde.String(), serde.String()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(dlq) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dlq))
	}
	r := dlq[0]
	size := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		size += len(h.Key) + len(h.Value)
	}
	if size > 1000 || r.Key != "k1" || !strings.HasPrefix(huge, r.Value) || len(r.Value) == 0 || r.Timestamp != 5 {
		t.Fatalf("dead letter %q=%d bytes at %d, %d bytes in all; want k1 and a prefix of the value within 1000", r.Key, len(r.Value), r.Timestamp, size)
	}
	if dlqHeader(r, eddy.HeaderDLQTruncated) != "value" || dlqHeader(r, eddy.HeaderDLQValueSize) != "3000" ||
		dlqHeader(r, eddy.HeaderDLQStage) != "produce" || !strings.Contains(dlqHeader(r, eddy.HeaderDLQError), "MaxRecordBytes") {
		t.Fatalf("dead letter headers %v, want it marked truncated with the original size", r.Headers)
	}
}

// A MaxRecordBytes too small for the dead-letter headers themselves makes
// the dead letter fail with an error that says so, and no other policy
// (here: log and continue) takes that failure for the record's own.
func TestDeadLetterLimitTooSmall(t *testing.T) {
	topo := eddy.NewTopology()
	eddy.To(eddy.Source(topo, "in", serde.String(), serde.Int64()), "out", serde.String(), serde.Int64())
	d, err := eddytest.New(topo, eddytest.Options{Config: eddy.Config{MaxRecordBytes: 200, OnProcessError: eddy.LogAndContinue, OnProduceError: eddy.LogAndContinue}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	err = d.PipeRaw("in", []byte("k"), make([]byte, 300), 1) // no int64, and too large to dead-letter whole
	if err == nil || !strings.Contains(err.Error(), "eddy: dead-letter in/0@") || !strings.Contains(err.Error(), "MaxRecordBytes (200) leaves no room") {
		t.Fatalf("error %v, want the dead letter's failure naming MaxRecordBytes", err)
	}
}

// A state write whose changelog record would exceed MaxRecordBytes fails
// with the record that made it, under OnProduceError: dead-lettered here,
// and the app goes on. Accepted, it would have failed the commit, and
// again after every restart.
func TestStateWriteTooLargeFollowsOnProduceError(t *testing.T) {
	build := func(cfg eddy.Config) (*eddytest.Driver, *eddytest.InputTopic[string, string]) {
		topo := eddy.NewTopology()
		in := eddy.Source(topo, "in", serde.String(), serde.String())
		agg := eddy.Aggregate(eddy.GroupByKey(in, serde.String()), "joined",
			func() string { return "" }, func(_ string, v, agg string) string { return agg + v }, serde.String())
		eddy.To(eddy.ToStream(agg), "out", serde.String(), serde.String())
		cfg.MaxRecordBytes = 1000
		d, err := eddytest.New(topo, eddytest.Options{Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d, eddytest.Input(d, "in", serde.String(), serde.String())
	}
	a, b := strings.Repeat("a", 600), strings.Repeat("b", 600)

	d, in := build(eddy.Config{OnProduceError: eddy.DeadLetter})
	for i, kv := range [][2]string{{"k1", a}, {"k1", b}, {"k2", "ok"}} {
		if err := in.Pipe(kv[0], kv[1], int64(i)); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if got := values(t, d, "out"); len(got) != 2 || got[0] != a || got[1] != "ok" {
		t.Fatalf("out has %d records, want k1's first aggregate and k2's", len(got))
	}
	dlq, err := eddytest.Output(d, "in.dlq", serde.String(), serde.String()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(dlq) != 1 || dlq[0].Value != b || dlqHeader(dlq[0], eddy.HeaderDLQStage) != "produce" ||
		!strings.Contains(dlqHeader(dlq[0], eddy.HeaderDLQError), "MaxRecordBytes") {
		t.Fatalf("dead letters %v; want k1's second record, stage produce, naming MaxRecordBytes", dlq)
	}

	_, in = build(eddy.Config{})
	if err := in.Pipe("k1", a, 0); err != nil {
		t.Fatal(err)
	}
	err = in.Pipe("k1", b, 1)
	if !errors.Is(err, eddy.ErrRecordTooLarge) || !strings.Contains(err.Error(), "store joined") {
		t.Fatalf("Pipe = %v; want ErrRecordTooLarge naming the store", err)
	}
}
