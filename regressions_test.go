package eddy_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// Regression tests from a review of windows, joins and punctuation: each
// failed, before its fix, because of the bug its comment describes.

func rvPipe(t *testing.T, d *eddytest.Driver, topic, key, value string, ts int64) {
	t.Helper()
	pipeRecords(t, d, []pipe{{topic, key, &value, ts}})
}

func rvJoinStreams(t *testing.T, w eddy.JoinWindows, kind eddy.JoinKind) *eddytest.Driver {
	topo := eddy.NewTopology()
	clicks := eddy.Source(topo, "clicks", serde.String(), serde.String())
	views := eddy.Source(topo, "views", serde.String(), serde.String())
	joined := eddy.JoinStreams(clicks, views, w, kind, "cv", serde.String(), serde.String(), serde.String(),
		func(_ string, l string, lok bool, r string, rok bool) string {
			return opt(l, lok) + "+" + opt(r, rok)
		})
	eddy.To(joined, "out", serde.String(), serde.String())
	return newDriver(t, topo)
}

// TestJoinStreamsKeepsPartnersForWholeWindow: a right record at
// 10s joins a left record at 0s (10s apart) and is not late at stream time
// 20s (10 + before 10 + grace 0 = 20 is not < 20), as in Kafka Streams. But
// the join keeps each side's records for max(before, after) + grace + 1ms
// only, so the left record was already expired: the inner join loses the
// pair. Kafka Streams keeps them for before + after + grace.
func TestJoinStreamsKeepsPartnersForWholeWindow(t *testing.T) {
	d := rvJoinStreams(t, eddy.JoinWindowsOf(10*time.Second), eddy.InnerJoin)
	rvPipe(t, d, "clicks", "a", "c1", 0)
	rvPipe(t, d, "clicks", "b", "c2", 20_000) // stream time 20s
	rvPipe(t, d, "views", "a", "v1", 10_000)  // in c1's window, not late
	if got, want := readStrings(t, d, "out"), []string{"a=c1+v1"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q (late records dropped: %d)", got, want, d.LateRecordsDropped())
	}
}

// TestJoinStreamsUnmatchedNeverFollowedByMatch: README and the
// JoinStreams doc promise that a left join's "no partner" result comes
// only once the window closed, "so a later partner never follows a result
// that said there was none". A left record at 0s is emitted unmatched once
// stream time passes 0 + 5s (after) + 0 (grace); a right record at 5s is
// still accepted (5 + 5 + 0 >= 6) and joins it: the output says both
// "c1 had no partner" and "c1 joined v1".
func TestJoinStreamsUnmatchedNeverFollowedByMatch(t *testing.T) {
	d := rvJoinStreams(t, eddy.JoinWindowsOf(5*time.Second), eddy.LeftJoin)
	rvPipe(t, d, "clicks", "a", "c1", 0)
	rvPipe(t, d, "clicks", "z", "c2", 6_000) // stream time 6s: c1's window closed
	rvPipe(t, d, "views", "a", "v1", 5_000)  // accepted, within c1's window
	got := readStrings(t, d, "out")
	if slices.Contains(got, "a=c1+-") && slices.Contains(got, "a=c1+v1") {
		t.Errorf("c1 was reported unmatched and then matched: %q", got)
	}
}

// rvTicker forwards "tick" every 10s of stream time.
type rvTicker struct{}

func (rvTicker) Init(ctx *eddy.ProcessorContext[string, string]) error {
	_, err := ctx.Schedule(10*time.Second, eddy.StreamTime, func(ts int64) error {
		return ctx.Forward(eddy.Record[string, string]{Key: "tick", Value: fmt.Sprint(ts), Timestamp: ts})
	})
	return err
}
func (rvTicker) Process(eddy.Record[string, string]) error { return nil }
func (rvTicker) Close() error                              { return nil }

// rvFailOn fails on a record whose value is "fail".
type rvFailOn struct{}

func (rvFailOn) Init(*eddy.ProcessorContext[string, string]) error { return nil }
func (rvFailOn) Close() error                                      { return nil }
func (rvFailOn) Process(r eddy.Record[string, string]) error {
	if r.Value == "fail" {
		return fmt.Errorf("asked to fail")
	}
	return nil
}

// TestStreamPunctuatorAfterAbort: a stream-time punctuator that
// fired inside a transaction that then aborted must fire again when the
// replay reaches the same stream time. punctuator.fire moves next forward
// in memory, which an abort does not undo (the runtime keeps a task's
// processors across aborts from rebalances and fencing, as eddytest keeps
// them across a failed record), so the replay skips the tick: the output
// differs from a crash-free run's.
func TestStreamPunctuatorAfterAbort(t *testing.T) {
	topo := eddy.NewTopology()
	in := eddy.Source(topo, "in", serde.String(), serde.String())
	ticks := eddy.Process(in, "ticker", func() eddy.Processor[string, string, string, string] { return rvTicker{} })
	eddy.To(ticks, "ticks", serde.String(), serde.String())
	// The record also goes through a topic to a processor that fails on
	// "fail": after the punctuator ran, within the same transaction.
	eddy.To(in, "chain", serde.String(), serde.String())
	chain := eddy.Source(topo, "chain", serde.String(), serde.String())
	eddy.Process(chain, "fail-on", func() eddy.Processor[string, string, string, string] { return rvFailOn{} })
	d := newDriver(t, topo)

	rvPipe(t, d, "in", "a", "x", 0) // the punctuator's first reading: next tick at 10s
	if err := d.PipeRaw("in", []byte("a"), []byte("fail"), 10_000); err == nil {
		t.Fatal("no error from a failing record")
	}
	if got := readStrings(t, d, "ticks"); len(got) != 0 {
		t.Fatalf("an aborted transaction's tick is visible: %q", got)
	}
	rvPipe(t, d, "in", "a", "x", 10_000) // the replay reaches 10s again
	if got, want := readStrings(t, d, "ticks"), []string{"tick=10000"}; !slices.Equal(got, want) {
		t.Errorf("ticks %q, want %q (as without the aborted transaction)", got, want)
	}
}

// TestDriverRollsBackGlobalTopicWrites: a record that the topology
// writes to a global table's topic becomes visible to the global store
// only when its transaction commits (the global consumer reads
// read_committed). eddytest's run applies such records to the global
// store while it processes the step (driver.go, in run's pending loop), so
// a step that then fails leaves the aborted record in the global table.
func TestDriverRollsBackGlobalTopicWrites(t *testing.T) {
	topo := eddy.NewTopology()
	in := eddy.Source(topo, "in", serde.String(), serde.String())
	eddy.To(in, "names", serde.String(), serde.String()) // the global table's topic
	eddy.To(in, "chain", serde.String(), serde.String())
	chain := eddy.Source(topo, "chain", serde.String(), serde.String())
	eddy.Process(chain, "fail-on", func() eddy.Processor[string, string, string, string] { return rvFailOn{} })
	names := eddy.GlobalTableFrom(topo, "names", "names", serde.String(), serde.String())
	q := eddy.Source(topo, "q", serde.String(), serde.String())
	eddy.To(eddy.JoinGlobal(q, names, func(k, _ string) string { return k }, eddy.LeftJoin,
		func(_, _ string, n string, ok bool) string { return opt(n, ok) }), "out", serde.String(), serde.String())
	d := newDriver(t, topo)
	if err := d.PipeRaw("in", []byte("x"), []byte("fail"), 0); err == nil {
		t.Fatal("no error from a failing record")
	}
	rvPipe(t, d, "q", "x", "?", 1)
	if got, want := readStrings(t, d, "out"), []string{"x=-"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q: the global table holds a record of an aborted transaction", got, want)
	}
}

// TestStreamPunctuatorFirstReadingIsARecord: the first stream-time
// firing is "one interval after the clock's first reading (the stream time
// after the first record)". A first record that goes to the dead-letter
// topic (here: a negative timestamp) leaves stream time at NoStreamTime,
// yet the punctuator takes that as its first reading (next = MinInt64 +
// interval), so it fires at once on the first real record, at 0 instead of
// 10s.
func TestStreamPunctuatorFirstReadingIsARecord(t *testing.T) {
	topo := eddy.NewTopology()
	in := eddy.Source(topo, "in", serde.String(), serde.String())
	eddy.To(eddy.Process(in, "ticker", func() eddy.Processor[string, string, string, string] { return rvTicker{} }),
		"ticks", serde.String(), serde.String())
	d := newDriver(t, topo)
	rvPipe(t, d, "in", "a", "x", -5) // dead-lettered: no stream time
	rvPipe(t, d, "in", "a", "x", 0)
	rvPipe(t, d, "in", "a", "x", 5_000)
	if got := readStrings(t, d, "ticks"); len(got) != 0 {
		t.Errorf("ticks %q before stream time reached 10s, want none", got)
	}
}

// TestRepartitionKeepsTombstones: a table's update stream carries
// deletions as tombstones; aggregations skip them (as in Kafka Streams).
// Through a repartition topic (GroupBy) the tombstone is written as a null
// value, but the repartition source is not a table source, so it reads
// the null back as a value: serde.String makes it "" and Count counts the
// deletion; serde.Int64 or serde.JSON fail to decode it, and since a
// repartition topic never dead-letters, the app stops on it for good.
func TestRepartitionKeepsTombstones(t *testing.T) {
	topo := eddy.NewTopology()
	users := eddy.TableFrom(topo, "users", "users", serde.String(), serde.String()) // user → city
	byCity := eddy.GroupBy(eddy.ToStream(users), func(_, city string) string { return city }, "by-city", serde.String(), serde.String())
	eddy.To(eddy.ToStream(eddy.Count(byCity, "per-city")), "out", serde.String(), serde.Int64())
	d := newDriver(t, topo)
	rvPipe(t, d, "users", "ann", "paris", 1)
	if err := d.PipeRaw("users", []byte("ann"), nil, 2); err != nil { // ann deleted
		t.Fatal(err)
	}
	recs, err := eddytest.Output(d, "out", serde.String(), serde.Int64()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%q=%d", r.Key, r.Value))
	}
	if want := []string{`"paris"=1`}; !slices.Equal(got, want) {
		t.Errorf("got %s, want %s: the tombstone was aggregated as a value", got, want)
	}
}

// TestGlobalTableSeveralWorkers: with Workers > 1, tasks of several
// workers read a global store at the same time. globalStore.Get takes a
// read lock only (internal/runtime/globals.go:47), so several db.Get run
// concurrently, but a state.DB is for one goroutine at a time: the Pebble
// db builds every lookup key in one shared scratch buffer (d.key,
// state/pebble/db.go:65), and concurrent Gets overwrite each other's key.
// Records are joined with the row of another key, or with none. (Under
// -race the data race is reported too.)
func TestGlobalTableSeveralWorkers(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, 4, "orders", "out")
	createTopics(t, addr, 1, "names")
	pad := strings.Repeat("x", 200) // long keys: a longer window for the race
	const customers, orders = 64, 20000
	var names []*kgo.Record
	for i := 0; i < customers; i++ {
		names = append(names, srec(fmt.Sprintf("c%d-%s", i, pad), fmt.Sprint("name", i)))
	}
	produce(t, addr, "names", names...)
	topo := eddy.NewTopology()
	src := eddy.Source(topo, "orders", serde.String(), serde.String()) // value: customer number
	g := eddy.GlobalTableFrom(topo, "names", "names", serde.String(), serde.String())
	joined := eddy.JoinGlobal(src, g, func(_ string, c string) string { return fmt.Sprintf("c%s-%s", c, pad) }, eddy.LeftJoin,
		func(_ string, c string, name string, ok bool) string { return c + "/" + opt(name, ok) })
	eddy.To(joined, "out", serde.String(), serde.String())
	cfg := config(t, addr)
	cfg.Workers = 4
	app := run(t, topo, cfg)
	var recs []*kgo.Record
	for i := 0; i < orders; i++ {
		recs = append(recs, srec(fmt.Sprint("o", i), fmt.Sprint(i%customers)))
	}
	produce(t, addr, "orders", recs...)
	bad := 0
	for _, r := range waitRecords(t, addr, "out", orders, app) {
		c, name, _ := strings.Cut(string(r.Value), "/")
		if name != "name"+c {
			if bad < 5 {
				t.Errorf("customer %s joined %q, want %q", c, name, "name"+c)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d records joined the wrong row", bad, orders)
	}
}

// TestStreamPunctuatorAcrossRestart: stream-time punctuation is
// documented as "deterministic, replayed identically". A punctuator starts
// its schedule at its first reading of stream time in each process
// (punctuation.go, fire: next = now + interval), so a restart shifts it: a
// run over records at 0s, 5s | restart | 10s, 15s ticks at 10s without the
// restart and never with it. (Kafka Streams aligns stream-time punctuation
// to multiples of the interval, which a restart does not move.)
func TestStreamPunctuatorAcrossRestart(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, 1, "in", "ticks", "echo")
	build := func() *eddy.Topology {
		topo := eddy.NewTopology()
		in := eddy.Source(topo, "in", serde.String(), serde.String())
		eddy.To(eddy.Process(in, "ticker", func() eddy.Processor[string, string, string, string] { return rvTicker{} }),
			"ticks", serde.String(), serde.String())
		eddy.To(in, "echo", serde.String(), serde.String())
		return topo
	}
	at := func(ts int64) *kgo.Record {
		r := srec("a", fmt.Sprint(ts))
		r.Timestamp = time.UnixMilli(ts)
		return r
	}
	cfg := config(t, addr)
	app := run(t, build(), cfg)
	produce(t, addr, "in", at(0), at(5_000))
	waitRecords(t, addr, "echo", 2, app)
	if err := app.stop(t); err != nil {
		t.Fatalf("first run: %v", err)
	}
	app = run(t, build(), cfg)
	produce(t, addr, "in", at(10_000), at(15_000))
	waitRecords(t, addr, "echo", 4, app) // the ticks commit with the records
	var got []string
	for _, r := range waitRecords(t, addr, "ticks", 0, app) {
		got = append(got, string(r.Value))
	}
	if want := []string{"10000"}; !slices.Equal(got, want) {
		t.Errorf("ticks %q, want %q (as a run without the restart)", got, want)
	}
}
