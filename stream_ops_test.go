package eddy_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// opsDriver runs topo with eddytest, closed when the test ends.
func opsDriver(t *testing.T, topo *eddy.Topology) *eddytest.Driver {
	t.Helper()
	d, err := eddytest.New(topo, eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// opsPipe pipes "key=value" pairs to topic, at timestamps 1000, 1001, …
func opsPipe(t *testing.T, d *eddytest.Driver, topic string, kvs ...string) {
	t.Helper()
	in := eddytest.Input(d, topic, serde.String(), serde.String())
	for i, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		if err := in.Pipe(k, v, 1000+int64(i)); err != nil {
			t.Fatal(err)
		}
	}
}

// opsRead reads what topic holds as "key=value".
func opsRead(t *testing.T, d *eddytest.Driver, topic string) []string {
	t.Helper()
	kvs, err := eddytest.Output(d, topic, serde.String(), serde.String()).ReadKeyValues()
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, kv := range kvs {
		out = append(out, kv.Key+"="+kv.Value)
	}
	return out
}

func opsWant(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: got %q, want %q", what, got, want)
	}
}

// TestSplitBranches: each record goes to the first branch whose predicate holds,
// even when a later one holds too, and the rest to the default branch.
func TestSplitBranches(t *testing.T) {
	topo := eddy.NewTopology()
	in := eddy.Source(topo, "in", serde.String(), serde.String())
	sp := eddy.Split(in, "route")
	a := sp.Branch("a", func(_, v string) bool { return strings.HasPrefix(v, "a") })
	b := sp.Branch("b", func(_, v string) bool { return strings.Contains(v, "b") })
	eddy.To(a, "out-a", serde.String(), serde.String())
	eddy.To(b, "out-b", serde.String(), serde.String())
	eddy.To(sp.Default(), "out-rest", serde.String(), serde.String())
	d := opsDriver(t, topo)

	opsPipe(t, d, "in", "1=abc", "2=bob", "3=cat", "4=ab", "5=", "6=b")
	opsWant(t, "branch a", opsRead(t, d, "out-a"), "1=abc", "4=ab")
	opsWant(t, "branch b", opsRead(t, d, "out-b"), "2=bob", "6=b")
	opsWant(t, "default", opsRead(t, d, "out-rest"), "3=cat", "5=")
}

// TestSplitWithoutDefault drops what no branch takes; Default called after
// a Branch keeps the branches first, and twice returns one stream.
func TestSplitWithoutDefault(t *testing.T) {
	topo := eddy.NewTopology()
	in := eddy.Source(topo, "in", serde.String(), serde.String())
	sp := eddy.Split(in, "only")
	eddy.To(sp.Branch("x", func(k, _ string) bool { return k == "x" }), "out-x", serde.String(), serde.String())
	d := opsDriver(t, topo)
	opsPipe(t, d, "in", "x=1", "y=2", "x=3")
	opsWant(t, "branch x", opsRead(t, d, "out-x"), "x=1", "x=3")

	topo = eddy.NewTopology()
	in = eddy.Source(topo, "in", serde.String(), serde.String())
	sp = eddy.Split(in, "late")
	def := sp.Default()
	eddy.To(sp.Branch("x", func(k, _ string) bool { return k == "x" }), "out-x", serde.String(), serde.String())
	eddy.To(eddy.Merge(def, sp.Default()), "out-rest", serde.String(), serde.String())
	d = opsDriver(t, topo)
	opsPipe(t, d, "in", "x=1", "y=2")
	opsWant(t, "branch x", opsRead(t, d, "out-x"), "x=1")
	// Merge of the same default stream twice: each record once per input.
	opsWant(t, "default", opsRead(t, d, "out-rest"), "y=2", "y=2")
}

// TestSplitBranchTwice: a branch name used twice in a Split is an error.
func TestSplitBranchTwice(t *testing.T) {
	topo := eddy.NewTopology()
	sp := eddy.Split(eddy.Source(topo, "in", serde.String(), serde.String()), "route")
	sp.Branch("a", func(_, v string) bool { return true })
	sp.Branch("a", func(_, v string) bool { return false })
	if err := topo.Err(); err == nil || !strings.Contains(err.Error(), `branch "a" is declared twice`) {
		t.Fatalf("Err() = %v, want the duplicate branch named", err)
	}
}

// TestSplitDescribe: the split and its branches are processor nodes of the
// one sub-topology, the branches children of the split.
func TestSplitDescribe(t *testing.T) {
	topo := eddy.NewTopology()
	sp := eddy.Split(eddy.Source(topo, "in", serde.String(), serde.String()), "route")
	eddy.To(sp.Branch("a", func(_, v string) bool { return true }), "out-a", serde.String(), serde.String())
	eddy.To(sp.Default(), "out-rest", serde.String(), serde.String())
	desc := topo.Describe("app")
	if len(desc.Subtopologies) != 1 {
		t.Fatalf("%d sub-topologies, want 1", len(desc.Subtopologies))
	}
	var got []string
	for _, n := range desc.Subtopologies[0].Nodes {
		got = append(got, fmt.Sprintf("%s %s <- %v", n.Kind, n.Name, n.Parents))
	}
	opsWant(t, "nodes", got,
		"source source-in-0 <- []",
		"processor split-route-1 <- [source-in-0]",
		"processor branch-route-a-2 <- [split-route-1]",
		"sink sink-out-a-3 <- [branch-route-a-2]",
		"processor branch-route-default-4 <- [split-route-1]",
		"sink sink-out-rest-5 <- [branch-route-default-4]")
}

// TestPeek: Peek sees every record, in order, and passes each on unchanged
// (key, value, timestamp, headers).
func TestPeek(t *testing.T) {
	topo := eddy.NewTopology()
	var seen []string
	in := eddy.Source(topo, "in", serde.String(), serde.String())
	eddy.To(eddy.Peek(in, func(k, v string) { seen = append(seen, k+"="+v) }), "out", serde.String(), serde.String())
	d := opsDriver(t, topo)
	if err := d.PipeRaw("in", []byte("k"), []byte("v"), 4242, eddy.Header{Key: "h", Value: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	opsPipe(t, d, "in", "a=1", "b=2", "a=3")
	opsWant(t, "peeked", seen, "k=v", "a=1", "b=2", "a=3")
	recs, err := eddytest.Output(d, "out", serde.String(), serde.String()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%s=%s@%d%v", r.Key, r.Value, r.Timestamp, r.Headers))
	}
	opsWant(t, "output", got, "k=v@4242[{h [49]}]", "a=1@1000[]", "b=2@1001[]", "a=3@1002[]")
}

// TestForeach: a terminal that runs its function once per record; the
// topology writes nothing.
func TestForeach(t *testing.T) {
	topo := eddy.NewTopology()
	var seen []string
	in := eddy.Source(topo, "in", serde.String(), serde.String())
	eddy.Foreach(eddy.FilterNot(in, func(k, _ string) bool { return k == "skip" }), func(k, v string) { seen = append(seen, k+"="+v) })
	if d := topo.Describe("app"); len(d.Subtopologies[0].Sinks) != 0 {
		t.Errorf("sinks %v, want none", d.Subtopologies[0].Sinks)
	}
	d := opsDriver(t, topo)
	opsPipe(t, d, "in", "a=1", "skip=2", "b=3")
	opsWant(t, "foreach", seen, "a=1", "b=3")
}

// TestFilterNot drops the records the predicate holds for, keeps the rest.
func TestFilterNot(t *testing.T) {
	topo := eddy.NewTopology()
	in := eddy.Source(topo, "in", serde.String(), serde.String())
	eddy.To(eddy.FilterNot(in, func(_, v string) bool { return v == "" }), "out", serde.String(), serde.String())
	d := opsDriver(t, topo)
	opsPipe(t, d, "in", "a=1", "b=", "c=3", "d=")
	opsWant(t, "output", opsRead(t, d, "out"), "a=1", "c=3")
}

// TestFlatMapValues: every output keeps the input's key (and timestamp);
// GroupByKey right after needs no repartition topic, and counts per key.
func TestFlatMapValues(t *testing.T) {
	topo := eddy.NewTopology()
	lines := eddy.Source(topo, "lines", serde.String(), serde.String()) // doc -> line
	words := eddy.FlatMapValues(lines, func(dst []string, _ string, line string) []string {
		return append(dst, strings.Fields(line)...)
	})
	eddy.To(words, "words", serde.String(), serde.String())
	counts := eddy.Count(eddy.GroupByKey(words, serde.String()), "words-per-doc")
	eddy.To(eddy.ToStream(counts), "counts", serde.String(), serde.Int64())
	if err := topo.Err(); err != nil {
		t.Fatal(err)
	}
	desc := topo.Describe("app")
	if len(desc.RepartitionTopics) != 0 || len(desc.Subtopologies) != 1 {
		t.Fatalf("repartition topics %v in %d sub-topologies, want none in 1", desc.RepartitionTopics, len(desc.Subtopologies))
	}
	d := opsDriver(t, topo)
	opsPipe(t, d, "lines", "d1=to be or", "d2=", "d1=not")
	recs, err := eddytest.Output(d, "words", serde.String(), serde.String()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%s=%s@%d", r.Key, r.Value, r.Timestamp))
	}
	opsWant(t, "words", got, "d1=to@1000", "d1=be@1000", "d1=or@1000", "d1=not@1002")
	kvs, err := eddytest.Output(d, "counts", serde.String(), serde.Int64()).ReadKeyValues()
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, kv := range kvs {
		got = append(got, fmt.Sprintf("%s=%d", kv.Key, kv.Value))
	}
	opsWant(t, "counts", got, "d1=1", "d1=2", "d1=3", "d1=4")
}

// opsContext renders a record's metadata for comparison.
func opsContext(rc eddy.RecordContext) string {
	h, _ := rc.Header("trace")
	return fmt.Sprintf("%s/%d@%d ts=%d trace=%s headers=%d", rc.Topic, rc.Partition, rc.Offset, rc.Timestamp, h, len(rc.Headers))
}

// TestRecordContext: MapValuesWithContext, FilterWithContext and
// ForeachWithContext see each input record's topic, partition, offset,
// timestamp and headers; after a repartition, those of the repartition
// topic.
func TestRecordContext(t *testing.T) {
	topo := eddy.NewTopology()
	in := eddy.Source(topo, "in", serde.String(), serde.String())
	other := eddy.Source(topo, "other", serde.String(), serde.String())
	merged := eddy.Merge(in, other)
	// Drop the second record of "in" by its offset.
	kept := eddy.FilterWithContext(merged, func(rc eddy.RecordContext, _, _ string) bool { return rc.Topic != "in" || rc.Offset != 1 })
	tagged := eddy.MapValuesWithContext(kept, func(rc eddy.RecordContext, _, v string) string { return v + " " + opsContext(rc) })
	eddy.To(tagged, "out", serde.String(), serde.String())
	// After a re-key: the repartition topic's metadata.
	rekeyed := eddy.Repartition(eddy.SelectKey(in, func(_, v string) string { return v }), "by-value", serde.String(), serde.String())
	var after []string
	eddy.ForeachWithContext(rekeyed, func(rc eddy.RecordContext, k, _ string) { after = append(after, k+" "+opsContext(rc)) })
	d := opsDriver(t, topo)

	trace := eddy.Header{Key: "trace", Value: []byte("t1")}
	pipe := func(topic, k, v string, ts int64, hs ...eddy.Header) {
		t.Helper()
		if err := d.PipeRaw(topic, []byte(k), []byte(v), ts, hs...); err != nil {
			t.Fatal(err)
		}
	}
	pipe("in", "a", "x", 5000, trace, eddy.Header{Key: "trace", Value: []byte("t2")})
	pipe("in", "b", "y", 6000)
	pipe("other", "c", "z", 7000, trace)
	pipe("in", "d", "w", 4000)
	opsWant(t, "out", opsRead(t, d, "out"),
		"a=x in/0@0 ts=5000 trace=t2 headers=2",
		"c=z other/0@0 ts=7000 trace=t1 headers=1",
		"d=w in/0@2 ts=4000 trace= headers=0")
	opsWant(t, "after the repartition", after,
		"x eddytest-by-value-repartition/0@0 ts=5000 trace=t2 headers=2",
		"y eddytest-by-value-repartition/0@1 ts=6000 trace= headers=0",
		"w eddytest-by-value-repartition/0@2 ts=4000 trace= headers=0")
}

// stamper forwards each record with the processor context's view of it as
// its value, and, from a wall-clock punctuator, a record of its own.
type stamper struct {
	ctx *eddy.ProcessorContext[string, string]
}

func (s *stamper) Init(ctx *eddy.ProcessorContext[string, string]) error {
	s.ctx = ctx
	_, err := ctx.Schedule(time.Second, eddy.WallClockTime, func(ts int64) error {
		return ctx.Forward(eddy.Record[string, string]{Key: "tick", Value: s.view(), Timestamp: ts,
			Headers: []eddy.Header{{Key: "trace", Value: []byte("tick")}}})
	})
	return err
}

func (s *stamper) view() string {
	return fmt.Sprintf("%q/%d@%d wall=%d", s.ctx.Topic(), s.ctx.Partition(), s.ctx.Offset(), s.ctx.WallClock())
}

func (s *stamper) Process(r eddy.Record[string, string]) error {
	r.Value = s.view()
	return s.ctx.Forward(r)
}

func (s *stamper) Close() error { return nil }

// TestProcessorContextRecord: a processor sees the input record's topic
// and offset, and the wall clock; its punctuator sees no input record, and
// so does a WithContext operator downstream of what the punctuator forwards.
func TestProcessorContextRecord(t *testing.T) {
	topo := eddy.NewTopology()
	stamped := eddy.Process(eddy.Source(topo, "in", serde.String(), serde.String()), "stamp",
		func() eddy.Processor[string, string, string, string] { return &stamper{} })
	tagged := eddy.MapValuesWithContext(stamped, func(rc eddy.RecordContext, _, v string) string { return v + " | " + opsContext(rc) })
	eddy.To(tagged, "out", serde.String(), serde.String())
	start := time.UnixMilli(1_800_000_000_000)
	d, err := eddytest.New(topo, eddytest.Options{WallClock: start})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	opsPipe(t, d, "in", "a=1", "b=2")
	// The first check starts the punctuator's clock; the next one, a
	// second later, fires it.
	for range 2 {
		if err := d.AdvanceWallClock(time.Second); err != nil {
			t.Fatal(err)
		}
	}
	opsWant(t, "out", opsRead(t, d, "out"),
		`a="in"/0@0 wall=1800000000000 | in/0@0 ts=1000 trace= headers=0`,
		`b="in"/0@1 wall=1800000000000 | in/0@1 ts=1001 trace= headers=0`,
		`tick=""/0@-1 wall=1800000002000 | /0@-1 ts=1800000002000 trace=tick headers=1`)
}

// TestForeachNotWarnedSinkless: a topology that ends in Foreach has a
// purpose, its function's effects: New does not warn that its results go
// nowhere, as it does for one that ends in a Filter.
func TestForeachNotWarnedSinkless(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(eddy.Stream[string, string])
		warn bool
	}{
		{"filter", func(s eddy.Stream[string, string]) { eddy.Filter(s, func(string, string) bool { return true }) }, true},
		{"foreach", func(s eddy.Stream[string, string]) { eddy.Foreach(s, func(string, string) {}) }, false},
		{"foreach with context", func(s eddy.Stream[string, string]) {
			eddy.ForeachWithContext(s, func(eddy.RecordContext, string, string) {})
		}, false},
	} {
		topo := eddy.NewTopology()
		tc.end(eddy.Source(topo, "in", serde.String(), serde.String()))
		var log bytes.Buffer
		_, err := eddy.New(topo, eddy.Config{AppID: "app", Brokers: []string{"127.0.0.1:1"}, StateDir: t.TempDir(),
			Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if err != nil {
			t.Fatalf("%s: New: %v", tc.name, err)
		}
		if warned := strings.Contains(log.String(), "results go nowhere"); warned != tc.warn {
			t.Errorf("%s: warned %v, want %v; log:\n%s", tc.name, warned, tc.warn, log.String())
		}
	}
}
