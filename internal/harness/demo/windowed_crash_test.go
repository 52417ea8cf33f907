package demo

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/harness/verify"
)

// TestWindowedSurvivesKills is the crash test of the windowed example:
// `eddy windowed` runs as a real process against `eddy broker` and is
// SIGKILLed at random moments about eight times while timestamped payments
// flow (one in ten out of order within grace, one in two hundred late),
// then closing payments push every partition's stream time past every
// window, and the totals must be exactly the reference's closed windows
// (no duplicate, missing, early or wrong window) and the late-records topic
// exactly the late payments, as read by the Go read_committed reader and by
// kcat.
func TestWindowedSurvivesKills(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs processes for about half a minute")
	}
	broker := startBrokerProc(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const window, grace = 10 * time.Second, 2 * time.Second
	res, err := Run(ctx, Options{
		Brokers:         []string{broker.addr},
		WindowedCommand: []string{eddyBin, "windowed"},
		Window:          window,
		Grace:           grace,
		// Event time runs five times faster than the wall clock: a
		// window closes every two seconds, so kills land before, during
		// and after the emission of closed windows.
		EventSpeed: 5,
		WorkDir:    t.TempDir(),
		Rate:       1000,
		Accounts:   200,
		Partitions: 4,
		Duration:   20 * time.Second,
		CrashEvery: 2200 * time.Millisecond,
		Seed:       uint64(time.Now().UnixNano()),
		Out:        testWriter{t},
	})
	if err != nil {
		t.Fatalf("%v\nwindowed log, last lines:\n%s", err, tail(res.WindowedLog, 40))
	}
	w := res.Windows
	t.Logf("%v; crashes %d; dead letters %d of %d; recoveries %v", w, res.Crashes, res.DeadLetters, res.Invalid, res.WindowedResumes)
	for _, e := range w.Examples {
		t.Log(e)
	}
	if res.Crashes < 5 {
		t.Fatalf("only %d SIGKILLs happened; the test needs at least 5", res.Crashes)
	}
	if !res.OK() {
		t.Fatalf("exactly-once violated: %v, dead letters %d for %d malformed payments (log %s)\n%s", w, res.DeadLetters, res.Invalid, res.WindowedLog, tail(res.WindowedLog, 40))
	}
	// 200 accounts over 100 s of event time in 10 s windows: about 2,000
	// windows; fewer means the workload did not run.
	if w.Expected < 1000 || w.OutOfOrder == 0 || w.Late == 0 || w.Open == 0 {
		t.Fatalf("the workload exercised too little: %v", w)
	}
	checkWindowsWithKcat(t, broker.addr, window, grace, w.Expected, w.Late)
}

// checkWindowsWithKcat reads the payments, the totals and the late records
// with librdkafka's kcat (read_committed), computes the reference from
// kcat's payments and checks kcat's totals and late records against it. CI
// installs kcat; elsewhere the check is skipped when kcat is missing.
func checkWindowsWithKcat(t *testing.T, addr string, window, grace time.Duration, wantWindows, wantLate int) {
	t.Helper()
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("kcat is not installed; .ci/run must install it")
		}
		t.Log("kcat not installed; skipping the non-Go client check")
		return
	}
	read := func(topic string) []*kgo.Record {
		t.Helper()
		// Partition, timestamp, key and value, tab-separated: the JSON
		// of payments and totals has no tab or newline.
		out, err := exec.Command(kcat, "-b", addr, "-C", "-t", topic, "-e", "-q",
			"-X", "isolation.level=read_committed", "-f", "%p\t%T\t%k\t%s\n").Output()
		if err != nil {
			t.Fatalf("kcat %s: %v", topic, err)
		}
		var recs []*kgo.Record
		for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
			if line == "" {
				continue
			}
			f := strings.SplitN(line, "\t", 4)
			if len(f) != 4 {
				t.Fatalf("kcat %s: unexpected line %q", topic, line)
			}
			p, err1 := strconv.ParseInt(f[0], 10, 32)
			ts, err2 := strconv.ParseInt(f[1], 10, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("kcat %s: unexpected line %q", topic, line)
			}
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Timestamp: time.UnixMilli(ts),
				Key: []byte(f[2]), Value: bytes.Clone([]byte(f[3]))})
		}
		return recs
	}
	// kcat interleaves partitions but keeps each one's offset order,
	// which is all the reference needs: stream time is per partition.
	ref := verify.Windowed(read(inputTopic), window, grace)
	rep := ref.Compare(read(totalsTopic))
	rep.CheckLate(read(lateTopic))
	if !rep.OK() || rep.Expected != wantWindows || rep.Outputs != wantWindows || rep.Late != wantLate {
		t.Fatalf("kcat (read_committed): %v, want %d windows and %d late payments, exactly\n%q", rep, wantWindows, wantLate, rep.Examples)
	}
	t.Logf("kcat (read_committed) read %d totals, one per closed window, and %d late payments", rep.Outputs, rep.LateOutputs)
}
