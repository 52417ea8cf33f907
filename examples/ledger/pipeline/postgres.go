package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/pgsink"
)

// The tables the ledger writes with --postgres, in the commit cycle
// (pgsink.To): each account's latest state, upserted, and every balance
// record, appended. Both commit exactly when the Kafka transaction that
// produced the balances does.
const (
	BalancesTable = "ledger_balances"
	PaymentsTable = "ledger_payments"
)

// CreateTables creates the --postgres tables if they are missing.
// ledger_payments has no key on purpose: a payment written twice would
// show as two rows. A database that cannot be reached (down, restarting)
// is logged and retried until timeout has passed, as the sinks do: a
// ledger restarted while PostgreSQL restarts waits for it.
func CreateTables(ctx context.Context, dsn string, timeout time.Duration, log *slog.Logger) error {
	err := pgsink.CreateTables(ctx, dsn, timeout, log, map[string]string{
		BalancesTable: `CREATE TABLE IF NOT EXISTS ` + BalancesTable + ` (account text PRIMARY KEY, seq bigint NOT NULL, balance bigint NOT NULL)`,
		PaymentsTable: `CREATE TABLE IF NOT EXISTS ` + PaymentsTable + ` (id text NOT NULL, account text NOT NULL, amount bigint NOT NULL, seq bigint NOT NULL, balance bigint NOT NULL)`,
	})
	if err != nil {
		return fmt.Errorf("--postgres (retried for --broker-timeout): %w", err)
	}
	return nil
}

// toPostgres writes the balances to the --postgres tables.
func toPostgres(balances eddy.Stream[string, Balance], dsn string, timeout time.Duration) {
	pgsink.To(balances, "pg-balances", pgsink.CycleConfig[string, Balance]{
		DSN: dsn, Timeout: timeout,
		Table: pgsink.Table{Name: BalancesTable, Key: []string{"account"}},
		Rows: func(r eddy.Record[string, Balance]) (pgsink.Row, error) {
			b := r.Value
			return pgsink.Row{Values: map[string]any{"account": b.Account, "seq": b.Seq, "balance": b.Balance}}, nil
		},
	})
	pgsink.To(balances, "pg-payments", pgsink.CycleConfig[string, Balance]{
		DSN: dsn, Timeout: timeout,
		Table: pgsink.Table{Name: PaymentsTable, Mode: pgsink.Append},
		Rows: func(r eddy.Record[string, Balance]) (pgsink.Row, error) {
			b := r.Value
			return pgsink.Row{Values: map[string]any{"id": b.ID, "account": b.Account, "amount": b.Amount, "seq": b.Seq, "balance": b.Balance}}, nil
		},
	})
}
