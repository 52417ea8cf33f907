package local_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/plan"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/harness/local"
	"github.com/eddy-streams/eddy/internal/runtime"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/state/pebble"
)

// words is a replayable source: record i is word i%7 on topic "in",
// keyed by i, stamped i ms after the epoch. failAt makes the topology see a
// poison value at that index.
type words struct {
	read   bool
	failAt int64
	key    [8]byte
}

func (w *words) Topics(read []string) {
	for _, t := range read {
		w.read = w.read || t == "in"
	}
}

func (w *words) Read(i int64, r *kgo.Record) bool {
	if !w.read {
		return false
	}
	binary.BigEndian.PutUint64(w.key[:], uint64(i))
	r.Topic, r.Key, r.Timestamp = "in", w.key[:], time.UnixMilli(i)
	r.Value = fmt.Appendf(r.Value[:0], "w%d", i%7)
	if i == w.failAt {
		r.Value = append(r.Value[:0], "poison"...)
	}
	return true
}

// countWords re-keys records by word (a repartition) and counts them.
func countWords() *eddy.Topology {
	t := eddy.NewTopology()
	in := eddy.Source(t, "in", serde.Int64(), serde.String())
	in = eddy.Filter(in, func(_ int64, w string) bool {
		if w == "poison" {
			panic("poison record")
		}
		return true
	})
	g := eddy.GroupBy(in, func(_ int64, w string) string { return w }, "by-word", serde.String(), serde.String())
	eddy.To(eddy.ToStream(eddy.Count(g, "counts")), "out", serde.String(), serde.Int64())
	return t
}

func open(t *testing.T, dir string, src local.Source, sink local.Sink) *local.Runner {
	t.Helper()
	rt, err := plan.Build(countWords(), eddy.Config{AppID: "local-test"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := local.New(rt, []local.Source{src}, local.Config{Backend: pebble.New(pebble.Options{}), Dir: dir, CommitInterval: time.Millisecond, Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRunnerCountsThroughARepartitionAndResumes(t *testing.T) {
	dir := t.TempDir()
	last := map[string]int64{}
	sink := func(topic string, key, value []byte, _ int64) {
		if topic != "out" {
			t.Errorf("record on %q", topic)
		}
		last[string(key)] = int64(binary.BigEndian.Uint64(value))
	}
	r := open(t, dir, &words{failAt: -1}, sink)
	if err := r.Run(context.Background(), 7000, nil); err != nil {
		t.Fatal(err)
	}
	if r.Next() != 7000 || r.Commits == 0 {
		t.Fatalf("next %d, %d commits", r.Next(), r.Commits)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for k := range 7 {
		if got := last[fmt.Sprintf("w%d", k)]; got != 1000 {
			t.Fatalf("w%d counted %d, want 1000", k, got)
		}
	}

	// Reopened, it resumes from the committed index with the counts the
	// state holds.
	r = open(t, dir, &words{failAt: -1}, sink)
	defer r.Close()
	if r.Next() != 7000 {
		t.Fatalf("reopened at %d, want 7000", r.Next())
	}
	if err := r.Run(context.Background(), 7007, nil); err != nil {
		t.Fatal(err)
	}
	if got := last["w3"]; got != 1001 {
		t.Fatalf("w3 counted %d after the restart, want 1001", got)
	}
}

func TestRunnerErrorDropsTheOpenTransaction(t *testing.T) {
	dir := t.TempDir()
	last := map[string]int64{}
	sink := func(_ string, key, value []byte, _ int64) { last[string(key)] = int64(binary.BigEndian.Uint64(value)) }
	r := open(t, dir, &words{failAt: 5000}, sink)
	if err := r.Run(context.Background(), 7000, nil); err == nil {
		t.Fatal("the poison record did not fail the run")
	}
	at := r.Next()
	if at > 5000 {
		t.Fatalf("state reflects index %d, past the poison record at 5000", at)
	}
	r.Close()

	// Replayed from the last commit without the poison, every word is
	// counted once: the failed transaction's counts were dropped.
	r = open(t, dir, &words{failAt: -1}, sink)
	defer r.Close()
	if r.Next() != at {
		t.Fatalf("reopened at %d, want the last commit %d", r.Next(), at)
	}
	if err := r.Run(context.Background(), 7000, nil); err != nil {
		t.Fatal(err)
	}
	for k := range 7 {
		if got := last[fmt.Sprintf("w%d", k)]; got != 1000 {
			t.Fatalf("w%d counted %d, want 1000", k, got)
		}
	}
}

// processorFunc is a TaskProcessor from a function.
type processorFunc func(r *kgo.Record) error

func (f processorFunc) Process(r *kgo.Record) error { return f(r) }
func (processorFunc) Punctuate(time.Time) error     { return nil }
func (processorFunc) Close() error                  { return nil }

// An empty key or value passed through an in-process repartition stays
// empty, not null: a null value there is a tombstone.
func TestRunnerKeepsEmptyApartFromNull(t *testing.T) {
	type seen struct{ nilKey, nilValue bool }
	var got []seen
	topo := runtime.Topology{Subtopologies: []runtime.Subtopology{
		{Sources: []string{"in"}, NewTask: func(tc runtime.TaskContext) (runtime.TaskProcessor, error) {
			return processorFunc(func(r *kgo.Record) error {
				if r.Offset%2 == 0 {
					return tc.Produce("mid", []byte{}, []byte{}, 0, nil)
				}
				return tc.Produce("mid", nil, nil, 0, nil)
			}), nil
		}},
		{Sources: []string{"mid"}, NewTask: func(runtime.TaskContext) (runtime.TaskProcessor, error) {
			return processorFunc(func(r *kgo.Record) error {
				got = append(got, seen{r.Key == nil, r.Value == nil})
				return nil
			}), nil
		}},
	}}
	r, err := local.New(topo, []local.Source{&words{failAt: -1}}, local.Config{Backend: pebble.New(pebble.Options{}), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Run(context.Background(), 4, nil); err != nil {
		t.Fatal(err)
	}
	want := []seen{{false, false}, {true, true}, {false, false}, {true, true}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("downstream saw %+v; want %+v", got, want)
	}
}

// nameWords joins each word with its name in the global table "names",
// read from topic "word-names" (an inner join: a word without a name
// gives nothing).
func nameWords() *eddy.Topology {
	t := eddy.NewTopology()
	in := eddy.Source(t, "in", serde.Int64(), serde.String())
	names := eddy.GlobalTableFrom(t, "word-names", "names", serde.String(), serde.String())
	named := eddy.JoinGlobal(in, names, func(_ int64, w string) string { return w }, eddy.InnerJoin,
		func(_ int64, w string, name string, _ bool) string { return w + "=" + name })
	eddy.To(named, "out", serde.Int64(), serde.String())
	return t
}

// A global table is loaded from Config.Globals before the run, its
// records applied in order (a nil value deletes), and read by the join.
func TestRunnerLoadsGlobalTables(t *testing.T) {
	rt, err := plan.Build(nameWords(), eddy.Config{AppID: "local-test"})
	if err != nil {
		t.Fatal(err)
	}
	var recs []local.Record
	for k := range 7 {
		recs = append(recs, local.Record{Key: fmt.Appendf(nil, "w%d", k), Value: fmt.Appendf(nil, "name%d", k)})
	}
	recs = append(recs,
		local.Record{Key: []byte("w2"), Value: []byte("two")}, // replaces name2
		local.Record{Key: []byte("w6")})                       // deletes w6
	got := map[string]int{}
	sink := func(_ string, _, value []byte, _ int64) { got[string(value)]++ }
	r, err := local.New(rt, []local.Source{&words{failAt: -1}}, local.Config{Backend: pebble.New(pebble.Options{}), Dir: t.TempDir(),
		Sink: sink, Globals: map[string][]local.Record{"word-names": recs}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Run(context.Background(), 70, nil); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"w0=name0": 10, "w1=name1": 10, "w2=two": 10, "w3=name3": 10, "w4=name4": 10, "w5=name5": 10}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("joined %v; want %v", got, want)
	}
}

// Records for a global table's topic must be given, and only for one.
func TestRunnerRefusesMissingOrStrayGlobals(t *testing.T) {
	rt, err := plan.Build(nameWords(), eddy.Config{AppID: "local-test"})
	if err != nil {
		t.Fatal(err)
	}
	for name, globals := range map[string]map[string][]local.Record{
		"missing": nil,
		"stray":   {"word-names": nil, "other": nil},
	} {
		r, err := local.New(rt, []local.Source{&words{failAt: -1}}, local.Config{Backend: pebble.New(pebble.Options{}), Dir: t.TempDir(), Globals: globals})
		if err == nil {
			r.Close()
			t.Errorf("%s: New accepted Globals %v", name, globals)
			continue
		}
		t.Logf("%s: %v", name, err)
	}
}
