package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/pebble"
)

// TestInspectCorrupt runs `eddy inspect` (the built binary, so that a
// panic shows as what a user gets) on a state directory with one healthy
// task database and one whose table has a flipped byte: the command names
// the corrupt one, says what happens to it, exits 1, and prints no stack
// trace; the healthy one is still listed.
func TestInspectCorrupt(t *testing.T) {
	stateDir := t.TempDir()
	for _, task := range []string{"0_0", "0_1"} {
		writeTable(t, filepath.Join(stateDir, "ledger", task))
	}
	flipByte(t, filepath.Join(stateDir, "ledger", "0_1"))

	bin := filepath.Join(t.TempDir(), "eddy")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(context.Background(), bin, "inspect", "--state-dir", stateDir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit code %d (%v), want 1", code, err)
	}
	all := stdout.String() + stderr.String()
	for _, bad := range []string{"panic", "goroutine", ".go:"} {
		if strings.Contains(all, bad) {
			t.Errorf("the output shows %q: a stack trace, not a report", bad)
		}
	}
	if !strings.Contains(stderr.String(), "corrupt") || !strings.Contains(stderr.String(), "ledger/0_1") || strings.Contains(stderr.String(), "ledger/0_0") {
		t.Errorf("stderr does not name ledger/0_1 (only) as corrupt: %q", stderr.String())
	}
	if !strings.Contains(stdout.String(), "0_0") || !strings.Contains(stdout.String(), "accounts") {
		t.Errorf("the healthy database is not listed: %q", stdout.String())
	}
}

// writeTable writes a task database of store "accounts" through
// state/pebble, more than its memtable holds, so that its keys are in a
// table file.
func writeTable(t *testing.T, dir string) {
	t.Helper()
	b := pebble.New(pebble.Options{MemTableSize: 1 << 20})
	defer b.Close()
	db, err := b.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for n := range 3 {
		batch := &state.Batch{Offsets: state.Offsets{
			Input:      map[state.TopicPartition]int64{{Topic: "payments", Partition: 0}: int64(n)},
			Changelog:  map[string]int64{"accounts": int64(n)},
			StreamTime: state.NoStreamTime,
		}}
		for i := range 10_000 {
			batch.Writes = append(batch.Writes, state.Write{Store: "accounts", Key: fmt.Appendf(nil, "k%05d", i), Value: bytes.Repeat([]byte{byte('a' + n)}, 100)})
		}
		if err := db.Apply(batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// flipByte flips a byte a third into every table of the database in dir.
func flipByte(t *testing.T, dir string) {
	t.Helper()
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) == 0 {
		t.Fatalf("no table in %s", dir)
	}
	for _, path := range tables {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/3] ^= 0xff
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
