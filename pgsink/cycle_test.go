package pgsink

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
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
// its Rows refuses is dead-lettered (the produce-error policy); nothing
// stays prepared.
func TestToInTheCycle(t *testing.T) {
	c := pgtest.Start(t)
	conn := connect(t, c.DSN())
	exec(t, conn, `CREATE TABLE balances (account text PRIMARY KEY, balance bigint NOT NULL)`)
	topo := eddy.NewTopology()
	in := eddy.Source(topo, "balances", serde.String(), serde.Int64())
	To(in, "pg", CycleConfig[string, int64]{DSN: c.DSN(), Table: Table{Name: "balances", Key: []string{"account"}}, Rows: balanceRow, Logger: quiet()})
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
		}{{"a", 1}, {"b", 2}, {"", 9}, {"a", 3}} {
			if err := src.Pipe(kv.k, kv.v, int64(i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(dump(t, conn, "balances", "account"), " "), "account=a,balance=3 account=b,balance=2"; got != want {
		t.Errorf("table %s, want %s", got, want)
	}
	dead, err := eddytest.Output(d, eddy.DeadLetterTopic("balances"), serde.Bytes(), serde.Bytes()).ReadAll()
	if err != nil || len(dead) != 1 {
		t.Errorf("dead letters %d (%v), want the record without an account", len(dead), err)
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
	committedGID, err := old.Prepare() // its Kafka transaction commits; the owner dies before COMMIT PREPARED
	if err != nil {
		t.Fatal(err)
	}
	put(t, old, "b", 2)
	abortedGID, err := old.Prepare() // its Kafka transaction never commits
	if err != nil {
		t.Fatal(err)
	}
	other := newCycleSink(c, "0_2")
	if err := other.Recover(nil); err != nil {
		t.Fatal(err)
	}
	put(t, other, "z", 26)
	otherGID, err := other.Prepare()
	if err != nil {
		t.Fatal(err)
	}
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
	if _, err := old.Prepare(); !errors.Is(err, errFenced) || !errors.Is(err, eddy.ErrSinkUnavailable) {
		t.Errorf("the old owner's prepare: %v, want fenced (and not the record's fault)", err)
	}
	put(t, next, "d", 4)
	gid, err := next.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Commit(gid); err != nil {
		t.Fatal(err)
	}
	if err := next.Commit(gid); err != nil { // redone after a lost answer
		t.Errorf("a second commit of %s: %v, want nil", gid, err)
	}
	if got, want := strings.Join(dump(t, conn, "balances", "account"), " "), "account=a,balance=1 account=d,balance=4"; got != want {
		t.Errorf("table %s, want %s", got, want)
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
