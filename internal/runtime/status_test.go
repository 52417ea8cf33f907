package runtime

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/state/pebble"
)

// TestStatusFollowsTheBoards drives two workers' boards and a standby
// through the states a rebalance and a restore take them, and checks what
// Status and Ready report at each step.
func TestStatusFollowsTheBoards(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{
		AppID: "count", Brokers: []string{"127.0.0.1:1"}, StateDir: dir, InstanceID: "i1", Workers: 2,
		CommitInterval: time.Second, CommitRecords: 1, SessionTimeout: time.Second, TransactionTimeout: time.Second,
		Backend: pebble.New(pebble.Options{}), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	in, err := New(cfg, counting())
	if err != nil {
		t.Fatal(err)
	}
	states := func(s InstanceStatus) string {
		var out []string
		for _, ts := range s.Tasks {
			out = append(out, ts.ID+":"+ts.State)
		}
		return strings.Join(out, " ")
	}
	check := func(step string, wantReady bool, wantRestoring []string, wantTasks string) InstanceStatus {
		t.Helper()
		s := in.Status()
		ready, reason, restoring := in.Ready()
		if ready != wantReady || s.Ready != wantReady || !slices.Equal(restoring, wantRestoring) || !slices.Equal(s.Restoring, wantRestoring) {
			t.Errorf("%s: ready %v (%q), restoring %v; want ready %v, restoring %v", step, ready, reason, restoring, wantReady, wantRestoring)
		}
		if !ready && reason == "" {
			t.Errorf("%s: not ready without a reason", step)
		}
		if got := states(s); got != wantTasks {
			t.Errorf("%s: tasks %q, want %q", step, got, wantTasks)
		}
		return s
	}

	check("before Run", false, nil, "")
	in.phase.Store(phaseRunning)
	if s := check("running, nobody joined", false, nil, ""); !strings.Contains(s.NotReady, "i1-w0") {
		t.Errorf("not ready reason %q does not name the members that have not joined", s.NotReady)
	}
	w0, w1 := in.boards[0], in.boards[1]
	w0.assign([]TaskID{{0, 0}})
	w1.assign(nil) // joined with nothing to do
	check("assigned", false, []string{"0_0"}, "0_0:restoring")

	bt := w0.open(TaskID{0, 0})
	w0.progress(bt, RestoreProgress{Task: TaskID{0, 0}, Offsets: 200, OffsetsDone: 50, Elapsed: time.Second})
	s := check("restoring", false, []string{"0_0"}, "0_0:restoring")
	if r := s.Tasks[0].Restore; r == nil || r.Percent != 25 || r.ETASeconds != 3 || r.Offsets != 200 {
		t.Errorf("restore progress %+v, want 25%% of 200 offsets, 3s left", r)
	}
	if s.Tasks[0].Worker != 0 || len(s.Tasks[0].Stores) != 1 || s.Tasks[0].Stores[0].Changelog != "count-counts-changelog" {
		t.Errorf("task %+v", s.Tasks[0])
	}

	bt.streamTime.Store(1234)
	w0.set(bt, TaskRunning)
	if err := os.MkdirAll(filepath.Join(dir, "count", "0_0"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "count", "0_0", "data"), make([]byte, 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	s = check("running", true, nil, "0_0:running")
	if ts := s.Tasks[0]; ts.Restore != nil || ts.StreamTime == nil || *ts.StreamTime != 1234 || ts.StateBytes != 1000 || s.StateBytes != 1000 {
		t.Errorf("running task %+v (stream time %v), instance state bytes %d", ts, ts.StreamTime, s.StateBytes)
	}

	// A standby of the process is listed after the active tasks.
	sb := newStandbys(cfg, in.plan)
	st := sb.newStandbyTask(TaskID{0, 1})
	st.lag.Store(7)
	sb.tasks[st.id] = st
	in.sb.Store(sb)
	s = check("with a standby", true, nil, "0_0:running 0_1:standby")
	if ts := s.Tasks[1]; ts.Worker != -1 || ts.StandbyLag == nil || *ts.StandbyLag != 7 {
		t.Errorf("standby %+v", ts)
	}

	// A rebalance takes 0_0 away and gives 0_1 to w1: closing is not
	// restoring, the new task is.
	w0.set(bt, TaskClosing)
	w1.assign([]TaskID{{0, 1}})
	check("rebalancing", false, []string{"0_1"}, "0_0:closing 0_1:restoring 0_1:standby")
	w0.closed(TaskID{0, 0}, bt)
	w0.assign(nil)
	w1.drop([]TaskID{{0, 1}}) // revoked before its restore began
	check("revoked", true, nil, "0_1:standby")

	w1.reset() // the session ended
	check("session ended", false, nil, "0_1:standby")
	in.phase.Store(phaseStopped)
	if s := check("stopped", false, nil, "0_1:standby"); s.State != InstanceStopped {
		t.Errorf("state %s after Run", s.State)
	}
}
