package pipeline

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	ledger "github.com/eddy-streams/eddy/examples/ledger/pipeline"
	"github.com/eddy-streams/eddy/internal/harness/verify"
	"github.com/eddy-streams/eddy/serde"
)

func paymentJSON(id, account string, amount, ts int64) []byte {
	v, _ := json.Marshal(Payment{ID: id, Account: account, Amount: amount, TS: ts})
	return v
}

type driver struct {
	t      *testing.T
	d      *eddytest.Driver
	totals *eddytest.OutputTopic[string, Total]
	late   *eddytest.OutputTopic[string, Payment]
}

func newDriver(t *testing.T, window, grace time.Duration) *driver {
	t.Helper()
	d, err := eddytest.New(Topology(Options{Input: "payments", Output: "totals", LateTopic: "late", Window: window, Grace: grace}), eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return &driver{t: t, d: d,
		totals: eddytest.Output(d, "totals", serde.String(), serde.JSON[Total]()),
		late:   eddytest.Output(d, "late", serde.String(), serde.Serde[Payment](ledger.PaymentSerde{})),
	}
}

func (d *driver) pipe(id, account string, amount, ts int64) {
	d.t.Helper()
	if err := d.d.PipeRaw("payments", []byte(account), paymentJSON(id, account, amount, ts), ts); err != nil {
		d.t.Fatal(err)
	}
}

func (d *driver) read() []string {
	d.t.Helper()
	recs, err := d.totals.ReadAll()
	if err != nil {
		d.t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		v := r.Value
		if r.Key != v.Account {
			d.t.Errorf("record key %q, account %q", r.Key, v.Account)
		}
		out = append(out, fmt.Sprintf("%s[%d,%d) n=%d sum=%d", v.Account, v.Start, v.End, v.Count, v.Sum))
	}
	return out
}

// TestWindowedTotals follows the hand-computed case of the verifier's
// reference (internal/harness/verify, TestWindowedReference) step by step: W = 10s,
// G = 2s; nothing is emitted before stream time reaches end + grace, a
// window is emitted once, late and malformed payments are not counted.
func TestWindowedTotals(t *testing.T) {
	d := newDriver(t, 10*time.Second, 2*time.Second)
	step := func(name string, want ...string) {
		t.Helper()
		if got := d.read(); !slices.Equal(got, want) {
			t.Fatalf("%s: emitted %q, want %q", name, got, want)
		}
	}
	d.pipe("p1", "a", 10, 1000)
	d.pipe("p2", "a", 5, 9999)
	d.pipe("p3", "b", 7, 10000)  // the boundary opens [10000,20000)
	d.pipe("p4", "a", 1, 8000)   // out of order, within grace
	d.pipe("p5", "a", 2, 11999)  // stream time 11999: [0,10000) still open
	d.pipe("p6", "a", 100, 3000) // accepted 1 ms before its window closes
	step("stream time 11999 (end+grace-1)")
	d.pipe("p7", "b", 3, 12000) // stream time 12000 = end + grace
	step("stream time 12000", "a[0,10000) n=4 sum=116")
	d.pipe("p8", "a", 50, 4000) // late: its window closed
	if err := d.d.PipeRaw("payments", []byte("a"), []byte(`{"id":"p9","account":"a"}`), 12500); err != nil {
		t.Fatal(err)
	}
	d.pipe("p10", "a", 1, 13000)
	step("stream time 13000")
	d.pipe("p11", "a", 4, 25000)
	step("stream time 25000", "a[10000,20000) n=2 sum=3", "b[10000,20000) n=2 sum=10")
	d.pipe("p12", "b", 1, 25001)
	step("no window closes twice")

	late, err := d.late.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(late) != 1 || late[0].Value.ID != "p8" || late[0].Value.TS != 4000 {
		t.Errorf("late records %+v, want p8 only, with its ts", late)
	}
	if n := d.d.LateRecordsDropped(); n != 1 {
		t.Errorf("LateRecordsDropped = %d, want 1", n)
	}
	dlq, err := eddytest.Output(d.d, eddy.DeadLetterTopic("payments"), serde.String(), serde.String()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(dlq) != 1 {
		t.Errorf("dead letters %+v, want the payment without an amount", dlq)
	}
}

// TestWindowedMatchesReference pipes random payments, mostly in time order
// with some out of order within grace and some late, and checks the
// outputs against the verifier's reference, an independent computation of
// the same semantics.
func TestWindowedMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		window, grace time.Duration
	}{{10 * time.Second, 2 * time.Second}, {time.Second, 0}, {3 * time.Second, 5 * time.Second}} {
		t.Run(fmt.Sprintf("W=%v,G=%v", tc.window, tc.grace), func(t *testing.T) {
			d := newDriver(t, tc.window, tc.grace)
			rng := rand.New(rand.NewPCG(uint64(tc.window), 3))
			var in []*kgo.Record
			now := int64(1_700_000_000_000)
			for i := range 3000 {
				now += rng.Int64N(40)
				ts := now
				switch r := rng.IntN(100); {
				case r < 10:
					ts -= rng.Int64N(tc.grace.Milliseconds() + 1)
				case r < 13:
					ts -= rng.Int64N(2 * (tc.window + tc.grace).Milliseconds())
				}
				acct := fmt.Sprintf("acct-%d", rng.IntN(20))
				id := fmt.Sprintf("p%d", i)
				amount := rng.Int64N(200) - 50
				d.pipe(id, acct, amount, ts)
				in = append(in, &kgo.Record{Key: []byte(acct), Value: paymentJSON(id, acct, amount, ts), Timestamp: time.UnixMilli(ts)})
			}
			recs, err := d.totals.ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			var totals []*kgo.Record
			for _, r := range recs {
				v, _ := json.Marshal(r.Value)
				totals = append(totals, &kgo.Record{Key: []byte(r.Key), Value: v})
			}
			ref := verify.Windowed(in, tc.window, tc.grace)
			rep := ref.Compare(totals)
			lateRecs, err := d.late.ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			var late []*kgo.Record
			for _, r := range lateRecs {
				v, _ := json.Marshal(r.Value)
				late = append(late, &kgo.Record{Key: []byte(r.Key), Value: v})
			}
			rep.CheckLate(late)
			t.Log(rep)
			if !rep.OK() {
				t.Fatalf("%v\n%q", rep, rep.Examples)
			}
			if rep.Expected < 50 || rep.OutOfOrder == 0 || (tc.grace < tc.window && rep.Late == 0) {
				t.Fatalf("the workload exercised too little: %v", rep)
			}
		})
	}
}
