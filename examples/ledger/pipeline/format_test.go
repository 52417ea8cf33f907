package pipeline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/internal/testutil/registrytest"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/schemaregistry"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/registry"
)

// startRegistry serves eddy's schema registry in-process and returns a
// client of it.
func startRegistry(t *testing.T) *registry.Client {
	t.Helper()
	cl, err := registry.New(registry.Config{URLs: []string{registrytest.Start(t)}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestLedgerFormats runs the ledger with payments and balances in Avro and
// in Protobuf: balances as in JSON, and what is not a payment of the
// format (plain JSON, an unknown schema id, a payment without an account)
// dead-lettered with the reason.
func TestLedgerFormats(t *testing.T) {
	for _, format := range []Format{Avro, Protobuf} {
		t.Run(string(format), func(t *testing.T) {
			reg := startRegistry(t)
			codecs, err := NewCodecs(t.Context(), format, reg, "payments", "balances")
			if err != nil {
				t.Fatal(err)
			}
			// The balances' schema is registered at start; the
			// payments' is not (the ledger only reads them).
			subjects, err := srClient(t, reg).Subjects(t.Context())
			if err != nil || strings.Join(subjects, ",") != "balances-value" {
				t.Fatalf("registered subjects %q (%v), want balances-value only", subjects, err)
			}
			cfg := eddy.Config{}
			SetErrorPolicies(&cfg)
			d, err := eddytest.New(TopologyWith("payments", "balances", codecs), eddytest.Options{Config: cfg})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			l := &ledgerDriver{t: t, d: d,
				balances: eddytest.Output(d, "balances", serde.String(), codecs.Balances),
				dlq:      eddytest.Output(d, eddy.DeadLetterTopic("payments"), serde.Bytes(), serde.Bytes()),
			}
			pay := func(id, account string, amount int64) {
				t.Helper()
				v, err := codecs.Payments.Serialize(nil, Payment{ID: id, Account: account, Amount: amount})
				if err != nil {
					t.Fatal(err)
				}
				l.pipe([]byte(account), string(v))
			}
			pay("p1", "a", 10)
			pay("p2", "b", -5)
			l.pipe([]byte("a"), `{"id":"json","account":"a","amount":1}`) // plain JSON on a framed topic
			l.pipe([]byte("a"), "\x00\x00\x00\x03\xe7payload")            // schema id 999, unknown
			pay("p3", "", 7)                                              // no account: refused by the key serde first
			noAccount, err := codecs.Payments.Serialize(nil, Payment{ID: "p4", Amount: 1})
			if err != nil {
				t.Fatal(err)
			}
			l.pipe([]byte("a"), string(noAccount))
			pay("p5", "a", 32)
			if got, want := strings.Join(l.outputs(), " "), "a:p1#1=10 b:p2#1=-5 a:p5#2=42"; got != want {
				t.Errorf("balances %s, want %s", got, want)
			}
			l.checkDeadLetters(
				deadLetter{"a", "decode", "magic byte"},
				deadLetter{"a", "decode", "999"},
				deadLetter{"", "decode", "the record key is empty"},
				deadLetter{"a", "decode", `missing field: "account"`},
			)
		})
	}
}

// TestLedgerFormatIncompatibleSchema: a balances subject that holds a
// schema the ledger's cannot follow stops the ledger at start with the
// registry's message.
func TestLedgerFormatIncompatibleSchema(t *testing.T) {
	reg := startRegistry(t)
	old := `{"type":"record","name":"Balance","namespace":"eddy.examples.ledger","fields":[{"name":"seq","type":"string"}]}`
	if _, err := reg.Register(t.Context(), "balances-value", sr.Schema{Schema: old}); err != nil {
		t.Fatal(err)
	}
	_, err := NewCodecs(t.Context(), Avro, reg, "payments", "balances")
	if err == nil || !strings.Contains(err.Error(), "the balances' schema") || !strings.Contains(err.Error(), "ncompatible") {
		t.Fatalf("NewCodecs = %v; want the registry's refusal of the balances' schema", err)
	}
}

// srClient is a plain franz-go client of the registry reg talks to.
func srClient(t *testing.T, reg *registry.Client) *sr.Client {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func ExampleNewCodecs() {
	reg, err := schemaregistry.NewServer("")
	if err != nil {
		panic(err)
	}
	defer reg.Close()
	srv := httptest.NewServer(reg)
	defer srv.Close()
	cl, err := registry.New(registry.Config{URLs: []string{srv.URL}})
	if err != nil {
		panic(err)
	}
	codecs, err := NewCodecs(context.Background(), Avro, cl, "payments", "balances")
	if err != nil {
		panic(err)
	}
	// NewCodecs registered the balances' schema (id 1); the first payment
	// written registers the payments' (id 2), which its header carries.
	b, _ := codecs.Payments.Serialize(nil, Payment{ID: "p1", Account: "a", Amount: 10})
	p, err := codecs.Payments.Deserialize(b)
	fmt.Printf("% x\n%+v %v\n", b[:5], p, err)
	// Output:
	// 00 00 00 00 02
	// {ID:p1 Account:a Amount:10 TS:0} <nil>
}
