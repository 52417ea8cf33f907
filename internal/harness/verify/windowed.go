package verify

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// WindowKey names one tumbling window of one account.
type WindowKey struct {
	Account string
	Start   int64 // ms since the epoch
}

// WindowTotal is a window's count and sum of payment amounts.
type WindowTotal struct {
	Count, Sum int64
}

// WindowReference is what examples/windowed must emit for an input, by the
// semantics of its contract (issue 3, item 8), computed on its own: per
// input partition, in offset order, stream time T is the largest timestamp
// seen, including the current record; a payment at ts belongs to the window
// starting at ts - ts mod W and is accepted iff start + W + G > T, otherwise
// dropped as late; a window closes, and must be emitted exactly once, iff T
// reached end + G on its partition.
type WindowReference struct {
	Window, Grace int64 // ms
	// Payments are the valid payments (malformed ones and those with a
	// negative timestamp go to the dead-letter topic and touch nothing).
	Payments int
	// OutOfOrder are accepted payments older than their partition's stream
	// time; Late are the payments dropped as late, in input order.
	OutOfOrder int
	Late       []*kgo.Record
	// Closed are the windows that must be emitted: one total per input
	// partition that holds the window (one, unless an account's payments
	// were written to several partitions).
	Closed map[WindowKey][]WindowTotal
	// Open are the windows with accepted payments that never closed: they
	// must not be emitted.
	Open map[WindowKey]bool
	// StreamTime is each partition's final stream time.
	StreamTime map[int32]int64
}

// Windowed computes the reference for payments, which must be in partition
// and offset order (as ReadAll returns them). The window key is the record
// key, the account id, as the example groups by it.
func Windowed(payments []*kgo.Record, window, grace time.Duration) WindowReference {
	ref := WindowReference{
		Window: window.Milliseconds(), Grace: grace.Milliseconds(),
		Closed: map[WindowKey][]WindowTotal{}, Open: map[WindowKey]bool{}, StreamTime: map[int32]int64{},
	}
	w, g := ref.Window, ref.Grace
	type partKey struct {
		p int32
		k WindowKey
	}
	sums := map[partKey]*WindowTotal{}
	var order []partKey // first-seen order, so Closed lists are deterministic
	for _, r := range payments {
		p, ok := decodePayment(r.Value)
		ts := r.Timestamp.UnixMilli()
		if !ok || ts < 0 {
			continue
		}
		ref.Payments++
		t, seen := ref.StreamTime[r.Partition]
		if !seen || ts > t {
			t = ts
			ref.StreamTime[r.Partition] = t
		}
		start := ts - ts%w
		if start+w+g <= t {
			ref.Late = append(ref.Late, r)
			continue
		}
		if ts < t {
			ref.OutOfOrder++
		}
		pk := partKey{r.Partition, WindowKey{string(r.Key), start}}
		sum := sums[pk]
		if sum == nil {
			sum = &WindowTotal{}
			sums[pk] = sum
			order = append(order, pk)
		}
		sum.Count++
		sum.Sum += p.amount
	}
	for _, pk := range order {
		if pk.k.Start+w+g <= ref.StreamTime[pk.p] {
			ref.Closed[pk.k] = append(ref.Closed[pk.k], *sums[pk])
		} else {
			ref.Open[pk.k] = true
		}
	}
	return ref
}

// ExpectedWindows is the number of windows that must be emitted.
func (ref WindowReference) ExpectedWindows() int {
	n := 0
	for _, ts := range ref.Closed {
		n += len(ts)
	}
	return n
}

// WindowReport compares what a read_committed reader sees in the output
// topic (and, optionally, the late-records topic) with a reference.
type WindowReport struct {
	Payments, OutOfOrder, Late int
	// Expected are the closed windows; Open those that must not be
	// emitted yet.
	Expected, Open int
	Outputs        int
	// Duplicates are outputs beyond one per closed window. Missing are
	// closed windows with no output. Early are outputs of windows whose
	// close condition never held. Wrong are outputs whose count, sum, end
	// or key differ from the reference, that are not totals, or that name
	// a window no payment was accepted into.
	Duplicates, Missing, Early, Wrong int
	// LateChecked is set by CheckLate, which fills LateOutputs (records on
	// the late-records topic), LateMissing (late payments not there) and
	// LateExtra (records there beyond the late payments of their id).
	LateChecked                         bool
	LateOutputs, LateMissing, LateExtra int
	// LateMissingIDs and LateExtraIDs give LateMissing and LateExtra by
	// payment id (an extra that is not a payment is not among them).
	LateMissingIDs, LateExtraIDs map[string]int
	// Examples describe the first problems found.
	Examples []string

	lateIDs map[string]int
}

// OK reports whether the output is exactly the reference.
func (r WindowReport) OK() bool {
	return r.Duplicates == 0 && r.Missing == 0 && r.Early == 0 && r.Wrong == 0 &&
		r.LateMissing == 0 && r.LateExtra == 0
}

func (r WindowReport) String() string {
	s := fmt.Sprintf("payments=%d out_of_order=%d late=%d windows_expected=%d open=%d outputs=%d duplicates=%d missing=%d early=%d wrong=%d",
		r.Payments, r.OutOfOrder, r.Late, r.Expected, r.Open, r.Outputs, r.Duplicates, r.Missing, r.Early, r.Wrong)
	if r.LateChecked {
		s += fmt.Sprintf(" late_topic=%d late_missing=%d late_extra=%d", r.LateOutputs, r.LateMissing, r.LateExtra)
	}
	return s
}

func (r *WindowReport) note(format string, args ...any) {
	if len(r.Examples) < 10 {
		r.Examples = append(r.Examples, fmt.Sprintf(format, args...))
	}
}

// total is an output record's value, as the example's contract writes it.
type total struct {
	Account *string `json:"account"`
	Start   *int64  `json:"start"`
	End     *int64  `json:"end"`
	Count   *int64  `json:"count"`
	Sum     *int64  `json:"sum"`
}

// Compare checks the output topic's records (in partition order, as ReadAll
// returns them) against the reference.
func (ref WindowReference) Compare(totals []*kgo.Record) WindowReport {
	rep := WindowReport{
		Payments: ref.Payments, OutOfOrder: ref.OutOfOrder, Late: len(ref.Late),
		Expected: ref.ExpectedWindows(), Open: len(ref.Open), lateIDs: map[string]int{},
	}
	for _, r := range ref.Late {
		p, _ := decodePayment(r.Value)
		rep.lateIDs[p.id]++
	}
	seen := map[WindowKey][]WindowTotal{}
	for _, r := range totals {
		rep.Outputs++
		var t total
		if err := json.Unmarshal(r.Value, &t); err != nil || t.Account == nil || t.Start == nil || t.End == nil || t.Count == nil || t.Sum == nil {
			rep.Wrong++
			rep.note("output %s/%d@%d is not a total: %q", r.Topic, r.Partition, r.Offset, r.Value)
			continue
		}
		k := WindowKey{*t.Account, *t.Start}
		got := WindowTotal{*t.Count, *t.Sum}
		exp, closed := ref.Closed[k]
		switch {
		case !closed && ref.Open[k]:
			rep.Early++
			rep.note("window %s [%d,%d) emitted with count=%d sum=%d but never closed (stream time of the input partition stayed below end+grace)",
				k.Account, k.Start, *t.End, got.Count, got.Sum)
			continue
		case !closed:
			rep.Wrong++
			rep.note("window %s [%d,%d) emitted, but no payment was accepted into it", k.Account, k.Start, *t.End)
			continue
		}
		seen[k] = append(seen[k], got)
		if len(seen[k]) > len(exp) {
			rep.Duplicates++
			rep.note("window %s [%d,%d) emitted %d times: %v, want %v", k.Account, k.Start, *t.End, len(seen[k]), seen[k], exp)
			continue
		}
		match := false
		for _, e := range exp {
			match = match || e == got
		}
		if !match || *t.End != k.Start+ref.Window || string(r.Key) != k.Account {
			rep.Wrong++
			rep.note("window %s [%d,%d) (record key %q): got count=%d sum=%d, want end %d and one of %v",
				k.Account, k.Start, *t.End, r.Key, got.Count, got.Sum, k.Start+ref.Window, exp)
		}
	}
	// Sorted, so that the examples of a failure are reproducible.
	keys := make([]WindowKey, 0, len(ref.Closed))
	for k := range ref.Closed {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Start != keys[j].Start {
			return keys[i].Start < keys[j].Start
		}
		return keys[i].Account < keys[j].Account
	})
	for _, k := range keys {
		if n := len(ref.Closed[k]) - len(seen[k]); n > 0 {
			rep.Missing += n
			rep.note("window %s [%d,%d) closed with %v and was not emitted", k.Account, k.Start, k.Start+ref.Window, ref.Closed[k])
		}
	}
	return rep
}

// CheckLate compares the late-records topic with the payments the
// reference drops as late, by payment id: each must be there exactly as
// often as it was dropped.
func (r *WindowReport) CheckLate(late []*kgo.Record) {
	r.LateChecked = true
	r.LateMissingIDs, r.LateExtraIDs = map[string]int{}, map[string]int{}
	seen := map[string]int{}
	for _, rec := range late {
		r.LateOutputs++
		p, ok := decodePayment(rec.Value)
		if !ok {
			r.LateExtra++
			r.note("late record %s/%d@%d is not a payment: %q", rec.Topic, rec.Partition, rec.Offset, rec.Value)
			continue
		}
		seen[p.id]++
		if seen[p.id] > r.lateIDs[p.id] {
			r.LateExtra++
			r.LateExtraIDs[p.id]++
			r.note("payment %s is on the late-records topic %d times, dropped as late %d times", p.id, seen[p.id], r.lateIDs[p.id])
		}
	}
	ids := make([]string, 0, len(r.lateIDs))
	for id := range r.lateIDs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if n := r.lateIDs[id] - seen[id]; n > 0 {
			r.LateMissing += n
			r.LateMissingIDs[id] = n
			r.note("payment %s was late and is missing from the late-records topic", id)
		}
	}
}
