package filesink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/failpoint"
	"github.com/eddy-streams/eddy/internal/testutil/apprun"
	"github.com/eddy-streams/eddy/serde"
)

// The environment of the process test's child app.
const (
	childBrokers = "EDDY_TEST_FILESINK_BROKERS"
	childState   = "EDDY_TEST_FILESINK_STATE"
	childDir     = "EDDY_TEST_FILESINK_DIR"
	// childKillAt makes the child SIGKILL itself when it encodes its
	// Nth record (since it started): a crash mid-transaction, with part
	// files written (some rolled) and not prepared.
	childKillAt = "EDDY_TEST_FILESINK_KILL_AT"
)

const (
	processRecords    = 20_000
	processPartitions = 2
)

// TestFilesChild is the app of TestToThroughKills, run in a child
// process. Run alone it skips.
func TestFilesChild(t *testing.T) {
	addr := os.Getenv(childBrokers)
	if addr == "" {
		t.Skip("the child process of TestToThroughKills")
	}
	cfg := secondPartitions(os.Getenv(childDir))
	cfg.Tasks = processPartitions
	cfg.RollSize = 4 << 10
	killAt, _ := strconv.Atoi(os.Getenv(childKillAt))
	encode, n := cfg.Encode, 0
	cfg.Encode = func(dst []byte, r eddy.Record[string, string]) ([]byte, error) {
		if n++; n == killAt {
			fmt.Fprintln(os.Stderr, "filesink test: SIGKILL at write", n)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		return encode(dst, r)
	}
	topo := eddy.NewTopology()
	To(eddy.Source(topo, "files-in", serde.String(), serde.String()), "files", cfg)
	err := eddy.Run(context.Background(), topo, eddy.Config{
		AppID: "files", Brokers: []string{addr}, StateDir: os.Getenv(childState), InstanceID: "child",
		CommitRecords: 500, // many transactions, so that the kills hit mid-stream
	})
	t.Fatalf("eddy.Run returned: %v", err)
}

// TestToThroughKills is the sink's process test: the app is SIGKILLed in
// each window of the commit cycle (after the sink prepared and before
// the Kafka transaction committed; after it committed and before the
// sink renamed its files; and around them), and while writing a
// transaction's part files, then runs to the end: the visible files hold
// every record exactly once, no in-progress file is left, and the
// partitions that both tasks' stream times passed are marked complete,
// no others.
func TestToThroughKills(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the app as a process six times")
	}
	addr := apprun.StartBroker(t)
	apprun.CreateTopics(t, addr, processPartitions, "files-in")
	var recs []*kgo.Record
	for i := range processRecords {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%97), Value: fmt.Appendf(nil, "v%d", i), Timestamp: time.UnixMilli(int64(i))})
	}
	apprun.Produce(t, addr, "files-in", recs...)
	// The last stream time of each task (partition), so the time that
	// completes the partitions.
	last := map[int32]int64{}
	for _, r := range recs {
		last[r.Partition] = max(last[r.Partition], r.Timestamp.UnixMilli())
	}
	low := min(last[0], last[1])

	dir, state := t.TempDir(), t.TempDir()
	command := func(env ...string) (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFilesChild$", "-test.count=1", "-test.timeout=2m")
		cmd.Env = append(os.Environ(), append(env, childBrokers+"="+addr, childState+"="+state, childDir+"="+dir)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		return cmd, &out
	}
	for _, kill := range []string{
		failpoint.Env + "=commit.before-end@5", failpoint.Env + "=commit.after-end@5", childKillAt + "=1700",
		failpoint.Env + "=commit.after-apply@5", failpoint.Env + "=commit.before-changelog@5",
	} {
		cmd, out := command(kill)
		err := cmd.Run()
		var exit *exec.ExitError
		ws, _ := func() (syscall.WaitStatus, bool) {
			if errors.As(err, &exit) {
				ws, ok := exit.Sys().(syscall.WaitStatus)
				return ws, ok
			}
			return 0, false
		}()
		if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("the app with %s ended with %v, not by its SIGKILL; its output:\n%s", kill, err, out)
		}
		l := list(t, dir)
		t.Logf("killed with %s: %d partitions visible, %d in-progress files left", kill, len(l.lines), len(l.inProgress))
	}
	cmd, out := command()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("the last run's output:\n%s", out)
		}
	})

	var want []string
	for s := int64(0); s*1000+1000 <= low; s++ {
		want = append(want, fmt.Sprint("s=", s))
	}
	slices.Sort(want) // as list sorts them
	for deadline := time.Now().Add(apprun.HangGuard); ; time.Sleep(100 * time.Millisecond) {
		l := list(t, dir)
		seen, n := map[string]int{}, 0
		for _, lines := range l.lines {
			for _, v := range lines {
				if seen[v]++; seen[v] == 2 {
					t.Fatalf("%s is visible twice", v)
				}
				n++
			}
		}
		if n == processRecords && len(l.inProgress) == 0 && strings.Join(l.complete, " ") == strings.Join(want, " ") {
			t.Logf("%d records visible once each in %d partitions, no in-progress file; complete: %d partitions (the tasks' stream time %d)", n, len(l.lines), len(l.complete), low)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records visible, %d in-progress files, complete %v (want %v), after %v", n, processRecords, len(l.inProgress), l.complete, want, apprun.HangGuard)
		}
	}
	// Every record, in the partition of its timestamp.
	l := list(t, dir)
	for _, r := range recs {
		p := fmt.Sprint("s=", r.Timestamp.UnixMilli()/1000)
		if _, ok := slices.BinarySearch(l.lines[p], string(r.Value)); !ok {
			t.Fatalf("%s is not in partition %s", r.Value, p)
		}
	}
}
