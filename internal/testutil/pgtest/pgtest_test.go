package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestStartKillRestart: a committed row survives an immediate stop (a
// crash), an uncommitted one does not, and the DSN stays the same.
func TestStartKillRestart(t *testing.T) {
	c := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN())
	if err != nil {
		t.Fatal(err)
	}
	var mpt string
	if err := conn.QueryRow(ctx, "SHOW max_prepared_transactions").Scan(&mpt); err != nil || mpt != "64" {
		t.Fatalf("max_prepared_transactions = %q, %v; want 64", mpt, err)
	}
	var fsync string
	if err := conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil || fsync != "on" {
		t.Fatalf("fsync = %q, %v; want on", fsync, err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE t (k int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	dsn := c.DSN()
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if c.Running() {
		t.Fatal("running after Kill")
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if c.DSN() != dsn {
		t.Fatalf("DSN changed across restart: %s, %s", dsn, c.DSN())
	}
	conn2, err := pgx.Connect(ctx, c.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close(ctx)
	var ks []int
	rows, err := conn2.Query(ctx, "SELECT k FROM t ORDER BY k")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k int
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(ks) != 1 || ks[0] != 1 {
		t.Fatalf("rows after crash = %v, want [1]", ks)
	}
}
