package runtime

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/eddy-streams/eddy/internal/harness/verify"
	"github.com/eddy-streams/eddy/internal/testutil"
	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/pebble"
)

// TestStandbyYieldsToActive: a process's standby of a task stops when a
// worker of the process acquires the task and hands its open database
// over, with what it applied; it stays away while the task is open and
// reopens from there once the worker released the task. A standby whose
// task the member's assignment makes active is kept for that hand-over; one
// acquired and never taken over is closed by release (Pebble locks its
// directory: a database left open would make the next open fail).
func TestStandbyYieldsToActive(t *testing.T) {
	p, err := newPlan("count", counting())
	if err != nil {
		t.Fatal(err)
	}
	backend := pebble.New(pebble.Options{})
	cfg := Config{AppID: "count", StateDir: t.TempDir(), Backend: backend, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s := newStandbys(cfg, p)
	s.startDelay = 0
	defer s.closeAll()
	id := TaskID{0, 1}
	s.assign("w0", []TaskID{id, {5, 0}}, nil) // sub-topology 5 does not exist: ignored
	s.reconcile()
	if len(s.tasks) != 1 || s.tasks[id] == nil {
		t.Fatalf("standbys %v, want only %s", s.tasks, id)
	}
	// The standby applied something before the task moves here.
	offsets := state.NewOffsets()
	offsets.Changelog["counts"] = 42
	st := s.tasks[id]
	st.batch = state.Batch{Writes: []state.Write{{Store: "counts", Key: []byte("k"), Value: []byte("v")}}, Offsets: offsets}
	st.ends = map[string]int64{"counts": 50}
	if !st.flush() || st.lag.Load() != 8 {
		t.Fatalf("flush: lag %d, want 8", st.lag.Load())
	}

	// The assignment makes the task active in w0: the standby waits for
	// the hand-over instead of closing.
	s.assign("w0", nil, []TaskID{id})
	s.reconcile()
	if s.tasks[id] == nil {
		t.Fatal("the standby of a task about to become active here closed before its worker took it over")
	}
	s.acquire(id)
	db, got, ok := s.handOver(id)
	if !ok || got.Changelog["counts"] != 42 {
		t.Fatalf("hand-over: ok %v, offsets %v; want the standby's database at changelog offset 42", ok, got.Changelog)
	}
	if v, found, err := db.Get("counts", []byte("k")); err != nil || !found || string(v) != "v" {
		t.Fatalf("the handed-over database lacks the standby's write: %q %v %v", v, found, err)
	}
	if _, _, again := s.handOver(id); again {
		t.Fatal("a database handed over twice")
	}
	s.assign("w0", []TaskID{id}, nil)
	s.reconcile()
	if s.tasks[id] != nil {
		t.Fatal("the standby reopened while the task is active in the process")
	}
	if lags := s.lags(); len(lags) != 0 {
		t.Fatalf("lags of an active task reported as a standby's: %v", lags)
	}
	db.Close()
	s.release(id)
	s.reconcile()
	if s.tasks[id] == nil || s.tasks[id].applied.Changelog["counts"] != 42 {
		t.Fatalf("after release the standby should reopen at offset 42: %v", s.tasks[id])
	}

	// Acquired, then the open failed elsewhere: release closes the
	// database, and the directory opens again.
	s.acquire(id)
	s.release(id)
	s.assign("w0", nil, nil)
	s.reconcile()
	if len(s.tasks) != 0 {
		t.Fatalf("standbys no assignment wants: %v", s.tasks)
	}
	dir := filepath.Join(cfg.StateDir, cfg.AppID, id.String())
	again, err := backend.Open(dir)
	if err != nil {
		t.Fatalf("the task's database stayed open: %v", err)
	}
	again.Close()
}

// TestStandbyOpensAfterItsStartDelay: a standby opens only once it has been
// wanted for the start delay, so that the tasks a rebalance moves do not
// compete with new standbys' database opens and changelog reads.
func TestStandbyOpensAfterItsStartDelay(t *testing.T) {
	p, err := newPlan("count", counting())
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{AppID: "count", StateDir: t.TempDir(), Backend: pebble.New(pebble.Options{}), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s := newStandbys(cfg, p)
	s.startDelay = time.Hour
	defer s.closeAll()
	id := TaskID{0, 0}
	s.assign("w0", []TaskID{id}, nil)
	s.reconcile()
	if len(s.tasks) != 0 {
		t.Fatal("a standby opened before its start delay")
	}
	s.wantedSince[id] = time.Now().Add(-time.Hour) // as if wanted an hour ago
	s.reconcile()
	if s.tasks[id] == nil {
		t.Fatal("a standby wanted for its start delay did not open")
	}
	s.assign("w0", nil, nil)
	s.reconcile()
	if len(s.tasks) != 0 || len(s.wantedSince) != 0 {
		t.Fatalf("an unwanted standby stayed: %v %v", s.tasks, s.wantedSince)
	}
}

// standbyWatch records what the standby tasks of one instance applied.
type standbyWatch struct {
	mu      sync.Mutex
	applied map[TaskID]state.Offsets
}

func (sw *standbyWatch) hooks() *testHooks {
	return &testHooks{standbyApplied: func(id TaskID, o state.Offsets, _ int64) {
		sw.mu.Lock()
		defer sw.mu.Unlock()
		if sw.applied == nil {
			sw.applied = map[TaskID]state.Offsets{}
		}
		sw.applied[id] = o
	}}
}

func (sw *standbyWatch) get() map[TaskID]state.Offsets {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	out := map[TaskID]state.Offsets{}
	for id, o := range sw.applied {
		out[id] = o
	}
	return out
}

// restoreWatch records, per task, the offsets each restore covered.
type restoreWatch struct {
	mu   sync.Mutex
	runs map[TaskID][]int64
}

func (rw *restoreWatch) report(p RestoreProgress) {
	if !p.Done {
		return
	}
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.runs == nil {
		rw.runs = map[TaskID][]int64{}
	}
	rw.runs[p.Task] = append(rw.runs[p.Task], p.Offsets)
}

func (rw *restoreWatch) of(id TaskID) []int64 {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return append([]int64(nil), rw.runs[id]...)
}

// TestStandbyTakesOverWithATail runs two instances with one standby per
// task: b's standby of a's task follows the changelog while a runs, up to
// its end and the input offsets it reflects. When a stops, b takes the task
// over from its standby and replays only what the standby had not applied
// (nothing or a few offsets) instead of the whole changelog, and the
// counts go on exactly. With no standbys the same takeover replays the
// whole changelog, which shows the test can tell.
func TestStandbyTakesOverWithATail(t *testing.T) {
	for _, replicas := range []int{1, 0} {
		t.Run(fmt.Sprintf("standby_replicas=%d", replicas), func(t *testing.T) {
			h := newHarness(t)
			var la, lb testutil.LogBuffer
			ca := h.config(t.TempDir(), &la)
			ca.InstanceID, ca.StandbyReplicas = "a", replicas
			// Small transactions: a changelog of many records.
			ca.CommitRecords = 10
			stopA := h.run(ca)
			stoppedA := false
			defer func() {
				if !stoppedA {
					stopA()
				}
			}()
			waitLog(t, &la, "task assigned", 2)

			var watch standbyWatch
			var restores restoreWatch
			cb := h.config(t.TempDir(), &lb)
			cb.InstanceID, cb.StandbyReplicas, cb.CommitRecords = "b", replicas, 10
			cb.hooks, cb.OnRestoreProgress = watch.hooks(), restores.report
			stopB := h.run(cb)
			defer stopB()
			waitLog(t, &lb, "task assigned", 1)
			waitLog(t, &la, "task revoked", 1)
			n := 0
			for ; n < 2000; n += 100 {
				h.produce(n, 100)
			}
			h.waitOutputs(n)

			// a's task is the one b did not get.
			var moved TaskID
			for _, id := range []TaskID{{0, 0}, {0, 1}} {
				if !strings.Contains(lb.String(), "task="+id.String()+" input_offsets") {
					moved = id
				}
			}
			changelog := ChangelogTopic(ca.AppID, "counts")
			cl := h.client()
			defer cl.Close()
			adm := kadm.NewClient(cl)
			ctx := context.Background()
			ends, err := adm.ListCommittedOffsets(ctx, changelog)
			if err != nil {
				t.Fatal(err)
			}
			end, _ := ends.Lookup(changelog, moved.Partition)
			inEnds, err := adm.ListEndOffsets(ctx, "in")
			if err != nil {
				t.Fatal(err)
			}
			inEnd, _ := inEnds.Lookup("in", moved.Partition)
			if end.Offset < 200 || inEnd.Offset < 500 {
				t.Fatalf("task %s: changelog end %d, input end %d: the workload is too small to tell a tail from a full restore", moved, end.Offset, inEnd.Offset)
			}
			if replicas > 0 {
				waitFor(t, fmt.Sprintf("b's standby of %s to reach changelog offset %d and input offset %d", moved, end.Offset, inEnd.Offset), func() bool {
					o, ok := watch.get()[moved]
					return ok && o.Changelog["counts"] >= end.Offset && o.Input[state.TopicPartition{Topic: "in", Partition: moved.Partition}] == inEnd.Offset
				})
			} else if len(watch.get()) > 0 {
				t.Fatalf("standbys ran with StandbyReplicas 0: %v", watch.get())
			}

			stopA()
			stoppedA = true
			waitLog(t, &lb, "task="+moved.String()+" input_offsets", 1)
			h.produce(n, 100)
			outs := h.waitOutputs(n + 100)
			if e := check(outs, n+100); !e.ok() {
				t.Fatalf("after the takeover: %+v", e)
			}
			replayed := int64(0)
			for _, r := range restores.of(moved) {
				replayed += r
			}
			t.Logf("task %s: changelog of %d offsets; b's takeover replayed %d (restores %v)", moved, end.Offset, replayed, restores.of(moved))
			if replicas > 0 && replayed*10 > end.Offset {
				t.Fatalf("b replayed %d of %d changelog offsets of %s: its standby should have left only a tail", replayed, end.Offset, moved)
			}
			if replicas == 0 && replayed < end.Offset {
				t.Fatalf("without a standby b replayed %d of %d changelog offsets of %s; want them all", replayed, end.Offset, moved)
			}
			all, err := verify.ReadAll(ctx, h.seeds, "out")
			if err != nil {
				t.Fatal(err)
			}
			if e := check(all, n+100); !e.ok() {
				t.Fatalf("%+v", e)
			}
		})
	}
}

// waitFor polls cond until it holds, failing after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestStandbyWorkersOfOneProcessShareTasks: with standbys the assignment
// lets a task move for balance only to a member with a warm standby of it,
// but the workers of one process share the task directories, so the second
// worker of an instance takes its share at once; it once waited for a
// warmup that no process could host, probing forever. Records then come
// out exactly.
func TestStandbyWorkersOfOneProcessShareTasks(t *testing.T) {
	h := newHarness(t)
	var log testutil.LogBuffer
	cfg := h.config(t.TempDir(), &log)
	cfg.Workers, cfg.StandbyReplicas = 2, 1
	stop := h.run(cfg)
	defer stop()
	waitFor(t, "both workers to run a task", func() bool {
		l := log.String()
		return strings.Contains(l, `msg="task assigned" worker=0`) && strings.Contains(l, `msg="task assigned" worker=1`)
	})
	h.produce(0, 100)
	if e := check(h.waitOutputs(100), 100); !e.ok() {
		t.Fatalf("%+v", e)
	}
}
