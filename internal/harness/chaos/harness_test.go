package chaos

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/testutil"
)

// eddyBin is the eddy binary the chaos run starts as broker and apps,
// built once by TestMain.
var eddyBin string

func TestMain(m *testing.M) { testutil.MainWithEddy(m, "eddy-chaos-bin-", &eddyBin) }

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.t.Log(l)
	}
	return len(p), nil
}

// TestChaosShort is the CI chaos run: two ledger processes and a windowed
// one against an `eddy broker` process, with every fault kind injected at
// least once on a schedule seeded from the clock (logged: rerun it with
// `eddy chaos --seed N --duration 90s`), then the EosTestDriver checks.
// It fails if eddy was not exactly once; the embedded broker's own gaps
// after a SIGKILL are reported, not failed on.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos run takes about two minutes")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	work := t.TempDir()
	rep, err := Run(ctx, Options{
		EddyBin: eddyBin, WorkDir: work, Seed: seed, Duration: 90 * time.Second,
		Instances: 2, Windowed: true, Out: logWriter{t},
	})
	if rep != nil {
		rep.Print(logWriter{t})
	}
	if err != nil {
		t.Fatalf("chaos run (seed %d): %v", seed, err)
	}
	injected := map[string]int{}
	for _, e := range rep.Events {
		injected[e.Kind]++
	}
	for _, k := range AllKinds {
		if injected[k] == 0 {
			t.Errorf("fault kind %s was never injected", k)
		}
	}
	if rep.Ledger.Payments < 1000 {
		t.Errorf("only %d payments were processed; the run did not work", rep.Ledger.Payments)
	}
	if !rep.OK() {
		for _, name := range []string{"ledger-1.log", "ledger-2.log", "windowed-1.log", "broker.log"} {
			t.Logf("last lines of %s:\n%s", name, tail(filepath.Join(work, name), 30))
		}
		t.Fatalf("exactly-once violated under chaos (seed %d): duplicates %d, losses %d, wrong %d, final state %+v, hanging %v",
			seed, rep.Duplicates(), rep.Losses(), rep.Wrong(), rep.State, rep.Hanging)
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
