package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/harness/verify"
)

// instance is one ledger process of the scale-out test, with its own
// state directory (and so its own static membership id).
type instance struct {
	argv  []string
	dir   string
	log   *os.File
	child *Child
}

func (in *instance) start(t *testing.T) {
	t.Helper()
	c, err := StartChild(in.argv, in.log, FirstCommitMarker, nil)
	if err != nil {
		t.Fatal(err)
	}
	in.child = c
}

// TestLedgerScaleOut is issue 4's acceptance: ledger processes over 8
// partitions (the first with two workers) scale out 1 → 3 while payments
// flow, are SIGKILLed and
// restarted in rotation (every other restart with an emptied state
// directory, so the task must come back from the changelog), the broker is
// stopped (SIGTERM) and restarted once, and the group scales back to one
// instance; then every balance is checked against a sequential
// computation, and read again with kcat.
func TestLedgerScaleOut(t *testing.T) { testLedgerScaleOut(t, 0) }

// TestLedgerScaleOutWithStandbys is the same with one standby replica per
// task: standbys are placed, warmed up, promoted and dropped as instances
// come, are killed (some with their state dirs wiped) and go, and tasks
// wait for warm standbys before they move; the output must stay exact.
func TestLedgerScaleOutWithStandbys(t *testing.T) { testLedgerScaleOut(t, 1) }

func testLedgerScaleOut(t *testing.T, standbyReplicas int) {
	if testing.Short() {
		t.Skip("scale-out test runs processes for about a minute")
	}
	t.Parallel() // its own broker; mostly waiting on the group (see main_test.go)
	broker := startBrokerProc(t)
	seeds := []string{broker.addr}
	work := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	insts := make([]*instance, 3)
	for i := range insts {
		dir := filepath.Join(work, fmt.Sprintf("ledger-%d", i))
		log, err := os.Create(filepath.Join(work, fmt.Sprintf("ledger-%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		defer log.Close()
		insts[i] = &instance{dir: dir, log: log, argv: []string{eddyBin, "ledger",
			"--brokers", broker.addr, "--state-dir", dir, "--partitions", "8", "--log-level", "info"}}
	}
	// The first instance runs two workers: tasks also move between the
	// workers of one process.
	insts[0].argv = append(insts[0].argv, "--workers", "2")
	for _, in := range insts {
		in.argv = append(in.argv, "--standby-replicas", strconv.Itoa(standbyReplicas))
	}
	defer func() {
		for _, in := range insts {
			if in.child != nil {
				in.child.Kill()
			}
		}
	}()
	logs := func() string {
		s := ""
		for i, in := range insts {
			s += fmt.Sprintf("--- ledger-%d, last lines:\n%s\n", i, tail(in.log.Name(), 15))
		}
		return s
	}

	insts[0].start(t)
	if err := waitTopic(ctx, seeds, outputTopic, nil); err != nil {
		t.Fatal(err)
	}
	gen := &Generator{Seeds: seeds, Topic: inputTopic, Rate: 1000, Accounts: 300, InvalidEvery: 5000, Seed: uint64(time.Now().UnixNano())}
	genDone := make(chan error, 1)
	genCtx, stopGen := context.WithCancel(ctx)
	defer stopGen()
	go func() { genDone <- gen.Run(genCtx) }()

	step := func(d time.Duration) {
		select {
		case <-time.After(d):
		case err := <-genDone:
			t.Fatalf("generator stopped: %v", err)
		}
		for i, in := range insts {
			if in.child == nil {
				continue
			}
			select {
			case <-in.child.Done():
				t.Fatalf("ledger-%d exited on its own: %v\n%s", i, in.child.Err(), logs())
			default:
			}
		}
	}

	// 1 → 3.
	step(3 * time.Second)
	insts[1].start(t)
	insts[2].start(t)
	t.Log("scaled out to 3 instances")

	// Kills in rotation; every other restart on an emptied state dir; the
	// broker restarts once in the middle.
	kills, wiped := 0, 0
	for round := 0; round < 6; round++ {
		step(2500 * time.Millisecond)
		in := insts[round%3]
		in.child.Kill()
		if round%2 == 1 {
			if err := os.RemoveAll(in.dir); err != nil {
				t.Fatal(err)
			}
			wiped++
		}
		in.start(t)
		kills++
		if round == 2 {
			if err := broker.restart(); err != nil {
				t.Fatal(err)
			}
			t.Log("broker restarted")
		}
	}
	t.Logf("%d SIGKILLs, %d of them restarted with an empty state dir", kills, wiped)

	// 3 → 1, still under load.
	step(2 * time.Second)
	for _, in := range insts[1:] {
		if err := in.child.Stop(30 * time.Second); err != nil {
			t.Fatalf("clean stop: %v\n%s", err, logs())
		}
		in.child = nil
	}
	t.Log("scaled in to 1 instance")
	step(3 * time.Second)
	stopGen()
	<-genDone

	// Wait for the last instance to process everything.
	want := gen.Produced() - gen.Invalid()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		outs, err := verify.ReadAll(ctx, seeds, outputTopic)
		if err == nil && int64(len(outs)) >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d balances after 2 minutes (err %v)\n%s", len(outs), want, err, logs())
		}
		step(500 * time.Millisecond)
	}
	if err := insts[0].child.Stop(30 * time.Second); err != nil {
		t.Fatalf("clean stop: %v\n%s", err, logs())
	}
	insts[0].child = nil

	payments, err := verify.ReadAll(ctx, seeds, inputTopic)
	if err != nil {
		t.Fatal(err)
	}
	balances, err := verify.ReadAll(ctx, seeds, outputTopic)
	if err != nil {
		t.Fatal(err)
	}
	rep := verify.Ledger(payments, balances)
	t.Logf("%v", rep)
	for _, e := range rep.Examples {
		t.Log(e)
	}
	if !rep.OK() {
		t.Fatalf("exactly-once violated through scale-out: %v\n%s", rep, logs())
	}
	if rep.Payments < 10000 {
		t.Fatalf("only %d payments went through", rep.Payments)
	}
	checkWithKcat(t, broker.addr, rep.Outputs)
	if standbyReplicas > 0 {
		caughtUp, promoted := 0, 0
		for _, in := range insts {
			b, err := os.ReadFile(in.log.Name())
			if err != nil {
				t.Fatal(err)
			}
			caughtUp += strings.Count(string(b), "standby task caught up")
			promoted += strings.Count(string(b), "standby task becomes active")
		}
		t.Logf("standbys caught up %d times, %d became active", caughtUp, promoted)
		if caughtUp == 0 {
			t.Fatal("no standby ever caught up: the run did not exercise standbys")
		}
	}
}
