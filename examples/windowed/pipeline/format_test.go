package pipeline

import (
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	ledger "github.com/eddy-streams/eddy/examples/ledger/pipeline"
	"github.com/eddy-streams/eddy/internal/testutil/registrytest"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/registry"
)

// TestWindowedFormats: with the payments in Avro or Protobuf (--format),
// the totals are those of the same payments in JSON, a late payment goes
// to the late topic in the payments' format, and a plain-JSON payment is
// dead-lettered.
func TestWindowedFormats(t *testing.T) {
	for _, format := range []ledger.Format{ledger.Avro, ledger.Protobuf} {
		t.Run(string(format), func(t *testing.T) {
			reg, err := registry.New(registry.Config{URLs: []string{registrytest.Start(t)}})
			if err != nil {
				t.Fatal(err)
			}
			payments, err := ledger.PaymentCodec(format, reg, "payments")
			if err != nil {
				t.Fatal(err)
			}
			late, err := ledger.PaymentCodec(format, reg, "late")
			if err != nil {
				t.Fatal(err)
			}
			cfg := eddy.Config{}
			ledger.SetErrorPolicies(&cfg)
			topo := Topology(Options{Input: "payments", Output: "totals", LateTopic: "late", Window: 10 * time.Second, Grace: 2 * time.Second,
				Payments: payments, LatePayments: late})
			d, err := eddytest.New(topo, eddytest.Options{Config: cfg})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			dr := &driver{t: t, d: d,
				totals: eddytest.Output(d, "totals", serde.String(), serde.JSON[Total]()),
				late:   eddytest.Output(d, "late", serde.String(), late),
				dlq:    eddytest.Output(d, eddy.DeadLetterTopic("payments"), serde.Bytes(), serde.Bytes()),
			}
			pay := func(id, account string, amount, ts int64) {
				t.Helper()
				v, err := payments.Serialize(nil, Payment{ID: id, Account: account, Amount: amount, TS: ts})
				if err != nil {
					t.Fatal(err)
				}
				if err := d.PipeRaw("payments", []byte(account), v, ts); err != nil {
					t.Fatal(err)
				}
			}
			pay("p1", "a", 5, 1_000)
			pay("p2", "a", 7, 9_000)
			if err := d.PipeRaw("payments", []byte("a"), paymentJSON("json", "a", 100, 9_500), 9_500); err != nil {
				t.Fatal(err)
			}
			pay("p3", "b", 1, 20_000) // stream time 20 s: [0, 10 s) closes at 12 s
			pay("p4", "a", 3, 2_000)  // late: its window closed
			if got, want := strings.Join(dr.read(), " "), "a[0,10000) n=2 sum=12"; got != want {
				t.Errorf("totals %s, want %s", got, want)
			}
			lates, err := dr.late.ReadAll()
			if err != nil || len(lates) != 1 || lates[0].Value.ID != "p4" {
				t.Errorf("late topic %v (%v), want p4 only", lates, err)
			}
			dead, err := dr.dlq.ReadAll()
			if err != nil || len(dead) != 1 {
				t.Fatalf("dead letters %v (%v), want the plain-JSON payment", dead, err)
			}
			var reason string
			for _, h := range dead[0].Headers {
				if h.Key == eddy.HeaderDLQError {
					reason = string(h.Value)
				}
			}
			if !strings.Contains(reason, "magic byte") {
				t.Errorf("dead letter's reason %q, want the magic byte's", reason)
			}
		})
	}
}
