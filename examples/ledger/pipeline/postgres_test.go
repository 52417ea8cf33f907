package pipeline

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eddy-streams/eddy/internal/testutil"
	"github.com/eddy-streams/eddy/internal/testutil/pgtest"
)

// TestCreateTablesWaitsForTheDatabase: a ledger started while PostgreSQL
// is down (restarting after a crash) logs and waits for it instead of
// exiting, and creates its tables once the database is back; a database
// that stays down fails it after the bound, naming the flag.
func TestCreateTablesWaitsForTheDatabase(t *testing.T) {
	db := pgtest.Start(t)
	if err := db.Kill(); err != nil {
		t.Fatal(err)
	}
	logs := &testutil.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	err := CreateTables(context.Background(), db.DSN(), time.Second, log)
	if err == nil || !strings.Contains(err.Error(), "--broker-timeout") {
		t.Fatalf("CreateTables with the database down: %v, want the error after the bound naming the flag", err)
	}

	done := make(chan error, 1)
	go func() { done <- CreateTables(context.Background(), db.DSN(), time.Minute, log) }()
	for !strings.Contains(logs.String(), "retrying") {
		time.Sleep(10 * time.Millisecond)
	}
	if err := db.Start(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("CreateTables after the database came back: %v", err)
	}
	conn, err := pgx.Connect(context.Background(), db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, table := range []string{BalancesTable, PaymentsTable} {
		var n int
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Errorf("table %s: %v", table, err)
		}
	}
}
