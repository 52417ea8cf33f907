package eddy_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// TestEndOfInputClosesEveryWindow: at the end of a bounded input every
// window closes, also a window downstream of a repartition topic fed by
// windows that close at the end themselves; suppressed finals, an outer
// join's unmatched record and a stream-time punctuator follow; a record
// after the end is late.
func TestEndOfInputClosesEveryWindow(t *testing.T) {
	const s = 1000
	topo := eddy.NewTopology()
	in := eddy.Source(topo, "in", serde.String(), serde.String())
	// Per key, 10 s windows (grace 5 s), final results only; then the
	// total per minute over every key, through a repartition topic.
	counts := eddy.WindowCount(eddy.WindowedBy(eddy.GroupByKey(in, serde.String()),
		eddy.TumblingWindows(10*time.Second).WithGrace(5*time.Second)).Emit(eddy.EmitFinal), "counts")
	perWindow := eddy.Map(eddy.ToStream(counts), func(k eddy.Windowed[string], n int64) (string, int64) {
		return k.Key + fmt.Sprintf("@%d", k.Window.Start/s), n
	})
	eddy.To(perWindow, "counts-out", serde.String(), serde.Int64())
	all := eddy.GroupBy(eddy.ToStream(counts), func(eddy.Windowed[string], int64) string { return "all" }, "all", serde.String(), serde.Int64())
	totals := eddy.WindowAggregate(eddy.WindowedBy(all, eddy.TumblingWindows(time.Minute).WithGrace(time.Second)).Emit(eddy.EmitFinal), "totals",
		func() int64 { return 0 }, func(_ string, n, sum int64) int64 { return sum + n }, nil, serde.Int64())
	eddy.To(eddy.Map(eddy.ToStream(totals), func(k eddy.Windowed[string], n int64) (string, int64) {
		return k.Key + fmt.Sprintf("@%d", k.Window.Start/s), n
	}), "totals-out", serde.String(), serde.Int64())
	// The same per minute in the same task (no repartition): the final
	// 10 s counts it adds up reach it at the end, with stream time not yet
	// moved, so they are not late.
	rollup := eddy.WindowAggregate(eddy.WindowedBy(eddy.GroupByKey(eddy.ToStream(counts), eddy.WindowedSerde(serde.String())),
		eddy.TumblingWindows(time.Minute).WithGrace(time.Second)).Emit(eddy.EmitFinal), "rollup",
		func() int64 { return 0 }, func(_ eddy.Windowed[string], n, sum int64) int64 { return sum + n }, nil, serde.Int64())
	eddy.To(eddy.Map(eddy.ToStream(rollup), func(k eddy.Windowed[eddy.Windowed[string]], n int64) (string, int64) {
		return fmt.Sprintf("%s@%d", k.Key.Key, k.Key.Window.Start/s), n
	}), "rollup-out", serde.String(), serde.Int64())
	// Every update of a 10 s count, held until its window closes.
	updates := eddy.WindowCount(eddy.WindowedBy(eddy.GroupByKey(in, serde.String()), eddy.TumblingWindows(10*time.Second).WithGrace(5*time.Second)), "updates")
	finals := eddy.Suppress(updates, "finals", eddy.UntilWindowCloses(eddy.BufferConfig{}), eddy.WindowedSerde(serde.String()), serde.Int64())
	eddy.To(eddy.Map(eddy.ToStream(finals), func(k eddy.Windowed[string], n int64) (string, int64) { return k.Key, n }),
		"finals-out", serde.String(), serde.Int64())
	// A left join whose record finds no partner.
	other := eddy.Source(topo, "other", serde.String(), serde.String())
	joined := eddy.JoinStreams(in, other, eddy.JoinWindowsOf(5*time.Second).WithGrace(2*time.Second), eddy.LeftJoin, "in-other",
		serde.String(), serde.String(), serde.String(),
		func(_ string, l string, _ bool, r string, rok bool) string { return l + "+" + opt(r, rok) })
	eddy.To(joined, "joined-out", serde.String(), serde.String())
	// A stream-time punctuator, every hour: no record crosses an hour.
	ticks := eddy.Process(in, "ticker", func() eddy.Processor[string, string, string, int64] { return &hourTicker{} })
	eddy.To(ticks, "ticks-out", serde.String(), serde.Int64())

	d := newDriver(t, topo)
	pin := eddytest.Input(d, "in", serde.String(), serde.String())
	for _, r := range []struct {
		k  string
		ts int64
	}{{"a", 1 * s}, {"b", 2 * s}, {"a", 12 * s}, {"a", 13 * s}} {
		if err := pin.Pipe(r.k, r.k+fmt.Sprint(r.ts/s), r.ts); err != nil {
			t.Fatal(err)
		}
	}
	read := func(topic string) []string {
		t.Helper()
		kvs, err := eddytest.Output(d, topic, serde.String(), serde.Int64()).ReadKeyValues()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, kv := range kvs {
			got = append(got, fmt.Sprintf("%s=%d", kv.Key, kv.Value))
		}
		slices.Sort(got)
		return got
	}
	for _, topic := range []string{"counts-out", "totals-out", "rollup-out", "finals-out", "ticks-out"} {
		if got := read(topic); len(got) != 0 {
			t.Fatalf("%s before the end: %q, want nothing (no window closed)", topic, got)
		}
	}
	// The left records of 1 s and 2 s closed unmatched at stream time 13 s.
	if got, want := readStrings(t, d, "joined-out"), []string{"a=a1+-", "b=b2+-"}; !slices.Equal(got, want) {
		t.Fatalf("joined before the end: %q, want %q", got, want)
	}
	if err := d.EndOfInput(); err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string][]string{
		"counts-out": {"a@0=1", "a@10=2", "b@0=1"},
		"totals-out": {"all@0=4"},
		"rollup-out": {"a@0=1", "a@10=2", "b@0=1"},
		"finals-out": {"a=1", "a=2", "b=1"},
		"ticks-out":  {fmt.Sprintf("tick=%d", eddy.EndOfInputTime)},
	} {
		if got := read(topic); !slices.Equal(got, want) {
			t.Errorf("%s after the end: %q, want %q", topic, got, want)
		}
	}
	if got, want := readStrings(t, d, "joined-out"), []string{"a=a12+-", "a=a13+-"}; !slices.Equal(got, want) {
		t.Errorf("joined after the end: %q, want %q", got, want)
	}
	late := d.LateRecordsDropped()
	if err := pin.Pipe("c", "c20", 20*s); err != nil {
		t.Fatal(err)
	}
	if got := d.LateRecordsDropped(); got <= late {
		t.Errorf("a record after the end: %d late records, want more than %d", got, late)
	}
}

// hourTicker forwards ("tick", ts) at each hourly stream-time punctuation.
type hourTicker struct {
	ctx *eddy.ProcessorContext[string, int64]
}

func (p *hourTicker) Init(ctx *eddy.ProcessorContext[string, int64]) error {
	p.ctx = ctx
	_, err := ctx.Schedule(time.Hour, eddy.StreamTime, func(ts int64) error {
		return ctx.Forward(eddy.Record[string, int64]{Key: "tick", Value: ts, Timestamp: ts})
	})
	return err
}

func (p *hourTicker) Process(eddy.Record[string, string]) error { return nil }
func (p *hourTicker) Close() error                              { return nil }

// TestEndOfInputChainedTopic: a sub-topology that reads a topic another
// sub-topology writes with To (a chain, not a repartition) ends after its
// writer, so the writer's final windows reach its windows in time. The
// reader is declared first, so index order alone would end it first.
func TestEndOfInputChainedTopic(t *testing.T) {
	topo := eddy.NewTopology()
	mid := eddy.Source(topo, "mid", serde.String(), serde.Int64())
	totals := eddy.WindowAggregate(eddy.WindowedBy(eddy.GroupByKey(mid, serde.String()),
		eddy.TumblingWindows(time.Minute)).Emit(eddy.EmitFinal), "totals",
		func() int64 { return 0 }, func(_ string, n, sum int64) int64 { return sum + n }, nil, serde.Int64())
	eddy.To(eddy.Map(eddy.ToStream(totals), func(k eddy.Windowed[string], n int64) (string, int64) {
		return fmt.Sprintf("%s@%d", k.Key, k.Window.Start), n
	}), "totals-out", serde.String(), serde.Int64())

	in := eddy.Source(topo, "in", serde.String(), serde.String())
	counts := eddy.WindowCount(eddy.WindowedBy(eddy.GroupByKey(in, serde.String()),
		eddy.TumblingWindows(10*time.Second)).Emit(eddy.EmitFinal), "counts")
	eddy.To(eddy.Map(eddy.ToStream(counts), func(k eddy.Windowed[string], n int64) (string, int64) { return k.Key, n }),
		"mid", serde.String(), serde.Int64())

	d := newDriver(t, topo)
	pin := eddytest.Input(d, "in", serde.String(), serde.String())
	for _, ts := range []int64{1000, 2000, 3000} {
		if err := pin.Pipe("a", "x", ts); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.EndOfInput(); err != nil {
		t.Fatal(err)
	}
	kvs, err := eddytest.Output(d, "totals-out", serde.String(), serde.Int64()).ReadKeyValues()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range kvs {
		got = append(got, fmt.Sprintf("%s=%d", kv.Key, kv.Value))
	}
	if want := []string{"a@0=3"}; !slices.Equal(got, want) {
		t.Errorf("totals after the end: %q, want %q (late dropped: %d)", got, want, d.LateRecordsDropped())
	}
}
