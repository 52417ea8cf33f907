//go:build rocksdb

package rocksdb

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/statetest"
)

// crashChildEnv names the directory a child process of
// TestCrashKeepsSyncedApplies applies batches to until it is killed.
const crashChildEnv = "EDDY_ROCKSDB_CRASH_CHILD_DIR"

// TestCrashKeepsSyncedApplies SIGKILLs a process that applies batches as
// fast as it can, and checks that the database it leaves holds every Apply
// that returned, and with each batch its own offsets: never writes without
// their offsets, nor offsets without their writes. (RocksDB cannot run on a
// crashable in-memory file system as Pebble can, so this is the crash test;
// it loses the process, not the page cache.)
func TestCrashKeepsSyncedApplies(t *testing.T) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKeepsSyncedApplies$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A stuck child is killed too, and then falls short of 300.
	stuck := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	defer stuck.Stop()
	// The child prints the number of each Apply after it returned.
	acked := int64(0)
	sc := bufio.NewScanner(out)
	for acked < 300 && sc.Scan() {
		if n, err := strconv.ParseInt(sc.Text(), 10, 64); err == nil {
			acked = n
		}
	}
	_ = cmd.Process.Kill() // fails only if the timer killed it first
	_ = cmd.Wait()
	if acked < 300 {
		t.Fatalf("child acknowledged %d Applies before it was killed; want 300 (scan: %v)", acked, sc.Err())
	}

	d := statetest.Open(t, newBackend(t, Options{}), dir)
	defer d.Close()
	o, err := d.Offsets()
	if err != nil {
		t.Fatal(err)
	}
	applied := o.Changelog["s"]
	if applied < acked {
		t.Fatalf("offsets after the crash reflect %d Applies; %d had returned", applied, acked)
	}
	got := statetest.Scan(t, d, "s", nil, nil)
	if int64(len(got)) != applied {
		t.Fatalf("%d keys after the crash with offsets of Apply %d; want as many keys", len(got), applied)
	}
	for i, kv := range got {
		if want := fmt.Sprintf("k%06d", i+1); kv.Key != want || kv.Value != want {
			t.Fatalf("key %d = %v; want %s=%s", i, kv, want, want)
		}
	}
	t.Logf("killed after %d acknowledged Applies; %d survived", acked, applied)
}

// crashChild applies one batch after another to dir, each with one key and
// offsets counting the batches, and prints each one's number once Apply
// returned. It runs until killed.
func crashChild(dir string) {
	d, err := New(Options{}).Open(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	for i := int64(1); ; i++ {
		k := fmt.Appendf(nil, "k%06d", i)
		o := state.Offsets{Changelog: map[string]int64{"s": i}, Input: map[state.TopicPartition]int64{{Topic: "in", Partition: 0}: i}}
		if err := d.Apply(&state.Batch{Writes: []state.Write{{Store: "s", Key: k, Value: k}}, Offsets: o}); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		fmt.Println(i)
	}
}
