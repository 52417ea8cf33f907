// Package pipeline is the ledger example's topology and command line, shared
// by examples/ledger and by `eddy demo`, which runs it as a child process.
//
// The ledger reads payments keyed by account id and, for every payment,
// writes the account's running sequence number and balance: the simplest
// workload where a duplicate or a lost update is visible in the output.
package pipeline

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
)

// Payment is an input record's value. TS, the payment's time in ms since
// the epoch, is optional: the ledger does not read it; the windowed example
// (examples/windowed), which reads the same payments, takes its event time
// from the record timestamp, which its contract makes equal to TS.
type Payment struct {
	ID      string `json:"id"`
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
	TS      int64  `json:"ts,omitempty"`
}

// Balance is an output record's value: the payment and the account's state
// after it.
type Balance struct {
	ID      string `json:"id"`
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
	Seq     int64  `json:"seq"`
	Balance int64  `json:"balance"`
}

// Account is the per-account state.
type Account struct {
	Seq     int64 `json:"seq"`
	Balance int64 `json:"balance"`
}

// StoreName is the name of the ledger's state store.
const StoreName = "balances"

// Topology builds the ledger: payments from input, balances to output.
func Topology(input, output string) *eddy.Topology {
	t := eddy.NewTopology()
	accounts := eddy.NewKeyValueStoreSpec(StoreName, serde.String(), AccountSerde{})
	payments := eddy.Source(t, input, serde.String(), PaymentSerde{})
	balances := eddy.Process(payments, "ledger", func() eddy.Processor[string, Payment, string, Balance] {
		return &ledger{spec: accounts}
	}, accounts)
	eddy.To(balances, output, serde.String(), BalanceSerde{})
	return t
}

type ledger struct {
	spec  eddy.KeyValueStoreSpec[string, Account]
	store *eddy.KeyValueStore[string, Account]
	ctx   *eddy.ProcessorContext[string, Balance]
}

func (l *ledger) Init(ctx *eddy.ProcessorContext[string, Balance]) error {
	store, err := l.spec.Open(ctx)
	l.ctx, l.store = ctx, store
	return err
}

func (l *ledger) Process(rec eddy.Record[string, Payment]) error {
	p := rec.Value
	acc, _, err := l.store.Get(p.Account)
	if err != nil {
		return err
	}
	acc.Seq++
	acc.Balance += p.Amount
	// Forwarded before the account is stored: a balance too large to
	// produce (a huge id) fails here, and the payment is dead-lettered
	// without having counted in the account's seq and balance.
	if err := l.ctx.Forward(eddy.Record[string, Balance]{
		Key:       p.Account,
		Value:     Balance{ID: p.ID, Account: p.Account, Amount: p.Amount, Seq: acc.Seq, Balance: acc.Balance},
		Timestamp: rec.Timestamp,
	}); err != nil {
		return err
	}
	return l.store.Put(p.Account, acc)
}

func (l *ledger) Close() error { return nil }

// PaymentSerde decodes payments strictly: a payment without an id, an
// account or an amount is an error (and so goes to the dead-letter topic),
// not a zero value silently added to a balance.
type PaymentSerde struct{}

func (PaymentSerde) Serialize(dst []byte, p Payment) ([]byte, error) {
	b, err := json.Marshal(p)
	return append(dst, b...), err
}

func (PaymentSerde) Deserialize(b []byte) (Payment, error) {
	if p, id, acc, amt, err := decodePaymentFast(b); err == nil {
		return checkPayment(p, id && p.ID != "", acc && p.Account != "", amt)
	}
	var raw struct {
		ID      *string         `json:"id"`
		Account *string         `json:"account"`
		Amount  *int64          `json:"amount"`
		TS      json.RawMessage `json:"ts"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return Payment{}, fmt.Errorf("payment: %w", err)
	}
	var p Payment
	// Neither example takes time from ts (the windowed one uses the record
	// timestamp), and the ledger has always accepted payments whatever their
	// extra fields hold, so a ts that is not an integer is left at zero
	// rather than sending the payment to the dead-letter topic.
	_ = json.Unmarshal(raw.TS, &p.TS)
	if raw.ID != nil {
		p.ID = *raw.ID
	}
	if raw.Account != nil {
		p.Account = *raw.Account
	}
	if raw.Amount != nil {
		p.Amount = *raw.Amount
	}
	return checkPayment(p, p.ID != "", p.Account != "", raw.Amount != nil)
}

func checkPayment(p Payment, hasID, hasAccount, hasAmount bool) (Payment, error) {
	if hasID && hasAccount && hasAmount {
		return p, nil
	}
	var missing []error
	if !hasID {
		missing = append(missing, errors.New(`"id"`))
	}
	if !hasAccount {
		missing = append(missing, errors.New(`"account"`))
	}
	if !hasAmount {
		missing = append(missing, errors.New(`"amount"`))
	}
	return Payment{}, fmt.Errorf("payment: missing field: %w", errors.Join(missing...))
}

// AccountSerde stores an account in 16 bytes (seq, balance; big-endian), so
// the per-record state read and write decode no JSON.
type AccountSerde struct{}

func (AccountSerde) Serialize(dst []byte, a Account) ([]byte, error) {
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.Seq))
	return binary.BigEndian.AppendUint64(dst, uint64(a.Balance)), nil
}

func (AccountSerde) Deserialize(b []byte) (Account, error) {
	if len(b) != 16 {
		return Account{}, fmt.Errorf("account: want 16 bytes, got %d", len(b))
	}
	return Account{Seq: int64(binary.BigEndian.Uint64(b)), Balance: int64(binary.BigEndian.Uint64(b[8:]))}, nil
}

// SetErrorPolicies is temporary (test first).
func SetErrorPolicies(cfg *eddy.Config) {
	cfg.OnProcessError = eddy.DeadLetter
	cfg.OnProduceError = eddy.DeadLetter
}
