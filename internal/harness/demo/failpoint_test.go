package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/failpoint"
	"github.com/eddy-streams/eddy/internal/harness/verify"
)

// TestCrashAtEachFailpoint crashes the ledger (a real process, SIGKILLed
// by itself) at each failpoint of the commit cycle, the checkpoint upload
// and the restore, one by one, each on its own topics while payments flow;
// restarts it without the failpoint; and checks every balance exactly once
// and every malformed payment exactly once in the dead-letter topic.
func TestCrashAtEachFailpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	broker := startBrokerProc(t)
	for i, point := range failpoint.Points {
		t.Run(point, func(t *testing.T) {
			t.Parallel() // each point has its own topics and app on the shared broker
			crashAtFailpoint(t, broker.addr, i, point)
		})
	}
}

func crashAtFailpoint(t *testing.T, addr string, i int, point string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	input, output := fmt.Sprintf("payments-%d", i), fmt.Sprintf("balances-%d", i)
	argv := []string{eddyBin, "ledger", "--brokers", addr, "--state-dir", filepath.Join(dir, "state"),
		"--input", input, "--output", output, "--app-id", fmt.Sprintf("fp-%d", i), "--partitions", "4",
		"--checkpoint-url", "file://" + filepath.Join(dir, "checkpoints"), "--checkpoint-interval", "300ms"}
	logf, err := os.Create(filepath.Join(dir, "ledger.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	start := func(env ...string) *Child {
		c, err := StartChildEnv(argv, env, logf, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// The restore point needs a restore of more than one batch (10,000
	// changelog records per task): a first run builds that state, which
	// is then wiped.
	rate, accounts, secs := 1500, 300, 6
	if point == failpoint.RestoreMid {
		rate, accounts, secs = 12000, 60000, 6
	}
	gen := &Generator{Seeds: []string{addr}, Topic: input, Rate: rate, Accounts: accounts, InvalidEvery: 500, Seed: uint64(time.Now().UnixNano())}
	if err := waitTopicCreatedBy(ctx, t, start, addr, output); err != nil {
		t.Fatal(err)
	}
	genCtx, stopGen := context.WithTimeout(ctx, time.Duration(secs)*time.Second)
	defer stopGen()
	genDone := make(chan error, 1)
	go func() { genDone <- gen.Run(genCtx) }()

	env := []string{failpoint.Env + "=" + point + "@5"}
	if strings.HasPrefix(point, "checkpoint.") {
		// The 6th hit: in the second round of the four tasks'
		// checkpoints (one every 300 ms), once the first round's have
		// completed, so the restart has one to restore from.
		env = []string{failpoint.Env + "=" + point + "@6"}
	}
	if point == failpoint.RestoreMid {
		// Process everything, stop, wipe the state: the next start
		// restores from the changelog (checkpoints off for it).
		c := start()
		if err := <-genDone; err != nil {
			t.Fatal(err)
		}
		waitBalances(ctx, t, addr, input, output, int(gen.Produced()-gen.Invalid()), c, logf.Name())
		if err := c.Stop(time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(dir, "state")); err != nil {
			t.Fatal(err)
		}
		argv = argv[:len(argv)-4] // no checkpoints: restore from the changelog
		env = []string{failpoint.Env + "=" + point + "@1"}
	}
	c := start(env...)
	select {
	case <-c.Done():
	case <-ctx.Done():
		c.Kill()
		t.Fatalf("the ledger never reached failpoint %s (log %s):\n%s", point, logf.Name(), tail(logf.Name(), 20))
	}
	var exit *exec.ExitError
	if !errors.As(c.Err(), &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the ledger exited with %v, want a SIGKILL at %s:\n%s", c.Err(), point, tail(logf.Name(), 20))
	}
	if log, _ := os.ReadFile(logf.Name()); !strings.Contains(string(log), "failpoint "+point+": crashing") {
		t.Fatalf("the ledger died without reaching %s:\n%s", point, tail(logf.Name(), 20))
	}
	if strings.HasPrefix(point, "checkpoint.") {
		// Restart as a new machine would: from the newest checkpoint
		// the crashed upload left (files without a manifest, or a
		// manifest with old checkpoints not collected), then the tail.
		if err := os.RemoveAll(filepath.Join(dir, "state")); err != nil {
			t.Fatal(err)
		}
	}
	c = start()
	defer c.Kill()
	if point != failpoint.RestoreMid {
		if err := <-genDone; err != nil {
			t.Fatal(err)
		}
	}
	rep := waitBalances(ctx, t, addr, input, output, int(gen.Produced()-gen.Invalid()), c, logf.Name())
	dead, err := verify.ReadAll(ctx, []string{addr}, input+".dlq")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("crash at %s: %v; dead letters %d of %d malformed", point, rep, len(dead), gen.Invalid())
	if log, _ := os.ReadFile(logf.Name()); strings.HasPrefix(point, "checkpoint.") {
		// A checkpoint completed before the crash must be where the
		// restart restores from. Tasks upload concurrently, so the
		// crash may still come before any upload completed (a slow
		// machine): then there is none, and the changelog alone is
		// right.
		beforeCrash, _, _ := strings.Cut(string(log), "failpoint "+point+": crashing")
		switch completed := strings.Contains(beforeCrash, "checkpoint uploaded"); {
		case completed && !strings.Contains(string(log), `source=checkpoint`):
			t.Errorf("after a crash at %s the ledger restored no task from the checkpoint completed before it:\n%s", point, tail(logf.Name(), 30))
		case !completed:
			t.Logf("no checkpoint had completed before the crash at %s: restored from the changelog alone", point)
		}
	}
	if !rep.OK() || len(dead) != int(gen.Invalid()) {
		t.Fatalf("after a crash at %s: %v; dead letters %d, want %d (log %s)", point, rep, len(dead), gen.Invalid(), logf.Name())
	}
}

// waitTopicCreatedBy starts a ledger without failpoints until it has
// created its topics, then stops it: the generator needs the input topic
// with its partition count.
func waitTopicCreatedBy(ctx context.Context, t *testing.T, start func(env ...string) *Child, addr, output string) error {
	c := start()
	defer c.Stop(time.Minute)
	return waitTopic(ctx, []string{addr}, output, nil)
}

// waitBalances waits until output holds want balances (the valid
// payments), then checks them against input.
func waitBalances(ctx context.Context, t *testing.T, addr, input, output string, want int, c *Child, log string) verify.LedgerReport {
	t.Helper()
	for {
		balances, err := verify.ReadAll(ctx, []string{addr}, output)
		if err == nil && len(balances) >= want {
			payments, err := verify.ReadAll(ctx, []string{addr}, input)
			if err != nil {
				t.Fatal(err)
			}
			return verify.Ledger(payments, balances)
		}
		select {
		case <-c.Done():
			t.Fatalf("the ledger exited: %v\n%s", c.Err(), tail(log, 20))
		case <-ctx.Done():
			t.Fatalf("%d balances after the deadline, want %d (%v)\n%s", len(balances), want, err, tail(log, 20))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
