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

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/failpoint"
	"github.com/eddy-streams/eddy/internal/harness/verify"
	"github.com/eddy-streams/eddy/internal/testutil/pgtest"
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
	t.Parallel() // its own broker; mostly waiting out session timeouts (see main_test.go)
	run := runZombie(t, zombieOptions{})
	t.Logf("the thawed zombie noticed it lost its place: %v", lostItsPlace(run.zombieLog))
}

// TestZombieLedgerToPostgresIsFenced is issue 19's zombie test of the
// in-cycle sink: both instances run with --postgres, and the zombie
// freezes itself between PREPARE TRANSACTION and the Kafka commit
// (failpoint commit.before-end), so it holds prepared transactions when
// its successor takes the tasks over. None of its writes may become
// visible: the tables must equal the balances topic (itself checked
// exactly once), one row per account and per balance record, with no
// prepared transaction left.
func TestZombieLedgerToPostgresIsFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("zombie test runs processes for about a minute")
	}
	t.Parallel() // its own broker; mostly waiting out session timeouts (see main_test.go)
	db := pgtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var frozen []string // the zombie's prepared transactions
	run := runZombie(t, zombieOptions{
		postgresDSN: db.DSN(),
		freezeAt:    failpoint.CommitBeforeEnd,
		whileFrozen: func() {
			// The freeze is where it matters only if the zombie holds
			// prepared transactions.
			var err error
			if frozen, err = preparedGIDs(ctx, db.DSN()); err != nil {
				t.Fatal(err)
			}
			if len(frozen) == 0 {
				t.Fatalf("the zombie froze at %s holding no prepared transaction", failpoint.CommitBeforeEnd)
			}
			t.Logf("the frozen zombie holds %d prepared transactions, e.g. %s", len(frozen), frozen[0])
		},
	})
	// Its Kafka transaction never committed, so the successor, opening
	// the tasks while the zombie was still frozen, must have rolled each
	// one back.
	rolledBack := 0
	for _, gid := range frozen {
		if strings.Contains(run.successorLog, "gid="+gid+" outcome=rollback") {
			rolledBack++
		} else {
			t.Errorf("the successor did not roll back the frozen zombie's prepared transaction %s", gid)
		}
	}
	t.Logf("the successor rolled back %d of the frozen zombie's %d prepared transactions", rolledBack, len(frozen))
	pg, err := VerifyPostgres(ctx, db.DSN(), run.outputs)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range pg.Examples {
		t.Log(e)
	}
	if !pg.OK() {
		t.Fatalf("PostgreSQL tables after the zombie: %v", pg)
	}
	t.Logf("PostgreSQL: %v", pg)
	// How the zombie learnt it was fenced depends on what it did first
	// once thawed: its Kafka commit refused, or a prepare or COMMIT
	// PREPARED refused by the task's raised epoch (eddy.ErrSinkFenced).
	for _, line := range strings.Split(run.zombieLog, "\n") {
		if strings.Contains(line, eddy.ErrSinkFenced.Error()) {
			t.Logf("the thawed zombie's sink was refused as fenced: %s", line)
			return
		}
	}
	t.Logf("no prepare or COMMIT PREPARED of the thawed zombie was refused as fenced; it noticed it lost its place through Kafka: %v", lostItsPlace(run.zombieLog))
}

// lostItsPlace reports whether a zombie's log shows it noticed that it
// lost its tasks.
func lostItsPlace(log string) bool {
	return regexp.MustCompile(`session failed|fenced|aborted|task revoked`).MatchString(log)
}

// zombieOptions are what the zombie tests vary.
type zombieOptions struct {
	// postgresDSN, when set, runs both instances with --postgres.
	postgresDSN string
	// freezeAt, when set, is the failpoint (internal/failpoint) where
	// the zombie freezes itself (its ":stop" form, on the 20th hit);
	// otherwise the test SIGSTOPs it 2 s after its first commit,
	// wherever it is.
	freezeAt string
	// whileFrozen, when set, runs once the zombie is frozen, before its
	// successor starts.
	whileFrozen func()
}

// zombieRun is what a zombie run leaves for its test to check further.
type zombieRun struct {
	// outputs is the balances topic, already checked exactly once
	// against the payments.
	outputs                 []*kgo.Record
	zombieLog, successorLog string
}

// runZombie runs a ledger instance (the zombie) while payments flow,
// freezes it past its session timeout, starts a successor and waits for
// it to own all 4 tasks, thaws the zombie, and stops both once every
// payment has its balance; then it checks the balances topic exactly once.
func runZombie(t *testing.T, opts zombieOptions) zombieRun {
	broker := startBrokerProc(t)
	work := t.TempDir()
	ledger := func(name string, env ...string) (*Child, chan time.Time, string) {
		logPath := filepath.Join(work, name+".log")
		logf, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { logf.Close() })
		marks := make(chan time.Time, 16)
		argv := []string{eddyBin, "ledger", "--brokers", broker.addr,
			"--state-dir", filepath.Join(work, name), "--partitions", "4"}
		if opts.postgresDSN != "" {
			argv = append(argv, "--postgres", opts.postgresDSN)
		}
		c, err := StartChildEnv(argv, env, logf, FirstCommitMarker, marks)
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
	var zenv []string
	if opts.freezeAt != "" {
		zenv = []string{failpoint.Env + "=" + opts.freezeAt + "@20:stop"}
	}
	zombie, zmarks, zlog := ledger("zombie", zenv...)
	if err := waitTopic(ctx, []string{broker.addr}, outputTopic, nil); err != nil {
		t.Fatal(err)
	}
	gen := &Generator{Seeds: []string{broker.addr}, Topic: inputTopic, Rate: 500, Accounts: 50, InvalidEvery: 1000, Seed: 7}
	genCtx, stopGen := context.WithCancel(ctx)
	genDone := make(chan error, 1)
	go func() { genDone <- gen.Run(genCtx) }()
	waitMark("zombie", zmarks, time.Minute)

	if opts.freezeAt == "" {
		time.Sleep(2 * time.Second)
		if err := zombie.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		t.Log("zombie frozen; starting its successor")
	} else {
		waitLog(t, zlog, "failpoint "+opts.freezeAt+": stopping", 1, time.Minute)
		t.Logf("the zombie froze itself at %s; starting its successor", opts.freezeAt)
	}
	if opts.whileFrozen != nil {
		opts.whileFrozen()
	}
	successor, smarks, slog := ledger("successor")
	logs := []string{zlog, slog}
	waitMark("successor", smarks, 2*time.Minute)
	// The zombie is a zombie only once its successor owns every task.
	waitLog(t, slog, "task assigned", 4, 2*time.Minute)
	if log, _ := os.ReadFile(zlog); opts.freezeAt != "" && strings.Contains(string(log), "failpoint "+opts.freezeAt+": continued") {
		t.Fatalf("the zombie went on past %s before it was thawed:\n%s", opts.freezeAt, tail(zlog, 30))
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
	deadline := time.Now().Add(2 * time.Minute)
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
	zombieLog, _ := os.ReadFile(zlog)
	successorLog, _ := os.ReadFile(slog)
	return zombieRun{outputs: outputs, zombieLog: string(zombieLog), successorLog: string(successorLog)}
}

// waitLog waits until the log at path holds s n times.
func waitLog(t *testing.T, path, s string, n int, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(200 * time.Millisecond) {
		b, _ := os.ReadFile(path)
		if strings.Count(string(b), s) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has not %d lines with %q after %v:\n%s", path, n, s, within, tail(path, 40))
		}
	}
}

// preparedGIDs lists the prepared transactions of the database at dsn.
func preparedGIDs(ctx context.Context, dsn string) ([]string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT gid FROM pg_prepared_xacts ORDER BY gid`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
