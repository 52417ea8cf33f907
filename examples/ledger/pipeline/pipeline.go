// Package pipeline is the ledger example's topology and command line, shared
// by examples/ledger and by `eddy demo`, which runs it as a child process.
//
// The ledger reads payments keyed by account id and, for every payment,
// writes the account's running sequence number and balance: the simplest
// workload where a duplicate or a lost update is visible in the output.
//
// It is meant to be copied, so it refuses what would corrupt its state
// silently, each with the reason in the dead letter:
//
//   - Decode errors (stage "decode", Config.OnDecodeError, dead-letter by
//     default): a null or empty record key, a key, id or account that is
//     not valid UTF-8 (or a JSON escape of a lone surrogate), a payment
//     missing a field. These are faults of the record alone, found before
//     it touches anything (not even stream time), and a codec that let
//     them through would have to invent a value: encoding/json turns
//     invalid UTF-8 into U+FFFD, so keys x-\xff and x-\xc0 became one
//     account.
//   - Process errors (stage "process", Config.OnProcessError, which Main
//     sets to dead-letter): a payment whose account differs from its
//     record key, and one that would overflow its account's balance. Each
//     record decodes fine on its own; what is wrong is its relation to
//     the key (which decided its partition, and so the task that keeps the
//     account: trusting the value split an account's state across tasks)
//     or to the state, which only the processor sees. The processor
//     refuses them before it changes the account.
package pipeline

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
)

// Payment is an input record's value. TS, the payment's time in ms since
// the epoch, is optional: the ledger does not read it; the windowed example
// (examples/windowed), which reads the same payments, takes its event time
// from the record timestamp, which its contract makes equal to TS.
type Payment struct {
	ID      string `json:"id" avro:"id"`
	Account string `json:"account" avro:"account"`
	Amount  int64  `json:"amount" avro:"amount"`
	TS      int64  `json:"ts,omitempty" avro:"ts"`
}

// Balance is an output record's value: the payment and the account's state
// after it.
type Balance struct {
	ID      string `json:"id" avro:"id"`
	Account string `json:"account" avro:"account"`
	Amount  int64  `json:"amount" avro:"amount"`
	Seq     int64  `json:"seq" avro:"seq"`
	Balance int64  `json:"balance" avro:"balance"`
}

// Account is the per-account state.
type Account struct {
	Seq     int64 `json:"seq"`
	Balance int64 `json:"balance"`
}

// StoreName is the name of the ledger's state store.
const StoreName = "balances"

// Topology builds the ledger: payments from input, balances to output, in
// JSON. An account's state is keyed by the record key, which decided the
// payment's partition; a payment whose account field says otherwise is
// refused.
func Topology(input, output string) *eddy.Topology {
	return TopologyWith(input, output, JSONCodecs())
}

// TopologyWith is Topology with the payments and balances in the format of
// codecs (NewCodecs).
func TopologyWith(input, output string, codecs Codecs) *eddy.Topology {
	return topology(input, output, codecs, nil)
}

// topology builds the ledger; sinks, if not nil, adds sinks of the
// balances (--postgres).
func topology(input, output string, codecs Codecs, sinks func(eddy.Stream[string, Balance])) *eddy.Topology {
	t := eddy.NewTopology()
	accounts := eddy.NewKeyValueStoreSpec(StoreName, serde.String(), AccountSerde{})
	payments := eddy.Source(t, input, AccountKeySerde{}, codecs.Payments)
	balances := eddy.Process(payments, "ledger", func() eddy.Processor[string, Payment, string, Balance] {
		return &ledger{spec: accounts}
	}, accounts)
	eddy.To(balances, output, serde.String(), codecs.Balances)
	if sinks != nil {
		sinks(balances)
	}
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
	p, account := rec.Value, rec.Key
	if err := CheckAccount(account, p); err != nil {
		return err
	}
	acc, _, err := l.store.Get(account)
	if err != nil {
		return err
	}
	balance, ok := AddAmount(acc.Balance, p.Amount)
	if !ok {
		return fmt.Errorf("payment %q of %d would overflow the balance %d of account %q", p.ID, p.Amount, acc.Balance, account)
	}
	acc.Seq++
	acc.Balance = balance
	// Forwarded before the account is stored: a balance too large to
	// produce (a huge id) fails here, and the payment is dead-lettered
	// without having counted in the account's seq and balance.
	if err := l.ctx.Forward(eddy.Record[string, Balance]{
		Key:       account,
		Value:     Balance{ID: p.ID, Account: account, Amount: p.Amount, Seq: acc.Seq, Balance: acc.Balance},
		Timestamp: rec.Timestamp,
	}); err != nil {
		return err
	}
	return l.store.Put(account, acc)
}

// CheckAccount refuses a payment whose account differs from its record
// key. The key decides the partition, and so the task that keeps the
// account's state: a payment keyed b for account a would be counted in a
// second copy of a's state, on b's task, with its own seq. The windowed
// example refuses the same payments.
func CheckAccount(key string, p Payment) error {
	if p.Account != key {
		return fmt.Errorf("payment account %q differs from its record key %q: an account's payments must be keyed by its id", p.Account, key)
	}
	return nil
}

// AddAmount adds amount to total, reporting false, instead of wrapping
// around, when the sum does not fit an int64.
func AddAmount(total, amount int64) (int64, bool) {
	sum := total + amount
	// Overflow iff both operands have the same sign and the sum the other.
	if (total >= 0) == (amount >= 0) && (sum >= 0) != (total >= 0) {
		return total, false
	}
	return sum, true
}

func (l *ledger) Close() error { return nil }

// AccountKeySerde is the payments' key serde: the account id, which must be
// present (neither null nor empty) and valid UTF-8. A null key would group
// payments of every account under one empty id, and invalid UTF-8 would
// reach the output's JSON as U+FFFD, where x-\xff and x-\xc0 look the same.
// It writes what serde.String writes, so the topic's bytes are unchanged.
type AccountKeySerde struct{}

func (AccountKeySerde) Serialize(dst []byte, id string) ([]byte, error) {
	if id == "" {
		return dst, errors.New("the account id is empty")
	}
	return serde.StrictString().Serialize(dst, id)
}

func (AccountKeySerde) Deserialize(b []byte) (string, error) {
	switch {
	case b == nil:
		return "", errors.New("the record key is null; a payment's key is its account id")
	case len(b) == 0:
		return "", errors.New("the record key is empty; a payment's key is its account id")
	}
	return serde.StrictString().Deserialize(b)
}

// PaymentSerde decodes payments strictly: a payment without an id, an
// account or an amount is an error (and so goes to the dead-letter topic),
// not a zero value silently added to a balance; so is one whose JSON holds
// invalid UTF-8 or a lone surrogate's escape (serde.CheckJSONUnicode),
// which encoding/json would decode as U+FFFD, making different ids or
// accounts equal.
type PaymentSerde struct{}

func (PaymentSerde) Serialize(dst []byte, p Payment) ([]byte, error) {
	if !utf8.ValidString(p.ID) || !utf8.ValidString(p.Account) {
		return dst, errors.New("payment: the id or account is not valid UTF-8")
	}
	b, err := json.Marshal(p)
	return append(dst, b...), err
}

func (PaymentSerde) Deserialize(b []byte) (Payment, error) {
	if p, id, acc, amt, err := decodePaymentFast(b); err == nil {
		return checkPayment(p, id && p.ID != "", acc && p.Account != "", amt)
	}
	// The fast path reads ASCII only; anything else is checked here.
	if err := serde.CheckJSONUnicode(b); err != nil {
		return Payment{}, fmt.Errorf("payment: %w", err)
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
