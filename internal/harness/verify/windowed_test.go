package verify

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// tpay is a payment on partition p at event time ts (ms).
func tpay(p int32, id, acct string, amount, ts int64) *kgo.Record {
	v, _ := json.Marshal(map[string]any{"id": id, "account": acct, "amount": amount, "ts": ts})
	return &kgo.Record{Partition: p, Key: []byte(acct), Value: v, Timestamp: time.UnixMilli(ts)}
}

func tot(acct string, start, end, count, sum int64) *kgo.Record {
	v, _ := json.Marshal(map[string]any{"account": acct, "start": start, "end": end, "count": count, "sum": sum})
	return &kgo.Record{Key: []byte(acct), Value: v}
}

// windowInput is hand-computed for W = 10s, G = 2s. Partition 0:
//
//	#1 a@1000 +10   T=1000   [0,10000) accepted
//	#2 a@9999 +5    T=9999   [0,10000)
//	#3 b@10000 +7   T=10000  [10000,20000): the boundary belongs to the next window
//	#4 a@8000 +1    T=10000  [0,10000) out of order, 0+10000+2000 > 10000: accepted
//	#5 a@11999 +2   T=11999  [10000,20000)
//	#6 a@3000 +100  T=11999  [0,10000): 12000 > 11999, accepted one ms before it closes
//	#7 b@12000 +3   T=12000  [10000,20000); [0,10000) closes (T >= end+G)
//	#8 a@4000 +50   T=12000  [0,10000): 12000 > 12000 is false: late
//	#9 junk                  skipped (dead letter), T unchanged
//	#10 a@-5 +1              negative time: dead letter
//	#11 a@25000 +4  T=25000  [20000,30000) open; [10000,20000) closes (22000 <= 25000)
//
// Partition 1 (its own stream time, which partition 0's does not advance):
//
//	#12 c@5000 +9   T=5000   [0,10000) open: 12000 > 5000
func windowInput() []*kgo.Record {
	junk := &kgo.Record{Key: []byte("a"), Value: []byte(`{"id":"p9","account":"a"}`), Timestamp: time.UnixMilli(12500)}
	return []*kgo.Record{
		tpay(0, "p1", "a", 10, 1000), tpay(0, "p2", "a", 5, 9999), tpay(0, "p3", "b", 7, 10000),
		tpay(0, "p4", "a", 1, 8000), tpay(0, "p5", "a", 2, 11999), tpay(0, "p6", "a", 100, 3000),
		tpay(0, "p7", "b", 3, 12000), tpay(0, "p8", "a", 50, 4000), junk, tpay(0, "p10", "a", 1, -5),
		tpay(0, "p11", "a", 4, 25000),
		tpay(1, "p12", "c", 9, 5000),
	}
}

func TestWindowedReference(t *testing.T) {
	ref := Windowed(windowInput(), 10*time.Second, 2*time.Second)
	wantClosed := map[WindowKey][]WindowTotal{
		{"a", 0}:     {{Count: 4, Sum: 116}},
		{"b", 10000}: {{Count: 2, Sum: 10}},
		{"a", 10000}: {{Count: 1, Sum: 2}},
	}
	if !maps.EqualFunc(ref.Closed, wantClosed, slices.Equal) {
		t.Errorf("closed %v, want %v", ref.Closed, wantClosed)
	}
	wantOpen := map[WindowKey]bool{{"a", 20000}: true, {"c", 0}: true}
	if !maps.Equal(ref.Open, wantOpen) {
		t.Errorf("open %v, want %v", ref.Open, wantOpen)
	}
	if len(ref.Late) != 1 || string(ref.Late[0].Value) != string(windowInput()[7].Value) {
		t.Errorf("late %v, want payment p8 only", ref.Late)
	}
	if ref.Payments != 10 || ref.OutOfOrder != 2 || ref.ExpectedWindows() != 3 {
		t.Errorf("payments %d (want 10), out of order %d (want 2: p4, p6), expected %d (want 3)", ref.Payments, ref.OutOfOrder, ref.ExpectedWindows())
	}
	if want := map[int32]int64{0: 25000, 1: 5000}; !maps.Equal(ref.StreamTime, want) {
		t.Errorf("stream time %v, want %v", ref.StreamTime, want)
	}
}

// With no grace a window closes exactly at its end, and a record at the end
// of a window both opens the next one and closes its own.
func TestWindowedReferenceNoGrace(t *testing.T) {
	in := []*kgo.Record{tpay(0, "1", "a", 1, 0), tpay(0, "2", "a", 1, 999), tpay(0, "3", "a", 1, 1000), tpay(0, "4", "a", 1, 999)}
	ref := Windowed(in, time.Second, 0)
	want := map[WindowKey][]WindowTotal{{"a", 0}: {{Count: 2, Sum: 2}}}
	if !maps.EqualFunc(ref.Closed, want, slices.Equal) || len(ref.Late) != 1 || !ref.Open[WindowKey{"a", 1000}] {
		t.Fatalf("closed %v late %d open %v; want %v, 1 late, [1000,2000) open", ref.Closed, len(ref.Late), ref.Open, want)
	}
}

func TestWindowedCompare(t *testing.T) {
	good := []*kgo.Record{tot("a", 0, 10000, 4, 116), tot("b", 10000, 20000, 2, 10), tot("a", 10000, 20000, 1, 2)}
	with := func(extra ...*kgo.Record) []*kgo.Record { return append(slices.Clone(good), extra...) }
	base := WindowReport{Payments: 10, OutOfOrder: 2, Late: 1, Expected: 3, Open: 2}
	report := func(outputs, dup, miss, early, wrong int) WindowReport {
		r := base
		r.Outputs, r.Duplicates, r.Missing, r.Early, r.Wrong = outputs, dup, miss, early, wrong
		return r
	}
	for _, tc := range []struct {
		name   string
		totals []*kgo.Record
		want   WindowReport
	}{
		{"exact", good, report(3, 0, 0, 0, 0)},
		{"exact in another order", []*kgo.Record{good[2], good[0], good[1]}, report(3, 0, 0, 0, 0)},
		{"duplicate", with(tot("b", 10000, 20000, 2, 10)), report(4, 1, 0, 0, 0)},
		{"missing", good[1:], report(2, 0, 1, 0, 0)},
		{"early: open window of partition 0", with(tot("a", 20000, 30000, 1, 4)), report(4, 0, 0, 1, 0)},
		{"early: partition 1's window, closed only by partition 0's time", with(tot("c", 0, 10000, 1, 9)), report(4, 0, 0, 1, 0)},
		{"wrong count (the late payment counted)", []*kgo.Record{tot("a", 0, 10000, 5, 166), good[1], good[2]}, report(3, 0, 0, 0, 1)},
		{"wrong end", []*kgo.Record{tot("a", 0, 9999, 4, 116), good[1], good[2]}, report(3, 0, 0, 0, 1)},
		{"wrong key", []*kgo.Record{{Key: []byte("b"), Value: good[0].Value}, good[1], good[2]}, report(3, 0, 0, 0, 1)},
		{"window with no payment", with(tot("z", 0, 10000, 1, 1)), report(4, 0, 0, 0, 1)},
		{"not a total", with(&kgo.Record{Value: []byte(`{"account":"a"}`)}), report(4, 0, 0, 0, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Windowed(windowInput(), 10*time.Second, 2*time.Second).Compare(tc.totals)
			if got.String() != tc.want.String() {
				t.Fatalf("got  %v\nwant %v\n%q", got, tc.want, got.Examples)
			}
			if got.OK() != (tc.name == "exact" || tc.name == "exact in another order") {
				t.Fatalf("OK() = %v: %v", got.OK(), got)
			}
			if !got.OK() && len(got.Examples) == 0 {
				t.Fatal("a failed comparison gives no example")
			}
		})
	}
}

func TestWindowedCheckLate(t *testing.T) {
	p8 := windowInput()[7]
	for _, tc := range []struct {
		name      string
		late      []*kgo.Record
		out, miss int
		extra     int
		wantOK    bool
	}{
		{"exact", []*kgo.Record{p8}, 1, 0, 0, true},
		{"missing", nil, 0, 1, 0, false},
		{"twice", []*kgo.Record{p8, p8}, 2, 0, 1, false},
		{"an accepted payment", []*kgo.Record{p8, windowInput()[0]}, 2, 0, 1, false},
		{"garbage", []*kgo.Record{p8, {Value: []byte("x")}}, 2, 0, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := Windowed(windowInput(), 10*time.Second, 2*time.Second).Compare([]*kgo.Record{
				tot("a", 0, 10000, 4, 116), tot("b", 10000, 20000, 2, 10), tot("a", 10000, 20000, 1, 2)})
			rep.CheckLate(tc.late)
			if rep.LateOutputs != tc.out || rep.LateMissing != tc.miss || rep.LateExtra != tc.extra || rep.OK() != tc.wantOK {
				t.Fatalf("%v (OK %v); want late topic %d, missing %d, extra %d, OK %v", rep, rep.OK(), tc.out, tc.miss, tc.extra, tc.wantOK)
			}
		})
	}
}

// A payment the broker duplicated is two payments to the reference, as it
// is to the pipeline.
func TestWindowedReferenceInputDuplicate(t *testing.T) {
	in := []*kgo.Record{tpay(0, "1", "a", 5, 100), tpay(0, "1", "a", 5, 100), tpay(0, "2", "a", 1, 5000)}
	got := Windowed(in, time.Second, 0).Closed[WindowKey{"a", 0}]
	if want := []WindowTotal{{Count: 2, Sum: 10}}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
