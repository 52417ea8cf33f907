package verify

import (
	"encoding/json"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func pay(id, acct string, amount int64) *kgo.Record {
	v, _ := json.Marshal(map[string]any{"id": id, "account": acct, "amount": amount})
	return &kgo.Record{Value: v}
}

func bal(id, acct string, amount, seq, balance int64) *kgo.Record {
	v, _ := json.Marshal(ledgerBalance{id, acct, amount, seq, balance})
	return &kgo.Record{Value: v}
}

func TestLedger(t *testing.T) {
	payments := []*kgo.Record{pay("1", "a", 5), pay("2", "b", 1), pay("3", "a", 2), {Value: []byte("junk")}}
	good := []*kgo.Record{bal("1", "a", 5, 1, 5), bal("2", "b", 1, 1, 1), bal("3", "a", 2, 2, 7)}
	for _, tc := range []struct {
		name     string
		balances []*kgo.Record
		want     LedgerReport
	}{
		{"exact", good, LedgerReport{Payments: 3, Outputs: 3}},
		{"duplicate", append(append([]*kgo.Record(nil), good...), bal("3", "a", 2, 2, 7)), LedgerReport{Payments: 3, Outputs: 4, Duplicates: 1}},
		{"missing", good[:2], LedgerReport{Payments: 3, Outputs: 2, Missing: 1}},
		{"wrong", []*kgo.Record{good[0], good[1], bal("3", "a", 2, 3, 9)}, LedgerReport{Payments: 3, Outputs: 3, Wrong: 1}},
		{"garbage", append(append([]*kgo.Record(nil), good...), &kgo.Record{Value: []byte("{")}), LedgerReport{Payments: 3, Outputs: 4, Wrong: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Ledger(payments, tc.balances)
			got.Examples = nil
			if got.String() != tc.want.String() {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			if got.OK() != (tc.name == "exact") {
				t.Fatalf("OK() = %v", got.OK())
			}
		})
	}
}

func TestLedgerInputDuplicate(t *testing.T) {
	// The broker appended payment 1 twice: a correct pipeline outputs it twice.
	payments := []*kgo.Record{pay("1", "a", 5), pay("1", "a", 5)}
	balances := []*kgo.Record{bal("1", "a", 5, 1, 5), bal("1", "a", 5, 2, 10)}
	got := Ledger(payments, balances)
	if !got.OK() || got.InputDuplicates != 1 {
		t.Fatalf("got %v", got)
	}
}
