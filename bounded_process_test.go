package eddy_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/failpoint"
	"github.com/eddy-streams/eddy/internal/harness/verify"
	"github.com/eddy-streams/eddy/serde"
)

// Sizes of TestBoundedThroughKills's input: a click every 10 ms, counted
// per page in 5 s windows.
const (
	boundedClicks = 20_000
	boundedPages  = 20
	boundedWindow = 5_000 // ms
)

// boundedProcessTopology re-keys clicks by page (a repartition topic,
// so two sub-topologies) and writes each page's final count per tumbling
// window, once, to "finals". The grace is longer than the input's span:
// the two upstream tasks interleave their records in the repartition
// topic, and no record is late; and nothing in the input closes a window,
// only the end of the bounded run does.
func boundedProcessTopology() *eddy.Topology {
	topo := eddy.NewTopology()
	clicks := eddy.Source(topo, "clicks", serde.String(), serde.String())
	byPage := eddy.GroupBy(clicks, func(_, page string) string { return page }, "by-page", serde.String(), serde.String())
	ws := eddy.WindowedBy(byPage, eddy.TumblingWindows(boundedWindow*time.Millisecond).WithGrace(10*time.Minute))
	keys := eddy.WindowedSerde(serde.String())
	finals := eddy.Suppress(eddy.WindowCount(ws, "counts"), "finals", eddy.UntilWindowCloses(eddy.BufferConfig{}), keys, serde.Int64())
	eddy.To(eddy.ToStream(finals), "finals", keys, serde.Int64())
	return topo
}

// TestBoundedChild is the app of TestBoundedThroughKills, run bounded in
// a child process (this test binary again) until its end, or until a
// failpoint SIGKILLs it. Run alone it skips.
func TestBoundedChild(t *testing.T) {
	addr := os.Getenv(childBrokers)
	if addr == "" {
		t.Skip("the child process of TestBoundedThroughKills")
	}
	err := eddy.Run(context.Background(), boundedProcessTopology(), eddy.Config{
		AppID: "bounded", Brokers: []string{addr}, StateDir: os.Getenv(childState), InstanceID: "child",
		CommitRecords:    500, // many transactions, so that the failpoints hit mid-stream
		MaxTaskIdle:      time.Second,
		StopAtEndOffsets: true,
	})
	if err != nil {
		t.Fatalf("eddy.Run: %v", err)
	}
}

// TestBoundedThroughKills is the process test of bounded runs: clicks
// loaded before the app starts, the app SIGKILLed twice by failpoints
// (after a commit, before its state applied it; before a commit) and run
// again on the same state directory until it ends by itself. "finals"
// must then hold every page's count of every window, the last ones too,
// which only the end closes, each exactly once.
func TestBoundedThroughKills(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the app as a process three times")
	}
	addr := startBroker(t)
	createTopics(t, addr, 2, "clicks", "finals")
	var clicks []*kgo.Record
	want := map[eddy.Windowed[string]]int64{}
	for i := 0; i < boundedClicks; i++ {
		page, ts := fmt.Sprint("p", i*7%boundedPages), int64(10*i+1)
		r := srec(fmt.Sprint("u", i%50), page)
		r.Timestamp = time.UnixMilli(ts)
		clicks = append(clicks, r)
		start := ts - ts%boundedWindow
		want[eddy.Windowed[string]{Key: page, Window: eddy.Window{Start: start, End: start + boundedWindow}}]++
	}
	produce(t, addr, "clicks", clicks...)

	state := t.TempDir()
	for _, kill := range []string{"commit.after-end@12", "commit.before-end@6", ""} {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestBoundedChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), childBrokers+"="+addr, childState+"="+state, failpoint.Env+"="+kill)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		switch {
		case kill != "" && !killed(err):
			t.Fatalf("the app armed with %s ended with %v, not by its SIGKILL; its output:\n%s", kill, err, out.String())
		case kill == "" && err != nil:
			t.Fatalf("the bounded run did not end by itself: %v; its output:\n%s", err, out.String())
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	recs, err := verify.ReadAll(ctx, []string{addr}, "finals")
	if err != nil {
		t.Fatal(err)
	}
	checkFinals(t, recs, want)
}
