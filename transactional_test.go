package eddy_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
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
	if err := src.Pipe("b", "fine", 2); err != nil {
		t.Fatal(err)
	}
	seen, prepared := readFileSink(t, dir)
	if seen["b=fine"] != 1 || len(seen) != 1 || prepared != 0 {
		t.Errorf("committed %v, %d prepared; want b=fine committed once", seen, prepared)
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
