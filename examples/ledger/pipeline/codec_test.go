package pipeline

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/eddy-streams/eddy/serde"
)

// The fast codecs must agree with encoding/json on everything.
func TestPaymentSerdeAgreesWithEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{"id":"p1","account":"a","amount":5}`,
		`{"amount":-12,"account":"acct-1","id":"x"}`,
		` { "id" : "p1" , "account" : "a" , "amount" : 0 } `,
		`{"id":"p\u00e9","account":"a","amount":5}`,
		`{"id":"p1","account":"a","amount":5,"extra":[1,2]}`,
		`{"id":"p1","account":"a","amount":05}`,
		`{"id":"p1","account":"a","amount":5.5}`,
		`{"id":"p1","account":"a","amount":-0}`,
		`{"id":"p1","account":"a"}`,
		`{"id":"","account":"a","amount":1}`,
		`{"id":"p1","account":"a","amount":99999999999999999999}`,
		`{"id":"p1","id":"p2","account":"a","amount":1}`,
		`{"id":"p1","account":"a","amount":1}x`,
		`{}`, `[]`, `null`, ``, `{"id":`,
		// The windowed example's payments carry ts; the ledger has always
		// accepted them, whatever ts holds.
		`{"id":"p1","account":"a","amount":5,"ts":1700000000123}`,
		`{"ts":-7,"amount":5,"account":"a","id":"p1"}`,
		`{"id":"p1","account":"a","amount":5,"ts":1.5}`,
		`{"id":"p1","account":"a","amount":5,"ts":"soon"}`,
		`{"id":"p1","account":"a","amount":5,"ts":null}`,
		`{"id":"p1","account":"a","amount":5,"ts":1,"ts":2}`,
		`{"id":"p1","account":"a","amount":5,"ts":01}`,
		// Invalid UTF-8 and lone surrogates: encoding/json would decode
		// them as U+FFFD.
		"{\"id\":\"p\xff\",\"account\":\"a\",\"amount\":5}",
		"{\"id\":\"p1\",\"account\":\"a\xc0\",\"amount\":5}",
		`{"id":"p1","account":"a\udfff","amount":5}`,
		`{"id":"p1","account":"\ud83d\ude00","amount":5}`,
		"{\"id\":\"p1\",\"account\":\"\u00e9\",\"amount\":5}",
	} {
		fast, fastErr := PaymentSerde{}.Deserialize([]byte(in))
		want, valid, slowErr := referencePayment([]byte(in))
		if valid != (fastErr == nil) {
			t.Errorf("%s: fast error %v, encoding/json valid=%v (%v)", in, fastErr, valid, slowErr)
			continue
		}
		if valid && fast != want {
			t.Errorf("%s: fast %+v, encoding/json %+v", in, fast, want)
		}
	}
}

// referencePayment decodes in with encoding/json alone: a payment is valid
// with a non-empty id and account and an integer amount; ts is read when it
// is an integer and is zero otherwise. Input that encoding/json would decode
// with U+FFFD in place of invalid UTF-8 or a lone surrogate's escape is
// refused (serde.CheckJSONUnicode, tested in serde).
func referencePayment(in []byte) (p Payment, valid bool, err error) {
	if err := serde.CheckJSONUnicode(in); err != nil {
		return p, false, err
	}
	var raw struct {
		ID      *string         `json:"id"`
		Account *string         `json:"account"`
		Amount  *int64          `json:"amount"`
		TS      json.RawMessage `json:"ts"`
	}
	if err := json.Unmarshal(in, &raw); err != nil {
		return p, false, err
	}
	if raw.ID == nil || *raw.ID == "" || raw.Account == nil || *raw.Account == "" || raw.Amount == nil {
		return p, false, nil
	}
	var ts int64
	if json.Unmarshal(raw.TS, &ts) != nil {
		ts = 0
	}
	return Payment{ID: *raw.ID, Account: *raw.Account, Amount: *raw.Amount, TS: ts}, true, nil
}

func TestBalanceSerdeMatchesMarshal(t *testing.T) {
	for _, b := range []Balance{
		{"p1", "acct-1", -5, 1, -5},
		{"p<1>", "a&b", 0, 2, 9},
		{"p\"q", "é", 1 << 62, 3, -1 << 62},
	} {
		got, err := BalanceSerde{}.Serialize([]byte("x"), b)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(b)
		if string(got[1:]) != string(want) {
			t.Errorf("got %s, want %s", got[1:], want)
		}
		back, err := BalanceSerde{}.Deserialize(got[1:])
		if err != nil || back != b {
			t.Errorf("round trip %+v: %+v %v", b, back, err)
		}
	}
}

func FuzzPaymentSerde(f *testing.F) {
	f.Add([]byte(`{"id":"p1","account":"a","amount":5}`))
	f.Add([]byte(`{"id":"p1","account":"a","amount":5,"ts":1700000000123}`))
	f.Add([]byte("{\"id\":\"p\xff\",\"account\":\"a\",\"amount\":5}"))
	f.Add([]byte(`{"id":"p1","account":"a\ud800","amount":5}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		fast, fastErr := PaymentSerde{}.Deserialize(in)
		want, valid, _ := referencePayment(in)
		if valid != (fastErr == nil) {
			t.Fatalf("%q: fast error %v, encoding/json valid=%v", in, fastErr, valid)
		}
		if valid && fast != want {
			t.Fatalf("%q: fast %+v, encoding/json %+v", in, fast, want)
		}
	})
}

func BenchmarkPaymentSerde(b *testing.B) {
	in := []byte(`{"id":"p123456","account":"acct-00042","amount":-250}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (PaymentSerde{}).Deserialize(in); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzAccountAndBalanceSerdes(f *testing.F) {
	acc, _ := AccountSerde{}.Serialize(nil, Account{Seq: 3, Balance: -7})
	f.Add(acc)
	bal, _ := BalanceSerde{}.Serialize(nil, Balance{ID: "p1", Account: "a", Amount: 5, Seq: 1, Balance: 5})
	f.Add(bal)
	f.Fuzz(func(t *testing.T, b []byte) {
		if a, err := (AccountSerde{}).Deserialize(b); err == nil {
			out, _ := AccountSerde{}.Serialize(nil, a)
			if !bytes.Equal(out, b) {
				t.Fatalf("account %x decoded to %+v, re-encoded to %x", b, a, out)
			}
		}
		if v, err := (BalanceSerde{}).Deserialize(b); err == nil {
			out, err := BalanceSerde{}.Serialize(nil, v)
			if err != nil {
				t.Fatalf("balance %q decoded to %+v, which does not encode: %v", b, v, err)
			}
			back, err := BalanceSerde{}.Deserialize(out)
			if err != nil || back != v {
				t.Fatalf("balance %+v re-encoded to %q, decoded to %+v (%v)", v, out, back, err)
			}
		}
	})
}

// TestCodecsAllocateOnlyTheStrings: on the common path the payment decoder
// allocates only its two strings, the key decoder its one, and the balance
// encoder nothing; the strictness checks (valid UTF-8, key equals account)
// add no allocation.
func TestCodecsAllocateOnlyTheStrings(t *testing.T) {
	in := []byte(`{"id":"p123456","account":"acct-00042","amount":-250}`)
	key := []byte("acct-00042")
	dst := make([]byte, 0, 256)
	bal := Balance{ID: "p123456", Account: "acct-00042", Amount: -250, Seq: 7, Balance: 1234}
	for _, c := range []struct {
		name string
		want float64
		fn   func()
	}{
		{"PaymentSerde.Deserialize", 2, func() { _, _ = PaymentSerde{}.Deserialize(in) }},
		{"AccountKeySerde.Deserialize", 1, func() { _, _ = AccountKeySerde{}.Deserialize(key) }},
		{"BalanceSerde.Serialize", 0, func() { _, _ = BalanceSerde{}.Serialize(dst[:0], bal) }},
	} {
		if got := testing.AllocsPerRun(100, c.fn); got != c.want {
			t.Errorf("%s: %v allocations, want %v", c.name, got, c.want)
		}
	}
}
