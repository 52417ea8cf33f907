package pipeline

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
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
	dlq    *eddytest.OutputTopic[[]byte, []byte]
}

func newDriver(t *testing.T, window, grace time.Duration) *driver {
	t.Helper()
	cfg := eddy.Config{}
	ledger.SetErrorPolicies(&cfg) // as Main
	d, err := eddytest.New(Topology(Options{Input: "payments", Output: "totals", LateTopic: "late", Window: window, Grace: grace}), eddytest.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return &driver{t: t, d: d,
		totals: eddytest.Output(d, "totals", serde.String(), serde.JSON[Total]()),
		late:   eddytest.Output(d, "late", serde.String(), serde.Serde[Payment](ledger.PaymentSerde{})),
		dlq:    eddytest.Output(d, eddy.DeadLetterTopic("payments"), serde.Bytes(), serde.Bytes()),
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

// pipeRaw sends a payment with a raw key (nil: a null key) and value.
func (d *driver) pipeRaw(key []byte, value string, ts int64) {
	d.t.Helper()
	if err := d.d.PipeRaw("payments", key, []byte(value), ts); err != nil {
		d.t.Fatalf("pipe %q %q: %v", key, value, err)
	}
}

// checkDeadLetters compares the dead letters' keys, stages and reasons
// (want[i][2] is a substring of the reason) with want.
func (d *driver) checkDeadLetters(want ...[3]string) {
	d.t.Helper()
	recs, err := d.dlq.ReadAll()
	if err != nil {
		d.t.Fatal(err)
	}
	var got [][3]string
	for _, r := range recs {
		dl := [3]string{string(r.Key)}
		for _, h := range r.Headers {
			switch h.Key {
			case eddy.HeaderDLQStage:
				dl[1] = string(h.Value)
			case eddy.HeaderDLQError:
				dl[2] = string(h.Value)
			}
		}
		got = append(got, dl)
		d.t.Logf("dead letter %q, stage %s: %s", dl[0], dl[1], dl[2])
	}
	if len(got) != len(want) {
		d.t.Fatalf("dead letters %q, want %d: %q", got, len(want), want)
	}
	for i, w := range want {
		if g := got[i]; g[0] != w[0] || g[1] != w[1] || !strings.Contains(g[2], w[2]) {
			d.t.Errorf("dead letter %d: %q, want key %q stage %q reason containing %q", i, g, w[0], w[1], w[2])
		}
	}
}

// TestWindowedKeysByRecordKey (issue 16, finding 2): a payment whose
// account differs from its record key, or that has no key, is
// dead-lettered and counts in no window.
func TestWindowedKeysByRecordKey(t *testing.T) {
	d := newDriver(t, 10*time.Second, 0)
	d.pipe("p1", "a", 10, 1000)
	d.pipeRaw([]byte("b"), `{"id":"p2","account":"a","amount":5,"ts":2000}`, 2000)
	d.pipeRaw(nil, `{"id":"p3","account":"a","amount":7,"ts":3000}`, 3000)
	d.pipeRaw([]byte{}, `{"id":"p4","account":"a","amount":7,"ts":3000}`, 3000)
	d.pipe("p5", "a", 1, 4000)
	d.pipe("p6", "c", 1, 10000) // closes [0,10000)
	if got, want := d.read(), []string{"a[0,10000) n=2 sum=11"}; !slices.Equal(got, want) {
		t.Errorf("totals %q, want %q", got, want)
	}
	d.checkDeadLetters(
		[3]string{"b", "process", `payment account "a" differs from its record key "b"`},
		[3]string{"", "decode", "key: the record key is null"},
		[3]string{"", "decode", "key: the record key is empty"},
	)
}

// TestWindowedRefusesInvalidUTF8 (issue 16, finding 3): keys x-\xff and
// x-\xc0 used to give two totals of one account x-\uFFFD; they are decode
// errors.
func TestWindowedRefusesInvalidUTF8(t *testing.T) {
	d := newDriver(t, 10*time.Second, 0)
	d.pipeRaw([]byte("x-\xff"), "{\"id\":\"p1\",\"account\":\"x-\xff\",\"amount\":1}", 1000)
	d.pipeRaw([]byte("x-\xc0"), "{\"id\":\"p2\",\"account\":\"x-\xc0\",\"amount\":1}", 1000)
	d.pipeRaw([]byte("a"), "{\"id\":\"p\xff\",\"account\":\"a\",\"amount\":1}", 1000)
	d.pipe("p4", "a", 2, 2000)
	d.pipe("p5", "c", 1, 10000) // closes [0,10000)
	if got, want := d.read(), []string{"a[0,10000) n=1 sum=2"}; !slices.Equal(got, want) {
		t.Errorf("totals %q, want %q", got, want)
	}
	d.checkDeadLetters(
		[3]string{"x-\xff", "decode", "key: serde: string: invalid UTF-8 at byte 2"},
		[3]string{"x-\xc0", "decode", "key: serde: string: invalid UTF-8 at byte 2"},
		[3]string{"a", "decode", "invalid UTF-8 at byte 8"},
	)
}

// TestWindowedRefusesSumOverflow (issue 16, finding 4): two payments of
// MaxInt64 in one window used to sum to -2. The second is dead-lettered
// and the window's total keeps the others.
func TestWindowedRefusesSumOverflow(t *testing.T) {
	d := newDriver(t, 10*time.Second, 0)
	d.pipe("p1", "a", math.MaxInt64, 1000)
	d.pipe("p2", "a", math.MaxInt64, 2000)
	d.pipe("p3", "a", -1, 3000)
	d.pipe("p4", "b", math.MinInt64, 3000)
	d.pipe("p5", "b", -1, 4000)
	d.pipe("p6", "a", 1, 10000) // another window: a new sum
	d.pipe("p7", "c", 1, 20000) // closes [0,10000) and [10000,20000)
	if got, want := d.read(), []string{
		fmt.Sprintf("a[0,10000) n=2 sum=%d", int64(math.MaxInt64-1)),
		fmt.Sprintf("b[0,10000) n=1 sum=%d", int64(math.MinInt64)),
		"a[10000,20000) n=1 sum=1",
	}; !slices.Equal(got, want) {
		t.Errorf("totals %q, want %q", got, want)
	}
	d.checkDeadLetters(
		[3]string{"a", "process", `payment "p2" of 9223372036854775807 would overflow the sum 9223372036854775807 of account "a"'s window`},
		[3]string{"b", "process", `payment "p5" of -1 would overflow the sum -9223372036854775808 of account "b"'s window`},
	)
}
