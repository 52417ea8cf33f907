package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	ledger "github.com/eddy-streams/eddy/examples/ledger/pipeline"
	"github.com/eddy-streams/eddy/internal/harness/verify"
	"github.com/eddy-streams/eddy/internal/testutil/pgtest"
)

// TestLedgerToPostgresThroughKills is issue 19's process test of the
// in-cycle sink: the ledger with --postgres writes every balance into a
// real PostgreSQL (each account's latest state upserted, every balance
// appended) by a two-phase commit in step with its Kafka transactions,
// while it is SIGKILLed at random moments, crashes once in each of the
// two windows of the two-phase commit (after PREPARE and before the
// Kafka commit; after the Kafka commit and before COMMIT PREPARED),
// PostgreSQL is stopped immediately and restarted, and the broker
// restarted. The tables must equal what the balances topic (itself
// checked exactly once) says, with no row twice and no prepared
// transaction left.
func TestLedgerToPostgresThroughKills(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs processes for about a minute")
	}
	pg := pgtest.Start(t)
	broker := startBrokerProc(t)
	res := runLedgerCrash(t, broker, Options{
		AppArgs:    []string{"--postgres", pg.DSN()},
		CrashEvery: 2 * time.Second, // at least 8 random kills in 25 s
		LedgerFailpoints: []string{
			"commit.before-end@5", // prepared, Kafka not committed
			"commit.after-end@5",  // Kafka committed, not COMMIT PREPARED
		},
		MidRun: func() error {
			if err := pg.Kill(); err != nil {
				return err
			}
			if err := pg.Start(); err != nil {
				return err
			}
			return broker.restart()
		},
	}, 10000)
	if random := res.Crashes - res.FailpointCrashes; random < 8 || res.FailpointCrashes != 2 {
		t.Fatalf("%d random SIGKILLs and %d at failpoints; the test needs at least 8 and 2", random, res.FailpointCrashes)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs, err := verify.ReadAll(ctx, []string{broker.addr}, outputTopic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]ledger.Balance{} // each account's last balance
	records := map[string]ledger.Balance{}
	for _, r := range recs {
		var b ledger.Balance
		if err := json.Unmarshal(r.Value, &b); err != nil {
			t.Fatal(err)
		}
		records[b.ID] = b
		if b.Seq > want[b.Account].Seq {
			want[b.Account] = b
		}
	}
	conn, err := pgx.Connect(ctx, pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	rows, err := conn.Query(ctx, `SELECT account, seq, balance FROM `+ledger.BalancesTable)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]int64{}
	for rows.Next() {
		var account string
		var seq, balance int64
		if err := rows.Scan(&account, &seq, &balance); err != nil {
			t.Fatal(err)
		}
		got[account] = [2]int64{seq, balance}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	wrong := 0
	for account, b := range want {
		if g, ok := got[account]; !ok || g != [2]int64{b.Seq, b.Balance} {
			if wrong++; wrong <= 5 {
				t.Errorf("%s account %s: row %v (present %v), want seq %d balance %d", ledger.BalancesTable, account, g, ok, b.Seq, b.Balance)
			}
		}
	}
	if len(got) != len(want) || wrong > 0 {
		t.Fatalf("%s: %d rows, %d wrong; want %d accounts", ledger.BalancesTable, len(got), wrong, len(want))
	}

	rows, err = conn.Query(ctx, `SELECT id, account, amount, seq, balance FROM `+ledger.PaymentsTable)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	bad := 0
	for rows.Next() {
		var b ledger.Balance
		if err := rows.Scan(&b.ID, &b.Account, &b.Amount, &b.Seq, &b.Balance); err != nil {
			t.Fatal(err)
		}
		seen[b.ID]++
		if records[b.ID] != b {
			if bad++; bad <= 5 {
				t.Errorf("%s row %+v, the balances topic says %+v", ledger.PaymentsTable, b, records[b.ID])
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	dups := 0
	for _, n := range seen {
		if n > 1 {
			dups++
		}
	}
	if len(seen) != len(records) || dups > 0 || bad > 0 {
		t.Fatalf("%s: %d payments (%d twice, %d wrong); want the %d of the balances topic once each", ledger.PaymentsTable, len(seen), dups, bad, len(records))
	}

	var prepared int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_xacts`).Scan(&prepared); err != nil {
		t.Fatal(err)
	}
	if prepared != 0 {
		t.Fatalf("%d prepared transactions left", prepared)
	}
	t.Log(fmt.Sprintf("PostgreSQL: %d accounts, %d payments once each, no prepared transaction left; %d random SIGKILLs, 2 at the two-phase windows, PostgreSQL and the broker restarted", len(got), len(seen), res.Crashes-res.FailpointCrashes))
}
