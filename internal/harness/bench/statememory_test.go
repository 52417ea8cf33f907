package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStateMemoryChild is the benchmark's child process when the test
// binary is started with StateMemoryChildEnv set; otherwise it skips.
func TestStateMemoryChild(t *testing.T) {
	config := os.Getenv(StateMemoryChildEnv)
	if config == "" {
		t.Skip("the state-memory benchmark's child; runs only when started by it")
	}
	if err := StateMemoryChild(t.Context(), config); err != nil {
		t.Fatal(err)
	}
}

// The whole benchmark, tiny: it samples the child (its RSS, its metrics,
// its state on disk) until every payment is committed, and afterwards the
// child is gone and its directory removed. No figure is checked against a
// threshold: what the run measures is a report, not a pass/fail.
func TestStateMemorySamplesTheChildAndRemovesIt(t *testing.T) {
	var table, lines bytes.Buffer
	const records = 20_000
	res, err := StateMemory(t.Context(), StateMemoryOptions{
		StateMemory: 16 << 20, Keys: 15_000, Records: records, Partitions: 2, Sample: 200 * time.Millisecond, Batch: 2000,
		Child: []string{os.Args[0], "-test.run=^TestStateMemoryChild$", "-test.count=1"},
		Out:   &table, JSON: &lines,
	})
	t.Logf("table (%d bytes):\n%s", table.Len(), table.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Summary())
	if len(res.Samples) == 0 {
		t.Fatal("no samples")
	}
	last := res.Samples[len(res.Samples)-1]
	if last.Committed < records || last.Keys != 15_000 {
		t.Errorf("last sample %+v: want %d payments committed over 15000 accounts", last, records)
	}
	var sawRSS, sawBuffer, sawDisk bool
	for _, s := range res.Samples {
		sawRSS = sawRSS || s.RSSBytes > 0 && s.HWMBytes >= s.RSSBytes
		sawBuffer = sawBuffer || s.BufferBytes > 0
		sawDisk = sawDisk || s.DiskBytes > 0
	}
	if !sawRSS || !sawBuffer || !sawDisk {
		t.Errorf("samples without the child's RSS (%v), write buffer use (%v) or state on disk (%v)", sawRSS, sawBuffer, sawDisk)
	}
	if res.PeakRSS <= 0 || res.RSS100 <= 0 || res.KeyBytes <= 0 {
		t.Errorf("summary without figures: %s", res.Summary())
	}
	// A JSON line per sample, then the summary.
	got := strings.Split(strings.TrimSpace(lines.String()), "\n")
	if len(got) != len(res.Samples)+1 {
		t.Errorf("%d JSON lines for %d samples and a summary", len(got), len(res.Samples))
	}
	var summary StateMemoryResult
	if err := json.Unmarshal([]byte(got[len(got)-1]), &summary); err != nil || summary.Budget != 16<<20 {
		t.Errorf("summary line %q: %v", got[len(got)-1], err)
	}
	if err := syscall.Kill(res.ChildPid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("child %d still there after the run (kill 0: %v)", res.ChildPid, err)
	}
	if _, err := os.Stat(res.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run's directory %s is still there: %v", res.Dir, err)
	}
}

// An error ends the run the same way: the child killed, its directory gone.
func TestStateMemoryCleansUpWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var pid int
	done := make(chan error, 1)
	var res StateMemoryResult
	go func() {
		var err error
		res, err = StateMemory(ctx, StateMemoryOptions{
			StateMemory: 16 << 20, Keys: 1_000_000, Records: 1_000_000, Partitions: 1, Sample: 100 * time.Millisecond,
			Child: []string{os.Args[0], "-test.run=^TestStateMemoryChild$", "-test.count=1"},
			JSON:  jsonProbe{cancel: cancel},
		})
		done <- err
	}()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v, want context.Canceled", err)
	}
	pid = res.ChildPid
	if pid == 0 {
		t.Fatal("no child was started")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("child %d still there after the cancelled run (kill 0: %v)", pid, err)
	}
	if _, err := os.Stat(res.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run's directory %s is still there: %v", res.Dir, err)
	}
}

// jsonProbe cancels the run at its first sample that saw a commit.
type jsonProbe struct{ cancel context.CancelFunc }

func (p jsonProbe) Write(b []byte) (int, error) {
	var s MemorySample
	if json.Unmarshal(b, &s) == nil && s.Committed > 0 {
		p.cancel()
	}
	return len(b), nil
}
