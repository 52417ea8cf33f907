package verify

import (
	"encoding/json"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// LedgerReport compares a ledger's outputs with its inputs.
type LedgerReport struct {
	Payments int // committed input records that are valid payments
	// InputDuplicates counts payment ids that appear more than once in
	// the input (the broker appended a producer's retry twice).
	InputDuplicates int
	Outputs         int
	// Duplicates are outputs beyond one per input record of the id.
	Duplicates int
	// Missing are input records with no output.
	Missing int
	// Wrong are outputs whose seq or balance differs from what a
	// sequential run over the input computes.
	Wrong int
	// Examples describe the first problems found.
	Examples []string
}

// OK reports whether the output is exactly the reference.
func (r LedgerReport) OK() bool { return r.Duplicates == 0 && r.Missing == 0 && r.Wrong == 0 }

func (r LedgerReport) String() string {
	return fmt.Sprintf("payments=%d outputs=%d duplicates=%d missing=%d wrong=%d input_duplicates=%d",
		r.Payments, r.Outputs, r.Duplicates, r.Missing, r.Wrong, r.InputDuplicates)
}

type ledgerPayment struct {
	ID      *string `json:"id"`
	Account *string `json:"account"`
	Amount  *int64  `json:"amount"`
}

// payment is a decoded valid payment.
type payment struct {
	id, account string
	amount      int64
}

// decodePayment applies the examples' rule, independently of their codec:
// a payment is valid with a non-empty id and account and an integer amount
// (anything else goes to the dead-letter topic).
func decodePayment(value []byte) (payment, bool) {
	var p ledgerPayment
	if json.Unmarshal(value, &p) != nil || p.ID == nil || *p.ID == "" || p.Account == nil || *p.Account == "" || p.Amount == nil {
		return payment{}, false
	}
	return payment{*p.ID, *p.Account, *p.Amount}, true
}

type ledgerBalance struct {
	ID      string `json:"id"`
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
	Seq     int64  `json:"seq"`
	Balance int64  `json:"balance"`
}

type expectation struct{ seq, balance int64 }

// Ledger checks balances against payments. Both are in partition order as
// ReadAll returns them; payments of one account share a partition, so the
// reference is the running count and sum per account in that order.
// Invalid payments (the dead-letter topic's business) are skipped.
func Ledger(payments, balances []*kgo.Record) LedgerReport {
	var rep LedgerReport
	type acct struct{ seq, balance int64 }
	accounts := map[string]*acct{}
	expected := map[string][]expectation{} // by payment id, one per input occurrence
	for _, r := range payments {
		p, ok := decodePayment(r.Value)
		if !ok {
			continue
		}
		rep.Payments++
		a := accounts[p.account]
		if a == nil {
			a = &acct{}
			accounts[p.account] = a
		}
		a.seq++
		a.balance += p.amount
		if len(expected[p.id]) == 1 {
			rep.InputDuplicates++
		}
		expected[p.id] = append(expected[p.id], expectation{a.seq, a.balance})
	}
	seen := map[string]int{}
	firstAt := map[string]int64{} // offset of each payment's first output
	note := func(format string, args ...any) {
		if len(rep.Examples) < 10 {
			rep.Examples = append(rep.Examples, fmt.Sprintf(format, args...))
		}
	}
	for _, r := range balances {
		rep.Outputs++
		var b ledgerBalance
		if err := json.Unmarshal(r.Value, &b); err != nil {
			rep.Wrong++
			note("output %s/%d@%d is not a balance: %v", r.Topic, r.Partition, r.Offset, err)
			continue
		}
		exp := expected[b.ID]
		seen[b.ID]++
		if seen[b.ID] == 1 {
			firstAt[b.ID] = r.Offset
		}
		if seen[b.ID] > len(exp) {
			rep.Duplicates++
			note("payment %s has %d outputs, %d inputs (seq=%d balance=%d at %d@%d, first at %d@%d)",
				b.ID, seen[b.ID], len(exp), b.Seq, b.Balance, r.Partition, r.Offset, r.Partition, firstAt[b.ID])
			continue
		}
		match := false
		for _, e := range exp {
			if e.seq == b.Seq && e.balance == b.Balance {
				match = true
			}
		}
		if !match {
			rep.Wrong++
			note("payment %s: got seq=%d balance=%d, want %v", b.ID, b.Seq, b.Balance, exp)
		}
	}
	for id, exp := range expected {
		if seen[id] < len(exp) {
			rep.Missing += len(exp) - seen[id]
			note("payment %s: %d inputs, %d outputs", id, len(exp), seen[id])
		}
	}
	return rep
}
