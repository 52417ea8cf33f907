package demo

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	ledgerpipe "github.com/eddy-streams/eddy/examples/ledger/pipeline"
)

// PostgresReport compares the tables the ledger writes with --postgres
// (the in-cycle sink) with its balances topic, which the ledger's own
// verification checked against the payments.
type PostgresReport struct {
	// Accounts are the accounts of the balances topic; AccountRows the
	// rows of ledger_balances, WrongAccounts those missing or whose seq
	// or balance is not the account's last.
	Accounts, AccountRows, WrongAccounts int
	// Payments are the balance records of the topic; PaymentRows the
	// rows of ledger_payments, of which Duplicates repeat a payment and
	// Wrong differ from its record; Missing are records with no row.
	Payments, PaymentRows, Duplicates, Wrong, Missing int
	// Prepared are the prepared transactions left in the database.
	Prepared int
	Examples []string
}

// OK reports whether the tables are exactly the topic's.
func (r PostgresReport) OK() bool {
	return r.AccountRows == r.Accounts && r.WrongAccounts == 0 && r.PaymentRows == r.Payments &&
		r.Duplicates == 0 && r.Wrong == 0 && r.Missing == 0 && r.Prepared == 0
}

func (r PostgresReport) String() string {
	return fmt.Sprintf("accounts=%d rows=%d wrong=%d payments=%d rows=%d duplicates=%d wrong=%d missing=%d prepared_left=%d",
		r.Accounts, r.AccountRows, r.WrongAccounts, r.Payments, r.PaymentRows, r.Duplicates, r.Wrong, r.Missing, r.Prepared)
}

// VerifyPostgres reads the --postgres tables at dsn and compares them with
// balances, the balance records (JSON) of the topic.
func VerifyPostgres(ctx context.Context, dsn string, balances []*kgo.Record) (PostgresReport, error) {
	var rep PostgresReport
	note := func(format string, args ...any) {
		if len(rep.Examples) < 10 {
			rep.Examples = append(rep.Examples, fmt.Sprintf(format, args...))
		}
	}
	last := map[string]ledgerpipe.Balance{}
	records := map[string]ledgerpipe.Balance{}
	for _, r := range balances {
		var b ledgerpipe.Balance
		if err := json.Unmarshal(r.Value, &b); err != nil {
			return rep, fmt.Errorf("demo: balance %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
		records[b.ID] = b
		if b.Seq > last[b.Account].Seq {
			last[b.Account] = b
		}
	}
	rep.Accounts, rep.Payments = len(last), len(records)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return rep, fmt.Errorf("demo: --postgres: %w", err)
	}
	defer conn.Close(context.Background())

	rows, err := conn.Query(ctx, `SELECT account, seq, balance FROM `+ledgerpipe.BalancesTable)
	if err != nil {
		return rep, err
	}
	seenAccounts := map[string]bool{}
	for rows.Next() {
		var b ledgerpipe.Balance
		if err := rows.Scan(&b.Account, &b.Seq, &b.Balance); err != nil {
			return rep, err
		}
		rep.AccountRows++
		seenAccounts[b.Account] = true
		if want, ok := last[b.Account]; !ok || want.Seq != b.Seq || want.Balance != b.Balance {
			rep.WrongAccounts++
			note("%s: account %s has seq %d balance %d, the topic's last is seq %d balance %d", ledgerpipe.BalancesTable, b.Account, b.Seq, b.Balance, want.Seq, want.Balance)
		}
	}
	if err := rows.Err(); err != nil {
		return rep, err
	}
	for account := range last {
		if !seenAccounts[account] {
			rep.WrongAccounts++
			note("%s: no row for account %s", ledgerpipe.BalancesTable, account)
		}
	}

	rows, err = conn.Query(ctx, `SELECT id, account, amount, seq, balance FROM `+ledgerpipe.PaymentsTable)
	if err != nil {
		return rep, err
	}
	seen := map[string]int{}
	for rows.Next() {
		var b ledgerpipe.Balance
		if err := rows.Scan(&b.ID, &b.Account, &b.Amount, &b.Seq, &b.Balance); err != nil {
			return rep, err
		}
		rep.PaymentRows++
		if seen[b.ID]++; seen[b.ID] == 2 {
			rep.Duplicates++
			note("%s: payment %s has more than one row", ledgerpipe.PaymentsTable, b.ID)
		}
		if records[b.ID] != b {
			rep.Wrong++
			note("%s: row %+v, the topic says %+v", ledgerpipe.PaymentsTable, b, records[b.ID])
		}
	}
	if err := rows.Err(); err != nil {
		return rep, err
	}
	for id := range records {
		if seen[id] == 0 {
			rep.Missing++
			note("%s: no row for payment %s", ledgerpipe.PaymentsTable, id)
		}
	}
	err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_xacts`).Scan(&rep.Prepared)
	return rep, err
}
