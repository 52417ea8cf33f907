package eddy_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// TestMerge counts two topics' records per key in one aggregation: the
// merged stream carries both, in the order they were piped, including one
// branch whose key changed (repartitioned before the grouping).
func TestMerge(t *testing.T) {
	topo := eddy.NewTopology()
	a := eddy.Source(topo, "a", serde.String(), serde.String())
	b := eddy.Source(topo, "b", serde.String(), serde.String())
	// b's records are keyed by their value: a key change that the
	// grouping must repartition.
	rekeyed := eddy.SelectKey(b, func(_, v string) string { return v })
	merged := eddy.Merge(a, rekeyed)
	eddy.To(eddy.ToStream(eddy.Count(eddy.GroupByKey(merged, serde.String()), "counts")), "out", serde.String(), serde.Int64())
	d, err := eddytest.New(topo, eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ina := eddytest.Input(d, "a", serde.String(), serde.String())
	inb := eddytest.Input(d, "b", serde.String(), serde.String())
	pipe := func(in *eddytest.InputTopic[string, string], k, v string) {
		t.Helper()
		if err := in.Pipe(k, v, 1000); err != nil {
			t.Fatal(err)
		}
	}
	pipe(ina, "x", "1")
	pipe(inb, "ignored", "x") // key x after SelectKey
	pipe(ina, "y", "2")
	pipe(inb, "ignored", "y")
	pipe(inb, "ignored", "x")
	got, err := eddytest.Output(d, "out", serde.String(), serde.Int64()).ReadKeyValues()
	if err != nil {
		t.Fatal(err)
	}
	var rendered []string
	for _, kv := range got {
		rendered = append(rendered, kv.Key+"="+strconv.FormatInt(kv.Value, 10))
	}
	want := []string{"x=1", "x=2", "y=1", "y=2", "x=3"}
	if !slices.Equal(rendered, want) {
		t.Errorf("counts %q, want %q", rendered, want)
	}
}

// TestMergeOfUnencodableValues: after Map the values' serde is unknown, so
// a grouping of the merged, re-keyed stream is refused with the fix named.
func TestMergeOfUnencodableValues(t *testing.T) {
	topo := eddy.NewTopology()
	a := eddy.Source(topo, "a", serde.String(), serde.String())
	b := eddy.Map(eddy.Source(topo, "b", serde.String(), serde.String()), func(k, v string) (string, string) { return v, k })
	eddy.GroupByKey(eddy.Merge(a, b), serde.String())
	err := topo.Err()
	if err == nil || !strings.Contains(err.Error(), "Repartition") {
		t.Fatalf("Err() = %v, want an error that names Repartition", err)
	}
	other := eddy.Source(eddy.NewTopology(), "c", serde.String(), serde.String())
	eddy.Merge(a, other)
	if err := topo.Err(); err == nil || !strings.Contains(err.Error(), "different topologies") {
		t.Fatalf("Err() = %v, want an error about different topologies", err)
	}
}

// TestProcessingTime windows records by the wall clock at which they were
// read, not by their Kafka timestamps, also after a repartition.
func TestProcessingTime(t *testing.T) {
	start := time.UnixMilli(1_800_000_005_000) // 5s into a 10s window
	topo := eddy.NewTopology()
	s := eddy.Source(topo, "in", serde.String(), serde.String(), eddy.ProcessingTime())
	g := eddy.GroupBy(s, func(_, v string) string { return v }, "by-value", serde.String(), serde.String())
	ws := eddy.WindowedBy(g, eddy.TumblingWindows(10*time.Second))
	eddy.To(eddy.ToStream(eddy.WindowCount(ws, "counts")), "out", eddy.WindowedSerde(serde.String()), serde.Int64())
	d, err := eddytest.New(topo, eddytest.Options{WallClock: start})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := eddytest.Input(d, "in", serde.String(), serde.String())
	// Event times that would put every record in window 0: ignored.
	steps := []struct {
		advance time.Duration
		value   string
	}{{0, "a"}, {4 * time.Second, "a"}, {time.Second, "a"}, {0, "b"}, {20 * time.Second, "a"}}
	for _, st := range steps {
		if err := d.AdvanceWallClock(st.advance); err != nil {
			t.Fatal(err)
		}
		if err := in.Pipe("k", st.value, 1); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := eddytest.Output(d, "out", eddy.WindowedSerde(serde.String()), serde.Int64()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	w0 := start.UnixMilli() - 5000
	want := []string{
		windowedAt("a", w0, 1), windowedAt("a", w0, 2),
		windowedAt("a", w0+10000, 1), windowedAt("b", w0+10000, 1), windowedAt("a", w0+30000, 1),
	}
	got := windowed(recs)
	if !slices.Equal(got, want) {
		t.Errorf("windows\n got %q\nwant %q", got, want)
	}
	// The output records carry processing time: the last one was read
	// 30s after the first.
	if last := recs[len(recs)-1].Timestamp; last != start.UnixMilli()+25000 {
		t.Errorf("last output timestamp %d, want the wall clock %d", last, start.UnixMilli()+25000)
	}
}

// TestProcessingTimeLastOptionWins: TimestampFrom after ProcessingTime
// replaces it.
func TestProcessingTimeLastOptionWins(t *testing.T) {
	topo := eddy.NewTopology()
	s := eddy.Source(topo, "in", serde.String(), serde.String(), eddy.ProcessingTime(),
		eddy.TimestampFrom(func(string, string, int64) int64 { return 42 }))
	eddy.To(s, "out", serde.String(), serde.String())
	d, err := eddytest.New(topo, eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := eddytest.Input(d, "in", serde.String(), serde.String()).Pipe("k", "v", 7); err != nil {
		t.Fatal(err)
	}
	recs, err := eddytest.Output(d, "out", serde.String(), serde.String()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Timestamp != 42 {
		t.Fatalf("outputs %+v, want one with timestamp 42", recs)
	}
}

func windowedAt(key string, start, count int64) string {
	return windowed([]eddy.Record[eddy.Windowed[string], int64]{{Key: eddy.Windowed[string]{Key: key, Window: eddy.Window{Start: start, End: start + 10000}}, Value: count}})[0]
}

// TestTimestampFromOtherTypes: an extractor of other key and value types
// than its source's is a topology error naming the source and the types.
func TestTimestampFromOtherTypes(t *testing.T) {
	topo := eddy.NewTopology()
	eddy.To(eddy.Source(topo, "in", serde.String(), serde.Int64(),
		eddy.TimestampFrom(func(string, string, int64) int64 { return 42 })), "out", serde.String(), serde.Int64())
	err := topo.Err()
	if err == nil || !strings.Contains(err.Error(), "source in") || !strings.Contains(err.Error(), "func(string, int64, int64) int64") {
		t.Fatalf("Err() = %v, want the source named and the extractor type it needs", err)
	}
}
