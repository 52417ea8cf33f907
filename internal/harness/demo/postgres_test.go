package demo

import (
	"testing"
	"time"

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
	db := pgtest.Start(t)
	broker := startBrokerProc(t)
	res := runLedgerCrash(t, broker, Options{
		PostgresDSN: db.DSN(),
		CrashEvery:  2 * time.Second, // at least 8 random kills in 25 s
		LedgerFailpoints: []string{
			"commit.before-end@5", // prepared, Kafka not committed
			"commit.after-end@5",  // Kafka committed, not COMMIT PREPARED
		},
		MidRun: func() error {
			if err := db.Kill(); err != nil {
				return err
			}
			if err := db.Start(); err != nil {
				return err
			}
			return broker.restart()
		},
	}, 10000)
	if random := res.Crashes - res.FailpointCrashes; random < 8 || res.FailpointCrashes != 2 {
		t.Fatalf("%d random SIGKILLs and %d at failpoints; the test needs at least 8 and 2", random, res.FailpointCrashes)
	}
	pg := res.Postgres
	if pg == nil {
		t.Fatal("the run did not verify the PostgreSQL tables")
	}
	for _, e := range pg.Examples {
		t.Log(e)
	}
	if !pg.OK() {
		t.Fatalf("PostgreSQL tables: %v", pg)
	}
	t.Logf("PostgreSQL: %v; %d random SIGKILLs, 2 at the two-phase windows, PostgreSQL and the broker restarted", pg, res.Crashes-res.FailpointCrashes)
}
