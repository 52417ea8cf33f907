package pipeline

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// The ledger's handling of payments it must refuse, run with eddytest and
// the error policies Main sets: each is dead-lettered with its stage and
// reason and changes no account.

type ledgerDriver struct {
	t        *testing.T
	d        *eddytest.Driver
	balances *eddytest.OutputTopic[string, Balance]
	dlq      *eddytest.OutputTopic[[]byte, []byte]
}

func newLedgerDriver(t *testing.T) *ledgerDriver {
	t.Helper()
	cfg := eddy.Config{}
	SetErrorPolicies(&cfg)
	d, err := eddytest.New(Topology("payments", "balances"), eddytest.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return &ledgerDriver{t: t, d: d,
		balances: eddytest.Output(d, "balances", serde.String(), serde.Serde[Balance](BalanceSerde{})),
		dlq:      eddytest.Output(d, eddy.DeadLetterTopic("payments"), serde.Bytes(), serde.Bytes()),
	}
}

// pipe sends a payment with a raw key (nil: a null key) and value.
func (l *ledgerDriver) pipe(key []byte, value string) {
	l.t.Helper()
	if err := l.d.PipeRaw("payments", key, []byte(value), 1); err != nil {
		l.t.Fatalf("pipe %q %q: %v", key, value, err)
	}
}

func (l *ledgerDriver) pay(key, id, account string, amount int64) {
	l.t.Helper()
	l.pipe([]byte(key), fmt.Sprintf(`{"id":%q,"account":%q,"amount":%d}`, id, account, amount))
}

func (l *ledgerDriver) outputs() []string {
	l.t.Helper()
	recs, err := l.balances.ReadAll()
	if err != nil {
		l.t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		b := r.Value
		out = append(out, fmt.Sprintf("%s:%s#%d=%d", r.Key, b.ID, b.Seq, b.Balance))
	}
	return out
}

// deadLetter is what a test checks of a dead letter.
type deadLetter struct{ key, stage, reason string }

func (l *ledgerDriver) deadLetters() []deadLetter {
	l.t.Helper()
	recs, err := l.dlq.ReadAll()
	if err != nil {
		l.t.Fatal(err)
	}
	var out []deadLetter
	for _, r := range recs {
		dl := deadLetter{key: string(r.Key)}
		for _, h := range r.Headers {
			switch h.Key {
			case eddy.HeaderDLQStage:
				dl.stage = string(h.Value)
			case eddy.HeaderDLQError:
				dl.reason = string(h.Value)
			}
		}
		out = append(out, dl)
		l.t.Logf("dead letter %q, stage %s: %s", dl.key, dl.stage, dl.reason)
	}
	return out
}

// checkDeadLetters compares the dead letters with want, whose reasons are
// substrings of the actual ones.
func (l *ledgerDriver) checkDeadLetters(want ...deadLetter) {
	l.t.Helper()
	got := l.deadLetters()
	if len(got) != len(want) {
		l.t.Fatalf("dead letters %q, want %d: %q", got, len(want), want)
	}
	for i, w := range want {
		g := got[i]
		if g.key != w.key || g.stage != w.stage || !strings.Contains(g.reason, w.reason) {
			l.t.Errorf("dead letter %d: key %q stage %q reason %q; want key %q stage %q reason containing %q",
				i, g.key, g.stage, g.reason, w.key, w.stage, w.reason)
		}
	}
}

// account reads an account from the committed state.
func (l *ledgerDriver) account(key string) (Account, bool) {
	l.t.Helper()
	store, err := eddytest.KeyValueStore(l.d, eddy.NewKeyValueStoreSpec(StoreName, serde.String(), AccountSerde{}))
	if err != nil {
		l.t.Fatal(err)
	}
	acc, ok, err := store.Get(key)
	if err != nil {
		l.t.Fatal(err)
	}
	return acc, ok
}

func (l *ledgerDriver) checkAccount(key string, want Account) {
	l.t.Helper()
	if got, ok := l.account(key); !ok || got != want {
		l.t.Errorf("account %q: %+v (stored: %v), want %+v", key, got, ok, want)
	}
}

func (l *ledgerDriver) checkNoAccount(key string) {
	l.t.Helper()
	if got, ok := l.account(key); ok {
		l.t.Errorf("account %q exists: %+v, want none", key, got)
	}
}

// TestLedgerKeysStateByRecordKey (issue 16, finding 2): a payment whose
// account differs from its record key, or that has no key, would split an
// account's state across tasks; it is dead-lettered and changes nothing.
func TestLedgerKeysStateByRecordKey(t *testing.T) {
	l := newLedgerDriver(t)
	l.pay("a", "p1", "a", 10)
	l.pay("b", "p2", "a", 5) // the key says b, the value a
	l.pipe(nil, `{"id":"p3","account":"a","amount":7}`)
	l.pipe([]byte{}, `{"id":"p4","account":"a","amount":7}`)
	l.pay("a", "p5", "a", 1)
	if got, want := l.outputs(), []string{"a:p1#1=10", "a:p5#2=11"}; !slices.Equal(got, want) {
		t.Errorf("balances %q, want %q", got, want)
	}
	l.checkDeadLetters(
		deadLetter{"b", "process", `payment account "a" differs from its record key "b"`},
		deadLetter{"", "decode", "key: the record key is null"},
		deadLetter{"", "decode", "key: the record key is empty"},
	)
	l.checkAccount("a", Account{Seq: 2, Balance: 11})
	l.checkNoAccount("b")
}

// TestLedgerRefusesInvalidUTF8 (issue 16, finding 3): keys x-\xff and
// x-\xc0 used to become one account x-\uFFFD. A key, account or id that is
// not valid UTF-8 (or a JSON escape of a lone surrogate, which
// encoding/json also turns into U+FFFD) is a decode error.
func TestLedgerRefusesInvalidUTF8(t *testing.T) {
	l := newLedgerDriver(t)
	l.pipe([]byte("x-\xff"), "{\"id\":\"p1\",\"account\":\"x-\xff\",\"amount\":1}")
	l.pipe([]byte("x-\xc0"), "{\"id\":\"p2\",\"account\":\"x-\xc0\",\"amount\":1}")
	l.pipe([]byte("a"), "{\"id\":\"p\xff\",\"account\":\"a\",\"amount\":1}")
	l.pipe([]byte("a"), `{"id":"p\ud800","account":"a","amount":1}`)
	l.pipe([]byte("\uFFFD"), `{"id":"p5","account":"\udc00","amount":1}`)
	// Escapes that are valid Unicode are fine.
	l.pipe([]byte("é"), `{"id":"p\u00e9\ud83d\ude00","account":"\u00e9","amount":2}`)
	if got, want := l.outputs(), []string{"é:p\u00e9\U0001F600#1=2"}; !slices.Equal(got, want) {
		t.Errorf("balances %q, want %q", got, want)
	}
	l.checkDeadLetters(
		deadLetter{"x-\xff", "decode", "key: serde: string: invalid UTF-8 at byte 2"},
		deadLetter{"x-\xc0", "decode", "key: serde: string: invalid UTF-8 at byte 2"},
		deadLetter{"a", "decode", "invalid UTF-8 at byte 8"},
		deadLetter{"a", "decode", `lone surrogate \ud800 at byte 8`},
		deadLetter{"\uFFFD", "decode", `lone surrogate \udc00 at byte 22`},
	)
	l.checkNoAccount("x-\uFFFD")
	l.checkNoAccount("\uFFFD")
	l.checkNoAccount("a")
}

// TestLedgerRefusesBalanceOverflow (issue 16, finding 4): two payments of
// MaxInt64 used to give balance -2. The second is dead-lettered and the
// account keeps its state.
func TestLedgerRefusesBalanceOverflow(t *testing.T) {
	l := newLedgerDriver(t)
	l.pay("a", "p1", "a", math.MaxInt64)
	l.pay("a", "p2", "a", math.MaxInt64)
	l.pay("a", "p3", "a", -1)
	l.pay("b", "p4", "b", math.MinInt64)
	l.pay("b", "p5", "b", -1)
	l.pay("b", "p6", "b", math.MaxInt64)
	if got, want := l.outputs(), []string{
		fmt.Sprintf("a:p1#1=%d", int64(math.MaxInt64)),
		fmt.Sprintf("a:p3#2=%d", int64(math.MaxInt64-1)),
		fmt.Sprintf("b:p4#1=%d", int64(math.MinInt64)),
		"b:p6#2=-1",
	}; !slices.Equal(got, want) {
		t.Errorf("balances %q, want %q", got, want)
	}
	l.checkDeadLetters(
		deadLetter{"a", "process", `payment "p2" of 9223372036854775807 would overflow the balance 9223372036854775807 of account "a"`},
		deadLetter{"b", "process", `payment "p5" of -1 would overflow the balance -9223372036854775808 of account "b"`},
	)
	l.checkAccount("a", Account{Seq: 2, Balance: math.MaxInt64 - 1})
	l.checkAccount("b", Account{Seq: 2, Balance: -1})
}
