package pgsink

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/internal/testutil"
	"github.com/eddy-streams/eddy/internal/testutil/pgtest"
	"github.com/eddy-streams/eddy/serde"
)

func balanceRow(r eddy.Record[string, int64]) (Row, error) {
	if r.Key == "" {
		return Row{}, errors.New("no account")
	}
	return Row{Values: map[string]any{"account": r.Key, "balance": r.Value}}, nil
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func preparedGIDs(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT gid FROM pg_prepared_xacts ORDER BY gid`)
	if err != nil {
		t.Fatal(err)
	}
	gids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return gids
}

// TestToInTheCycle: records piped in one eddy transaction reach the
// table in one PostgreSQL transaction, prepared then committed; a record
// its Rows refuses, and those whose row the table refuses at prepare (a
// column it lacks, a CHECK constraint, a deferred foreign key) are dead-lettered with the reason
// (the produce-error policy) in that same transaction, and the other rows
// are written; nothing stays prepared.
func TestToInTheCycle(t *testing.T) {
	c := pgtest.Start(t)
	conn := connect(t, c.DSN())
	exec(t, conn, `CREATE TABLE known (account text PRIMARY KEY)`)
	exec(t, conn, `INSERT INTO known VALUES ('a'), ('b'), ('c'), ('d'), ('nick')`)
	exec(t, conn, `CREATE TABLE balances (account text PRIMARY KEY REFERENCES known DEFERRABLE INITIALLY DEFERRED,
		balance bigint NOT NULL CHECK (balance >= 0))`)
	rows := func(r eddy.Record[string, int64]) (Row, error) {
		row, err := balanceRow(r)
		if r.Key == "nick" {
			row.Values["nickname"] = "no such column"
		}
		return row, err
	}
	topo := eddy.NewTopology()
	in := eddy.Source(topo, "balances", serde.String(), serde.Int64())
	To(in, "pg", CycleConfig[string, int64]{DSN: c.DSN(), Table: Table{Name: "balances", Key: []string{"account"}}, Rows: rows, Logger: quiet()})
	d, err := eddytest.New(topo, eddytest.Options{Config: eddy.Config{AppID: "cycle", OnProduceError: eddy.DeadLetter}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	src := eddytest.Input(d, "balances", serde.String(), serde.Int64())
	err = d.Transaction(func() error {
		for i, kv := range []struct {
			k string
			v int64
		}{{"a", 1}, {"b", 2}, {"", 9}, {"a", 3}, {"c", -5}, {"nick", 7}, {"unknown", 8}, {"d", 4}} {
			if err := src.Pipe(kv.k, kv.v, int64(i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(dump(t, conn, "balances", "account"), " "), "account=a,balance=3 account=b,balance=2 account=d,balance=4"; got != want {
		t.Errorf("table %s, want %s", got, want)
	}
	dead, err := eddytest.Output(d, eddy.DeadLetterTopic("balances"), serde.String(), serde.Bytes()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, r := range dead {
		for _, h := range r.Headers {
			if h.Key == eddy.HeaderDLQError {
				reasons[r.Key] = string(h.Value)
			}
		}
	}
	for key, want := range map[string]string{"": "no account", "c": "balances_balance_check", "nick": "nickname", "unknown": "balances_account_fkey"} {
		if !strings.Contains(reasons[key], want) {
			t.Errorf("dead letter of %q: reason %q, want it to name %q", key, reasons[key], want)
		}
	}
	if len(dead) != 4 {
		t.Errorf("%d dead letters (%v), want 4", len(dead), reasons)
	}
	if gids := preparedGIDs(t, conn); len(gids) != 0 {
		t.Errorf("prepared transactions left: %v", gids)
	}
}

func newCycleSink(c *pgtest.Cluster, task string) *cycleSink[string, int64] {
	cfg := CycleConfig[string, int64]{DSN: c.DSN(), Table: Table{Name: "balances", Key: []string{"account"}}, Rows: balanceRow, Timeout: 1, Logger: quiet()}
	return &cycleSink[string, int64]{cfg: cfg, task: eddy.SinkTask{AppID: "app", Sink: "pg", Task: task}, db: &db{dsn: cfg.DSN, timeout: cfg.Timeout, log: quiet()}}
}

func put(t *testing.T, s *cycleSink[string, int64], account string, balance int64) {
	t.Helper()
	if err := s.Write(eddy.Record[string, int64]{Key: account, Value: balance}); err != nil {
		t.Fatal(err)
	}
}

// prepare prepares s's open transaction, which must refuse no row.
func prepare(t *testing.T, s *cycleSink[string, int64]) []byte {
	t.Helper()
	token, refused, err := s.Prepare()
	if err != nil || len(refused) != 0 {
		t.Fatalf("prepare: %v, refused %v", err, refused)
	}
	return token
}

// TestToRecoverAndFence: the two crash windows and a zombie. A task's
// transaction prepared and named by the committed changelog is committed
// by the next owner's Recover; one the changelog does not name (its
// Kafka transaction never committed) is rolled back; the old owner's
// next prepare is refused (fenced), and another task's prepared
// transaction is left alone.
func TestToRecoverAndFence(t *testing.T) {
	c := pgtest.Start(t)
	conn := connect(t, c.DSN())
	exec(t, conn, `CREATE TABLE balances (account text PRIMARY KEY, balance bigint NOT NULL)`)

	old := newCycleSink(c, "0_1")
	if err := old.Recover(nil); err != nil {
		t.Fatal(err)
	}
	put(t, old, "a", 1)
	committedGID := prepare(t, old) // its Kafka transaction commits; the owner dies before COMMIT PREPARED
	put(t, old, "b", 2)
	abortedGID := prepare(t, old) // its Kafka transaction never commits
	other := newCycleSink(c, "0_2")
	if err := other.Recover(nil); err != nil {
		t.Fatal(err)
	}
	put(t, other, "z", 26)
	otherGID := prepare(t, other)
	if got := preparedGIDs(t, conn); len(got) != 3 {
		t.Fatalf("prepared %v, want 3", got)
	}

	next := newCycleSink(c, "0_1")
	if err := next.Recover(committedGID); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(dump(t, conn, "balances", "account"), " "), "account=a,balance=1"; got != want {
		t.Errorf("after recovery: %s, want %s (the committed transaction only)", got, want)
	}
	if got := preparedGIDs(t, conn); len(got) != 1 || got[0] != string(otherGID) {
		t.Errorf("prepared after recovery %v, want only task 0_2's %s (not %s)", got, otherGID, abortedGID)
	}
	put(t, old, "c", 3)
	if _, _, err := old.Prepare(); !errors.Is(err, eddy.ErrSinkFenced) || errors.Is(err, eddy.ErrSinkUnavailable) || IsRowError(err) {
		t.Errorf("the old owner's prepare: %v, want fenced (neither the database's nor the record's fault)", err)
	}
	// The old owner's second phase, late: its successor already ended it.
	if err := old.Commit(committedGID); !errors.Is(err, eddy.ErrSinkFenced) {
		t.Errorf("the old owner's commit of a transaction its successor ended: %v, want fenced", err)
	}
	put(t, next, "d", 4)
	gid := prepare(t, next)
	if err := next.Commit(gid); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(dump(t, conn, "balances", "account"), " "), "account=a,balance=1 account=d,balance=4"; got != want {
		t.Errorf("table %s, want %s", got, want)
	}
	// A prepared transaction ended outside eddy: the commit cannot undo
	// it, and says so in the log as an error.
	logs := &testutil.LogBuffer{}
	next.db.log = slog.New(slog.NewTextHandler(logs, nil))
	put(t, next, "e", 5)
	gid = prepare(t, next)
	exec(t, conn, "ROLLBACK PREPARED "+quoteLiteral(string(gid)))
	if err := next.Commit(gid); err != nil || !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "ended outside eddy") {
		t.Errorf("commit of a transaction rolled back outside eddy: %v, log:\n%s\nwant nil and an error logged", err, logs)
	}
	for _, s := range []*cycleSink[string, int64]{old, next, other} {
		s.Close()
	}
}

// TestToNeedsPreparedTransactions: a server with max_prepared_transactions
// = 0 fails the task at open with an error that says what to set, at
// once (not a hang, not a retry until the timeout).
func TestToNeedsPreparedTransactions(t *testing.T) {
	c := pgtest.Start(t, "max_prepared_transactions=0")
	conn := connect(t, c.DSN())
	exec(t, conn, `CREATE TABLE balances (account text PRIMARY KEY, balance bigint NOT NULL)`)
	s := newCycleSink(c, "0_0")
	s.db.timeout = 1 << 62 // a retry would hang the test
	err := s.Recover(nil)
	if err == nil || !strings.Contains(err.Error(), "max_prepared_transactions is 0") {
		t.Fatalf("Recover = %v; want the max_prepared_transactions error", err)
	}
	t.Log(err)
}

// TestToDatabaseUnavailable: a database that cannot be reached, or that
// refuses the sink's credentials, is retried (logged) for
// CycleConfig.Timeout, then the task fails with an error wrapping
// eddy.ErrSinkUnavailable; and a database killed in the middle of an eddy
// transaction and started again takes the transaction's rows once, with
// no record dead-lettered for either.
func TestToDatabaseUnavailable(t *testing.T) {
	c := pgtest.Start(t)
	conn := connect(t, c.DSN())
	exec(t, conn, `CREATE TABLE balances (account text PRIMARY KEY, balance bigint NOT NULL)`)
	conn.Close(context.Background())
	open := func(dsn string, timeout time.Duration, logs io.Writer) (*eddytest.Driver, error) {
		topo := eddy.NewTopology()
		To(eddy.Source(topo, "balances", serde.String(), serde.Int64()), "pg", CycleConfig[string, int64]{DSN: dsn,
			Table: Table{Name: "balances", Key: []string{"account"}}, Rows: balanceRow, Timeout: timeout,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		return eddytest.New(topo, eddytest.Options{Config: eddy.Config{AppID: "cycle", OnProduceError: eddy.DeadLetter}})
	}
	for _, dsn := range []string{
		"postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2",
		strings.Replace(c.DSN(), "postgres@", "nosuchuser@", 1), // refused credentials
	} {
		logs := &testutil.LogBuffer{}
		d, err := open(dsn, 2*time.Second, logs)
		if err == nil {
			d.Close()
		}
		if !errors.Is(err, eddy.ErrSinkUnavailable) || !strings.Contains(err.Error(), "the database failed for") {
			t.Errorf("%s: open = %v, want the database's error after the bound, as ErrSinkUnavailable", dsn, err)
		}
		if !strings.Contains(logs.String(), "retrying") {
			t.Errorf("%s: no retry logged:\n%s", dsn, logs)
		}
	}

	logs := &testutil.LogBuffer{}
	d, err := open(c.DSN(), time.Minute, logs) // long enough for any restart
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	src := eddytest.Input(d, "balances", serde.String(), serde.Int64())
	restarted := make(chan error, 1)
	err = d.Transaction(func() error {
		if err := src.Pipe("a", 1, 1); err != nil {
			return err
		}
		if err := c.Kill(); err != nil { // pg_ctl stop -m immediate
			return err
		}
		go func() {
			time.Sleep(500 * time.Millisecond)
			restarted <- c.Start()
		}()
		return src.Pipe("b", 2, 2) // the prepare, at the end, meets the database down
	})
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("transaction across the database's restart: %v\n%s", err, logs)
	}
	if !strings.Contains(logs.String(), "retrying") {
		t.Errorf("no retry logged:\n%s", logs)
	}
	conn = connect(t, c.DSN())
	if got, want := strings.Join(dump(t, conn, "balances", "account"), " "), "account=a,balance=1 account=b,balance=2"; got != want {
		t.Errorf("table %s, want %s", got, want)
	}
	if gids := preparedGIDs(t, conn); len(gids) != 0 {
		t.Errorf("prepared transactions left: %v", gids)
	}
	if dead, _ := eddytest.Output(d, eddy.DeadLetterTopic("balances"), serde.Bytes(), serde.Bytes()).ReadAll(); len(dead) != 0 {
		t.Errorf("%d dead letters, want none", len(dead))
	}
}
