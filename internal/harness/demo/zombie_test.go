package demo

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/harness/verify"
)

// TestZombieLedgerIsFenced freezes a ledger instance (SIGSTOP) past its
// session timeout while payments flow, lets a second instance take its
// partitions over, then thaws the zombie (SIGCONT). Whatever the zombie had
// in flight must never become visible: the output must still be exactly one
// correct balance per payment.
func TestZombieLedgerIsFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("zombie test runs processes for about a minute")
	}
	broker := startBrokerProc(t)
	work := t.TempDir()
	ledger := func(name string) (*Child, chan time.Time, string) {
		logPath := filepath.Join(work, name+".log")
		logf, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { logf.Close() })
		marks := make(chan time.Time, 16)
		c, err := StartChild([]string{eddyBin, "ledger", "--brokers", broker.addr,
			"--state-dir", filepath.Join(work, name), "--partitions", "4"}, logf, FirstCommitMarker, marks)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Kill)
		return c, marks, logPath
	}
	waitMark := func(name string, marks chan time.Time, within time.Duration) {
		t.Helper()
		select {
		case <-marks:
		case <-time.After(within):
			t.Fatalf("%s committed no transaction within %v", name, within)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	zombie, zmarks, zlog := ledger("zombie")
	if err := waitTopic(ctx, []string{broker.addr}, outputTopic, nil); err != nil {
		t.Fatal(err)
	}
	gen := &Generator{Seeds: []string{broker.addr}, Topic: inputTopic, Rate: 500, Accounts: 50, InvalidEvery: 1000, Seed: 7}
	genCtx, stopGen := context.WithCancel(ctx)
	genDone := make(chan error, 1)
	go func() { genDone <- gen.Run(genCtx) }()
	waitMark("zombie", zmarks, time.Minute)
	time.Sleep(2 * time.Second)

	if err := zombie.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Log("zombie frozen; starting its successor")
	successor, smarks, slog := ledger("successor")
	logs := []string{zlog, slog}
	waitMark("successor", smarks, 2*time.Minute)
	// The zombie is a zombie only once its successor owns every task.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		b, _ := os.ReadFile(slog)
		if strings.Count(string(b), "task assigned") >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the successor never owned all 4 tasks:\n%s", tail(slog, 40))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Log("the successor owns every task; thawing the zombie")
	if err := zombie.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(8 * time.Second)
	stopGen()
	if err := <-genDone; err != nil {
		t.Fatal(err)
	}

	balances := newCounter([]string{broker.addr}, outputTopic, nil)
	defer balances.close()
	want := gen.Produced() - gen.Invalid()
	deadline = time.Now().Add(2 * time.Minute)
	for balances.count() < want && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
	}
	for i, c := range []*Child{zombie, successor} {
		if err := c.Stop(30 * time.Second); err != nil {
			t.Errorf("clean stop of %s: %v\nlast lines of its log:\n%s", []string{"zombie", "successor"}[i], err, tail(logs[i], 30))
		}
	}
	payments, err := verify.ReadAll(ctx, []string{broker.addr}, inputTopic)
	if err != nil {
		t.Fatal(err)
	}
	outputs, err := verify.ReadAll(ctx, []string{broker.addr}, outputTopic)
	if err != nil {
		t.Fatal(err)
	}
	rep := verify.Ledger(payments, outputs)
	t.Logf("%v", rep)
	for _, e := range rep.Examples {
		t.Log(e)
	}
	if !rep.OK() || rep.Payments < 5000 {
		t.Fatalf("zombie test: %v", rep)
	}
	logText, _ := os.ReadFile(zlog)
	t.Logf("the thawed zombie noticed it lost its place: %v", regexp.MustCompile(`session failed|fenced|aborted|task revoked`).Match(logText))
}
