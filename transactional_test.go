package eddy_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTransactionalSinkErrors: a record the sink refuses is the record's
// fault (the produce-error policy dead-letters it, stage "produce"); a
// sink that is unavailable is not (the record is not dead-lettered, the
// commit fails).
func TestTransactionalSinkErrors(t *testing.T) {
	dir := t.TempDir()
	topo := eddy.NewTopology()
	in := eddy.Source(topo, "in", serde.String(), serde.String())
	eddy.ToTransactional(in, "files", openFileSink(dir))
	d, err := eddytest.New(topo, eddytest.Options{Config: eddy.Config{AppID: "tx", OnProduceError: eddy.DeadLetter}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	src := eddytest.Input(d, "in", serde.String(), serde.String())
	if err := src.Pipe("a", "line\nbreak", 1); err != nil {
		t.Fatalf("a refused record: %v, want it dead-lettered", err)
	}
	dead, err := eddytest.Output(d, eddy.DeadLetterTopic("in"), serde.Bytes(), serde.Bytes()).ReadAll()
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead letters %v (%v), want 1", dead, err)
	}
	reasons := map[string]string{}
	for _, h := range dead[0].Headers {
		reasons[h.Key] = string(h.Value)
	}
	if reasons[eddy.HeaderDLQStage] != "produce" || !strings.Contains(reasons[eddy.HeaderDLQError], `sink "files" refused the record: a line break`) {
		t.Errorf("dead letter headers %v", reasons)
	}
	// Refused at prepare (as a database refuses a row that breaks a
	// constraint): the policy meets the input record behind the write,
	// in the same transaction as the rows the sink took.
	err = d.Transaction(func() error {
		for i, v := range []string{"fine", "refused:1", "also fine"} {
			if err := src.Pipe(fmt.Sprint("b", i), v, int64(2+i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("a record refused at prepare: %v, want it dead-lettered", err)
	}
	seen, prepared := readFileSink(t, dir)
	if seen["b0=fine"] != 1 || seen["b2=also fine"] != 1 || len(seen) != 2 || prepared != 0 {
		t.Errorf("committed %v, %d prepared; want b0 and b2 committed once", seen, prepared)
	}
	dead, err = eddytest.Output(d, eddy.DeadLetterTopic("in"), serde.Bytes(), serde.Bytes()).ReadAll()
	if err != nil || len(dead) != 1 || string(dead[0].Key) != "b1" || string(dead[0].Value) != "refused:1" {
		t.Fatalf("dead letters %v (%v), want b1's input record", dead, err)
	}
	reasons = map[string]string{}
	for _, h := range dead[0].Headers {
		reasons[h.Key] = string(h.Value)
	}
	if reasons[eddy.HeaderDLQStage] != "produce" || !strings.Contains(reasons[eddy.HeaderDLQError], `sink "files" refused the record: the value breaks the sink's constraint`) {
		t.Errorf("dead letter headers %v", reasons)
	}

	// Unavailable: the sink's directory is gone, so the prepare fails:
	// not the record's fault, nothing dead-lettered.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	err = src.Pipe("c", "lost?", 3)
	if !errors.Is(err, eddy.ErrSinkUnavailable) {
		t.Errorf("pipe with the sink unavailable: %v, want ErrSinkUnavailable", err)
	}
	if dead, _ := eddytest.Output(d, eddy.DeadLetterTopic("in"), serde.Bytes(), serde.Bytes()).ReadAll(); len(dead) != 0 {
		t.Errorf("%d more dead letters, want none", len(dead))
	}
}

// TestTransactionalSinkRefusalBehindRepartition: the input record of a
// write refused at prepare is the record that made it, even when the
// runtime reused its record for the records after it in the transaction
// (records read back from a repartition topic): the dead letter holds
// the refused record's key and value, not a later one's.
func TestTransactionalSinkRefusalBehindRepartition(t *testing.T) {
	d, dir := pipeToFileSink(t, func(in eddy.Stream[string, string]) eddy.Stream[string, string] {
		return eddy.Repartition(in, "by-key", serde.String(), serde.String())
	}, "fine", "refused:1", "also fine", "and more")
	dlq := eddy.DeadLetterTopic(eddy.RepartitionTopic("tx", "by-key"))
	dead, err := eddytest.Output(d, dlq, serde.Bytes(), serde.Bytes()).ReadAll()
	if err != nil || len(dead) != 1 || string(dead[0].Key) != "b1" || string(dead[0].Value) != "refused:1" {
		t.Fatalf("dead letters on %s: %v (%v), want b1's record", dlq, dead, err)
	}
	if seen, _ := readFileSink(t, dir); len(seen) != 3 || seen["b1=refused:1"] != 0 {
		t.Errorf("committed %v, want b0, b2 and b3", seen)
	}
}

// TestTransactionalSinkRefusesTwoWritesOfOneRecord: an input record
// whose two writes are both refused at prepare meets the policy once (one
// dead letter), and the other records' writes commit.
func TestTransactionalSinkRefusesTwoWritesOfOneRecord(t *testing.T) {
	d, dir := pipeToFileSink(t, func(in eddy.Stream[string, string]) eddy.Stream[string, string] {
		return eddy.FlatMapValues(in, func(dst []string, _, v string) []string { return append(dst, v+"/1", v+"/2") })
	}, "fine", "refused:1", "refused:2", "also fine")
	dead, err := eddytest.Output(d, eddy.DeadLetterTopic("in"), serde.String(), serde.String()).ReadAll()
	if err != nil || len(dead) != 2 || dead[0].Key != "b1" || dead[1].Key != "b2" {
		t.Fatalf("dead letters %v (%v), want b1's and b2's input records, once each", dead, err)
	}
	if seen, _ := readFileSink(t, dir); len(seen) != 4 || seen["b3=also fine/2"] != 1 {
		t.Errorf("committed %v, want b0's and b3's two writes", seen)
	}
}

// pipeToFileSink runs the topology topic "in" → through → a file sink
// (refusing values "refused:…" at prepare) under the dead-letter policy,
// pipes values (keys b0, b1, …) in one transaction, which must commit, and
// returns the driver and the sink's directory.
func pipeToFileSink(t *testing.T, through func(eddy.Stream[string, string]) eddy.Stream[string, string], values ...string) (*eddytest.Driver, string) {
	t.Helper()
	dir := t.TempDir()
	topo := eddy.NewTopology()
	eddy.ToTransactional(through(eddy.Source(topo, "in", serde.String(), serde.String())), "files", openFileSink(dir))
	d, err := eddytest.New(topo, eddytest.Options{Config: eddy.Config{AppID: "tx", OnProduceError: eddy.DeadLetter}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	src := eddytest.Input(d, "in", serde.String(), serde.String())
	err = d.Transaction(func() error {
		for i, v := range values {
			if err := src.Pipe(fmt.Sprint("b", i), v, int64(2+i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("records refused at prepare: %v, want them dead-lettered", err)
	}
	return d, dir
}

// TestTransactionalSinkRefusalFails: under the fail policy, a write the
// sink refuses at prepare fails the transaction with an error naming the
// input record and the policy, and the sink's prepared transaction is
// rolled back with it: nothing of that transaction is committed.
func TestTransactionalSinkRefusalFails(t *testing.T) {
	dir := t.TempDir()
	topo := eddy.NewTopology()
	eddy.ToTransactional(eddy.Source(topo, "in", serde.String(), serde.String()), "files", openFileSink(dir))
	d, err := eddytest.New(topo, eddytest.Options{Config: eddy.Config{AppID: "tx"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	src := eddytest.Input(d, "in", serde.String(), serde.String())
	err = d.Transaction(func() error {
		if err := src.Pipe("a", "fine", 1); err != nil {
			return err
		}
		return src.Pipe("b", "refused:x", 2)
	})
	if err == nil || !strings.Contains(err.Error(), "in/0@1") || !strings.Contains(err.Error(), "OnProduceError") {
		t.Errorf("transaction with a refused write: %v, want the fail policy's error naming in/0@1", err)
	}
	if seen, prepared := readFileSink(t, dir); len(seen) != 0 || prepared != 0 {
		t.Errorf("committed %v, %d prepared; want nothing", seen, prepared)
	}
}

// TestTransactionalSinkBesideSuppress: Suppress forwards from a
// stream-time punctuator in the middle of a transaction; the sink still
// prepares once per commit, after every record, so every row the Kafka
// transaction produced is committed (a prepare per punctuation would
// leave all but the last prepared transaction to be rolled back).
func TestTransactionalSinkBesideSuppress(t *testing.T) {
	dir := t.TempDir()
	topo := eddy.NewTopology()
	counts := eddy.Count(eddy.GroupByKey(eddy.Source(topo, "in", serde.String(), serde.String()), serde.String()), "counts")
	held := eddy.Suppress(counts, "held", eddy.UntilTimeLimit(time.Millisecond, eddy.BufferConfig{}), serde.String(), serde.Int64())
	out := eddy.MapValues(eddy.ToStream(held), func(_ string, n int64) string { return fmt.Sprint(n) })
	eddy.ToTransactional(out, "files", openFileSink(dir))
	d, err := eddytest.New(topo, eddytest.Options{Config: eddy.Config{AppID: "tx"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := eddytest.Input(d, "in", serde.String(), serde.String())
	err = d.Transaction(func() error {
		for i, k := range []string{"a", "b", "c", "d"} {
			if err := in.Pipe(k, "x", int64(10*i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Restart(); err != nil { // the next open resolves what was left prepared
		t.Fatal(err)
	}
	seen, prepared := readFileSink(t, dir)
	if prepared != 0 || seen["a=1"] != 1 || seen["b=1"] != 1 || seen["c=1"] != 1 {
		t.Errorf("committed %v, %d prepared left; want a, b and c committed once (d is still held)", seen, prepared)
	}
}

// TestTransactionalSinkRefusesHeldUpdate: a write the sink refuses at
// prepare that came out of a table cache (a table update held until the
// commit) has no input record of its own: the transaction is processed
// again with the caches off, and the policy then meets the input record
// behind the refused write, dead-lettered whole (key and value).
func TestTransactionalSinkRefusesHeldUpdate(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, 1, "held-in")
	dir := t.TempDir()
	topo := eddy.NewTopology()
	latest := eddy.Reduce(eddy.GroupByKey(eddy.Source(topo, "held-in", serde.String(), serde.String()), serde.String()),
		"latest", func(_, v string) string { return v }, serde.String())
	eddy.ToTransactional(eddy.ToStream(latest), "files", openFileSink(dir))
	var recs []*kgo.Record
	for i := range 20 {
		v := fmt.Sprint("v", i)
		if i == 13 {
			v = "refused:13"
		}
		recs = append(recs, srec(fmt.Sprint("k", i), v))
	}
	produce(t, addr, "held-in", recs...)
	cfg := config(t, addr)
	cfg.OnProduceError = eddy.DeadLetter
	app := run(t, topo, cfg)
	dead := waitRecords(t, addr, eddy.DeadLetterTopic("held-in"), 1, app)
	if len(dead) != 1 || string(dead[0].Key) != "k13" || string(dead[0].Value) != "refused:13" {
		t.Fatalf("dead letters %v, want k13's input record", dead)
	}
	if stage, _ := header(dead[0], eddy.HeaderDLQStage); stage != "produce" {
		t.Errorf("dead letter stage %q, want produce", stage)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		seen, prepared := readFileSink(t, dir)
		if len(seen) == 19 && prepared == 0 {
			for k, n := range seen {
				if n != 1 || strings.HasPrefix(k, "k13=") {
					t.Errorf("committed %s %d times", k, n)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed %v, %d prepared; want the 19 other keys once each", seen, prepared)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := app.stop(t); err != nil {
		t.Fatal(err)
	}
}

// sinkTicker forwards its input and, from a wall-clock punctuator every 50 ms
// once it saw a record, a tick of its own.
type sinkTicker struct {
	ctx   *eddy.ProcessorContext[string, string]
	ticks int
	seen  bool
	// prefix starts the ticks' values ("refused:" makes the file sink
	// refuse them at prepare).
	prefix string
}

func (p *sinkTicker) Init(ctx *eddy.ProcessorContext[string, string]) error {
	p.ctx = ctx
	_, err := ctx.Schedule(50*time.Millisecond, eddy.WallClockTime, func(ts int64) error {
		if !p.seen {
			return nil
		}
		p.ticks++
		return ctx.Forward(eddy.Record[string, string]{Key: "tick", Value: p.prefix + fmt.Sprint(p.ticks), Timestamp: ts})
	})
	return err
}

func (p *sinkTicker) Process(r eddy.Record[string, string]) error {
	p.seen = true
	return p.ctx.Forward(r)
}

func (p *sinkTicker) Close() error { return nil }

// TestTransactionalSinkPunctuatorWrites: what a wall-clock punctuator
// writes to the sink, in transactions without any input record, is
// prepared and committed with them, not held until more input comes.
func TestTransactionalSinkPunctuatorWrites(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, 1, "tick-in")
	dir := t.TempDir()
	topo := eddy.NewTopology()
	ticks := eddy.Process(eddy.Source(topo, "tick-in", serde.String(), serde.String()), "sinkTicker",
		func() eddy.Processor[string, string, string, string] { return &sinkTicker{} })
	eddy.ToTransactional(ticks, "files", openFileSink(dir))
	produce(t, addr, "tick-in", srec("a", "only input"))
	app := run(t, topo, config(t, addr))
	deadline := time.Now().Add(time.Minute)
	for {
		seen, _ := readFileSink(t, dir)
		if seen["a=only input"] == 1 && seen["tick=3"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed %v; want the input and at least 3 ticks, with no more input", seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := app.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestTransactionalSinkRefusesPunctuatorWrite: a punctuator's write
// refused at prepare has no input record: log-and-continue skips it (the
// rest of the transaction commits); dead-letter cannot, and fails the
// transaction with an error that names the policy that skips it.
func TestTransactionalSinkRefusesPunctuatorWrite(t *testing.T) {
	for _, policy := range []eddy.ErrorPolicy{eddy.LogAndContinue, eddy.DeadLetter} {
		dir := t.TempDir()
		topo := eddy.NewTopology()
		ticks := eddy.Process(eddy.Source(topo, "in", serde.String(), serde.String()), "sinkTicker",
			func() eddy.Processor[string, string, string, string] { return &sinkTicker{prefix: "refused:"} })
		eddy.ToTransactional(ticks, "files", openFileSink(dir))
		d, err := eddytest.New(topo, eddytest.Options{Config: eddy.Config{AppID: "tx", OnProduceError: policy}})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if err := d.AdvanceWallClock(time.Second); err != nil { // starts the punctuator's clock
			t.Fatal(err)
		}
		err = d.Transaction(func() error {
			if err := eddytest.Input(d, "in", serde.String(), serde.String()).Pipe("a", "input", 1); err != nil {
				return err
			}
			return d.AdvanceWallClock(100 * time.Millisecond)
		})
		seen, _ := readFileSink(t, dir)
		switch policy {
		case eddy.LogAndContinue:
			if err != nil || len(seen) != 1 || seen["a=input"] != 1 {
				t.Errorf("log and continue: %v, committed %v; want the tick skipped and the input committed", err, seen)
			}
		default:
			if err == nil || !strings.Contains(err.Error(), "LogAndContinue skips such records") || len(seen) != 0 {
				t.Errorf("dead letter: %v, committed %v; want the transaction failed, naming the policy that skips", err, seen)
			}
		}
	}
}

// fencedOnceSink is a file sink whose first Write (of any task) finds the
// task owned by a newer instance.
type fencedOnceSink struct {
	*fileSink
	fences *atomic.Int32
}

func (s fencedOnceSink) Write(r eddy.Record[string, string]) error {
	if s.fences.Add(-1) >= 0 {
		return fmt.Errorf("checking the epoch: %w", eddy.ErrSinkFenced)
	}
	return s.fileSink.Write(r)
}

// TestTransactionalSinkFencedAtFlush: a sink fenced while the commit
// forwards the table cache's held updates to it ends the session, as
// when fenced while processing: the instance rejoins and writes every
// update once, instead of stopping.
func TestTransactionalSinkFencedAtFlush(t *testing.T) {
	addr := startBroker(t)
	createTopics(t, addr, 1, "flush-in")
	dir := t.TempDir()
	topo := eddy.NewTopology()
	latest := eddy.Reduce(eddy.GroupByKey(eddy.Source(topo, "flush-in", serde.String(), serde.String()), serde.String()),
		"latest", func(_, v string) string { return v }, serde.String())
	fences := &atomic.Int32{}
	fences.Store(1)
	open := openFileSink(dir)
	eddy.ToTransactional(eddy.ToStream(latest), "files", func(task eddy.SinkTask) (eddy.TransactionalSink[string, string], error) {
		s, err := open(task)
		return fencedOnceSink{s.(*fileSink), fences}, err
	})
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, srec(fmt.Sprint("k", i), fmt.Sprint("v", i)))
	}
	produce(t, addr, "flush-in", recs...)
	app := run(t, topo, config(t, addr))
	deadline := time.Now().Add(time.Minute)
	for {
		seen, prepared := readFileSink(t, dir)
		if len(seen) == 20 && prepared == 0 {
			for k, n := range seen {
				if n != 1 {
					t.Errorf("committed %s %d times", k, n)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed %v, %d prepared; want the 20 keys once each", seen, prepared)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if fences.Load() >= 0 {
		t.Fatal("the sink was never fenced")
	}
	if err := app.stop(t); err != nil {
		t.Fatalf("the app after a fence at flush: %v, want it running and stopped cleanly", err)
	}
}

// fencedSink is a sink whose every Write finds its task owned by a newer
// instance, as a sink that checks its fence per write would.
type fencedSink struct{ nopSink }

func (fencedSink) Write(eddy.Record[string, string]) error {
	return fmt.Errorf("checking the epoch: %w", eddy.ErrSinkFenced)
}

// nopSink is a TransactionalSink that takes everything and keeps
// nothing.
type nopSink struct{}

func (nopSink) Recover([]byte) error                     { return nil }
func (nopSink) Write(eddy.Record[string, string]) error  { return nil }
func (nopSink) Prepare() ([]byte, []eddy.Refusal, error) { return nil, nil, nil }
func (nopSink) Commit([]byte) error                      { return nil }
func (nopSink) Abort([]byte) error                       { return nil }
func (nopSink) Close() error                             { return nil }

// TestTransactionalSinkFencedIsNotTheRecords: a write refused because
// another instance owns the task is not the record's fault: no policy
// dead-letters it, the error says fenced.
func TestTransactionalSinkFencedIsNotTheRecords(t *testing.T) {
	topo := eddy.NewTopology()
	eddy.ToTransactional(eddy.Source(topo, "in", serde.String(), serde.String()), "fenced",
		func(eddy.SinkTask) (eddy.TransactionalSink[string, string], error) { return fencedSink{}, nil })
	d, err := eddytest.New(topo, eddytest.Options{Config: eddy.Config{AppID: "tx", OnProduceError: eddy.DeadLetter, OnProcessError: eddy.DeadLetter}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := eddytest.Input(d, "in", serde.String(), serde.String()).Pipe("a", "b", 1); !errors.Is(err, eddy.ErrSinkFenced) {
		t.Errorf("pipe into a fenced sink: %v, want ErrSinkFenced", err)
	}
	if dead, _ := eddytest.Output(d, eddy.DeadLetterTopic("in"), serde.Bytes(), serde.Bytes()).ReadAll(); len(dead) != 0 {
		t.Errorf("%d dead letters, want none", len(dead))
	}
}
