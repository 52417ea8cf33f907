package pgsink_test

import (
	"context"
	"log"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eddy-streams/eddy/pgsink"
)

// Run writes the ledger's balances topic into a table, exactly once: each
// JSON value field fills the column of the same name, the record key the
// account column, a tombstone deletes the account's row.
func ExampleRun() {
	ctx := context.Background()
	err := pgsink.Run(ctx, pgsink.Config{
		Brokers: []string{"127.0.0.1:9092"},
		Topic:   "balances",
		DSN:     "postgres://eddy@127.0.0.1:5432/ledger",
		Table:   pgsink.Table{Name: "balances", Key: []string{"account"}}, // Mode: pgsink.Upsert
		// Bad records go to balances.dlq with their reason; the database
		// may fail this long before Run gives up.
		DBTimeout: 2 * time.Minute,
	})
	if err != nil {
		log.Fatal(err)
	}
}

// A Writer writes a batch inside a transaction its caller owns, here with
// rows mapped from typed values (as a serde would decode them).
func ExampleWriter() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, "postgres://eddy@127.0.0.1:5432/ledger")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	w, err := pgsink.NewWriter(ctx, conn, pgsink.Table{Name: "balances", Key: []string{"account"}})
	if err != nil {
		log.Fatal(err) // e.g. `table balances has no column "account"`
	}
	type balance struct {
		Account string
		Balance int64
	}
	var rows []pgsink.Row
	for _, b := range []balance{{"alice", 10}, {"bob", 5}, {"alice", 12}} { // alice ends at 12
		rows = append(rows, pgsink.Row{Values: map[string]any{"account": b.Account, "balance": b.Balance}})
	}
	rows = append(rows, pgsink.Row{Delete: true, Values: map[string]any{"account": "carol"}})
	tx, err := conn.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := w.Write(ctx, tx, rows); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
}

// An app creates the tables its sinks write to at start, waiting for a
// database that is still starting (or restarting after a crash).
func ExampleCreateTables() {
	err := pgsink.CreateTables(context.Background(), "postgres://eddy@127.0.0.1:5432/ledger", time.Minute, slog.Default(), map[string]string{
		"balances": `CREATE TABLE IF NOT EXISTS balances (account text PRIMARY KEY, balance bigint NOT NULL)`,
	})
	if err != nil {
		log.Fatal(err)
	}
}
