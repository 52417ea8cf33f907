package local_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/harness/local"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/internal/plan"
	"github.com/eddy-streams/eddy/internal/runtime"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/state/pebble"
)

// wordWindows re-keys records by word (a repartition), counts them in
// all and per 100 ms window, final results only, with no grace: a
// record that reached a window's task after a later one had closed it
// would be dropped, and the counts would differ. A poison record fails
// the count, downstream of the repartition: other records of its round
// are counted by then, in the open transaction.
func wordWindows() runtime.Topology {
	t := eddy.NewTopology()
	in := eddy.Source(t, "in", serde.Int64(), serde.String())
	g := eddy.GroupBy(in, func(_ int64, w string) string { return w }, "by-word", serde.String(), serde.String())
	counts := eddy.Aggregate(g, "counts", func() int64 { return 0 }, func(_ string, w string, n int64) int64 {
		if w == "poison" {
			panic("poison record")
		}
		return n + 1
	}, serde.Int64())
	eddy.To(eddy.ToStream(counts), "out", serde.String(), serde.Int64())
	windows := eddy.WindowCount(eddy.WindowedBy(g, eddy.TumblingWindows(100*time.Millisecond).WithGrace(0)).Emit(eddy.EmitFinal), "windows")
	eddy.To(eddy.Map(eddy.ToStream(windows), func(k eddy.Windowed[string], n int64) (string, int64) {
		return fmt.Sprintf("%s@%d", k.Key, k.Window.Start), n
	}), "window-out", serde.String(), serde.Int64())
	rt, err := plan.Build(t, eddy.Config{AppID: "local-test"})
	if err != nil {
		panic(err)
	}
	return rt
}

// outputs collects what a runner's sink receives, from any goroutine,
// and forgets what the last commit does not cover (a failed run's).
type outputs struct {
	mu        sync.Mutex
	recs      []string
	committed int
}

func (o *outputs) sink(topic string, key, value []byte, ts int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.recs = append(o.recs, fmt.Sprintf("%s %s=%d @%d", topic, key, int64(binary.BigEndian.Uint64(value)), ts))
}

func (o *outputs) progress(int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.committed = len(o.recs)
}

func (o *outputs) dropUncommitted() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.recs = o.recs[:o.committed]
}

func (o *outputs) sorted() []string { return slices.Sorted(slices.Values(o.recs)) }

// openWorkers opens a runner of topo with a words source per worker.
func openWorkers(t *testing.T, topo runtime.Topology, dir string, workers int, failAt int64, out *outputs) (*local.Runner, []*words) {
	t.Helper()
	sources := make([]local.Source, workers)
	ws := make([]*words, workers)
	for w := range sources {
		ws[w] = &words{failAt: failAt}
		sources[w] = ws[w]
	}
	r, err := local.New(topo, sources, local.Config{Backend: pebble.New(pebble.Options{}), Dir: dir, CommitInterval: time.Millisecond, Sink: out.sink})
	if err != nil {
		t.Fatal(err)
	}
	return r, ws
}

// finalState reads every store of every task under dir: the union over
// partitions, sorted, each entry once (an entry of the task's own, as a
// window store's mark of what it emitted, is in every partition). It
// checks that each partition holds the counts of the words whose key
// Kafka's default partitioner puts on it, and of some.
func finalState(t *testing.T, topo runtime.Topology, dir string, workers int) []string {
	t.Helper()
	backend := pebble.New(pebble.Options{})
	defer backend.Close()
	var kvs []string
	for s, sub := range topo.Subtopologies {
		for p := range workers {
			db, err := backend.Open(filepath.Join(dir, runtime.TaskID{Subtopology: s, Partition: int32(p)}.String()))
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range sub.Stores {
				words := 0
				err := db.Scan(st.Name, nil, nil, func(k, v []byte) error {
					kvs = append(kvs, fmt.Sprintf("%s %x=%x", st.Name, k, v))
					if st.Name != "counts" {
						return nil
					}
					words++
					if want := kafka.KeyPartition(k, int32(workers)); want != int32(p) {
						return fmt.Errorf("the count of %q is in partition %d, not its key's %d", k, p, want)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if st.Name == "counts" && words == 0 {
					t.Fatalf("partition %d of %d counts no word", p, workers)
				}
			}
			db.Close()
		}
	}
	slices.Sort(kvs)
	return slices.Compact(kvs)
}

// runWords runs records [0, n) and ends the input, then closes the runner.
func runWords(t *testing.T, r *local.Runner, out *outputs, n int64) {
	t.Helper()
	if err := r.Run(context.Background(), n, out.progress); err != nil {
		t.Fatal(err)
	}
	if err := r.EndOfInput(eddy.EndOfInputTime); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// With 2 and 3 workers, the topology runs over as many partitions, and
// its output (as a multiset: the workers' outputs interleave) and its
// final state (the union of the partitions') are the one worker's.
func TestParallelRunnerMatchesOneWorker(t *testing.T) {
	topo := wordWindows()
	const n = 20_000
	var want outputs
	dir := t.TempDir()
	r, _ := openWorkers(t, topo, dir, 1, -1, &want)
	runWords(t, r, &want, n)
	wantState := finalState(t, topo, dir, 1)
	if !slices.ContainsFunc(want.recs, func(s string) bool { return strings.HasPrefix(s, "window-out w3@19900=") }) {
		t.Fatalf("no final count of the last window in %d outputs", len(want.recs))
	}
	for _, workers := range []int{2, 3} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			var got outputs
			dir := t.TempDir()
			r, _ := openWorkers(t, topo, dir, workers, -1, &got)
			runWords(t, r, &got, n)
			if r.Commits < 2 {
				t.Fatalf("%d commits", r.Commits)
			}
			if diff := firstDiff(got.sorted(), want.sorted()); diff != "" {
				t.Fatalf("%d workers: the output differs from one worker's: %s", workers, diff)
			}
			if diff := firstDiff(finalState(t, topo, dir, workers), wantState); diff != "" {
				t.Fatalf("%d workers: the final state differs from one worker's: %s", workers, diff)
			}
		})
	}
}

// A failed run drops its open transaction on every worker and carries on
// from the last commit; reopened, the runner resumes at its last commit;
// the output is exactly once.
func TestParallelRunnerResumesAfterAFailure(t *testing.T) {
	topo := wordWindows()
	const n = 20_000
	var want outputs
	r, _ := openWorkers(t, topo, t.TempDir(), 1, -1, &want)
	runWords(t, r, &want, n)

	var got outputs
	dir := t.TempDir()
	r, sources := openWorkers(t, topo, dir, 2, 13_000, &got)
	if err := r.Run(context.Background(), n, got.progress); err == nil || !strings.Contains(err.Error(), "poison") {
		t.Fatalf("the poison record at 13000 did not fail the run: %v", err)
	}
	at := r.Next()
	if at > 13_000 || at == 0 {
		t.Fatalf("the state reflects index %d; want a commit before the poison record at 13000", at)
	}
	got.dropUncommitted()
	for _, w := range sources {
		w.failAt = -1
	}
	if err := r.Run(context.Background(), 16_000, got.progress); err != nil {
		t.Fatal(err)
	}
	r.Close()

	r, _ = openWorkers(t, topo, dir, 2, -1, &got)
	if r.Next() != 16_000 {
		t.Fatalf("reopened at %d, want the last commit 16000", r.Next())
	}
	runWords(t, r, &got, n)
	if diff := firstDiff(got.sorted(), want.sorted()); diff != "" {
		t.Fatalf("resumed: the output differs from an uninterrupted run's: %s", diff)
	}
}

// State written by two workers is spread over two partitions: one worker
// would miss half of it.
func TestRunnerRefusesStateOfOtherWorkers(t *testing.T) {
	topo := wordWindows()
	dir := t.TempDir()
	var out outputs
	r, _ := openWorkers(t, topo, dir, 2, -1, &out)
	runWords(t, r, &out, 100)
	_, err := local.New(topo, []local.Source{&words{failAt: -1}}, local.Config{Backend: pebble.New(pebble.Options{}), Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "written by 2 workers, not 1") {
		t.Fatalf("one worker on two workers' state: %v", err)
	}
}

// firstDiff describes the first difference of two sorted lists, or "".
func firstDiff(got, want []string) string {
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			return fmt.Sprintf("%d records, want %d; missing %q", len(got), len(want), want[i])
		case i >= len(want):
			return fmt.Sprintf("%d records, want %d; extra %q", len(got), len(want), got[i])
		case got[i] != want[i]:
			return fmt.Sprintf("%q where %q was expected (%d records, want %d)", got[i], want[i], len(got), len(want))
		}
	}
	return ""
}
