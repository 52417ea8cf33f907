package eddy_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
)

// TestRunHeldUpdateFailureMeetsItsRecord: an operator downstream of a
// table cache fails on one update (the second count of key "bad"). The
// cache holds that update until the commit, when the record that made it
// is long processed: the transaction is aborted and its records
// processed again with the cache off, so the failure comes from that
// record and OnProcessError dead-letters it, and only it; the app goes on
// and the other counts are exact.
func TestRunHeldUpdateFailureMeetsItsRecord(t *testing.T) {
	for _, punctuated := range []bool{false, true} {
		t.Run(fmt.Sprint("wall-clock punctuator ", punctuated), func(t *testing.T) { heldUpdateFailure(t, punctuated) })
	}
}

// ticker passes records on and has a wall-clock punctuator that does
// nothing: the task's caches are flushed before it runs, which is where a
// held update may fail first.
type ticker struct {
	ctx *eddy.ProcessorContext[string, int64]
}

func (p *ticker) Init(ctx *eddy.ProcessorContext[string, int64]) error {
	p.ctx = ctx
	_, err := ctx.Schedule(10*time.Millisecond, eddy.WallClockTime, func(int64) error { return nil })
	return err
}

func (p *ticker) Process(r eddy.Record[string, int64]) error { return p.ctx.Forward(r) }

func (p *ticker) Close() error { return nil }

func heldUpdateFailure(t *testing.T, punctuated bool) {
	addr := startBroker(t)
	createTopics(t, addr, 1, "in", "out")
	topo := eddy.NewTopology()
	counts := eddy.ToStream(eddy.Count(eddy.GroupByKey(eddy.Source(topo, "in", serde.String(), serde.String()), serde.String()), "counts"))
	if punctuated {
		counts = eddy.Process(counts, "ticker", func() eddy.Processor[string, int64, string, int64] { return &ticker{} })
	}
	checked := eddy.MapValues(counts, func(k string, n int64) int64 {
		if k == "bad" && n == 2 {
			panic("the second bad one")
		}
		return n
	})
	eddy.To(checked, "out", serde.String(), serde.Int64())
	var in []string
	for i := range 30 {
		in = append(in, fmt.Sprint("a", i%3))
		if i%15 == 0 { // twice: the cache holds bad=2 until the commit
			in = append(in, "bad")
		}
	}
	for _, k := range in {
		produce(t, addr, "in", srec(k, "v"))
	}
	cfg := config(t, addr)
	cfg.OnProcessError = eddy.DeadLetter
	cfg.CommitRecords = 1_000 // the commit interval ends transactions, as punctuations come
	app := run(t, topo, cfg)

	dead := waitRecords(t, addr, eddy.DeadLetterTopic("in"), 1, app)
	if len(dead) != 1 || string(dead[0].Key) != "bad" {
		t.Fatalf("dead letters %v, want the second record of key bad only", dead)
	}
	secondBad := 0 // its offset in the one partition of "in"
	for i, seen := 0, 0; i < len(in); i++ {
		if in[i] == "bad" {
			if seen++; seen == 2 {
				secondBad = i
			}
		}
	}
	if off, _ := header(dead[0], eddy.HeaderDLQOffset); off != fmt.Sprint(secondBad) {
		t.Errorf("the dead letter is the record at offset %s, want %d (the second of key bad)", off, secondBad)
	}
	// Every a-key counts its 10 records; bad never shows 2.
	ten := string(i64(10))
	recs := waitLast(t, addr, "out", map[string]string{"a0": ten, "a1": ten, "a2": ten})
	for _, p := range decode(t, recs, serde.String(), serde.Int64()) {
		if p.Key == "bad" && p.Value == 2 {
			t.Errorf("out has bad=2, the update that failed")
		}
	}
	if done, err := app.exited(); done {
		t.Fatalf("the app stopped: %v", err)
	}
}
