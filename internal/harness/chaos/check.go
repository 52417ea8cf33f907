package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	ledger "github.com/eddy-streams/eddy/examples/ledger/pipeline"
	windowed "github.com/eddy-streams/eddy/examples/windowed/pipeline"
	"github.com/eddy-streams/eddy/internal/harness/verify"
)

// validPayment is the examples' rule: a non-empty id and account and an
// integer amount (anything else is a dead letter).
func validPayment(v []byte) bool {
	var p struct {
		ID      *string `json:"id"`
		Account *string `json:"account"`
		Amount  *int64  `json:"amount"`
	}
	return json.Unmarshal(v, &p) == nil && p.ID != nil && *p.ID != "" && p.Account != nil && *p.Account != "" && p.Amount != nil
}

// verify reads every topic back once the apps stopped and fills the report.
func (h *harness) verify(ctx context.Context) error {
	rep := h.rep
	read := func(topic string) ([]*kgo.Record, error) { return verify.ReadAll(ctx, nil, topic, h.clOpts...) }
	payments, err := read(inputTopic)
	if err != nil {
		return err
	}
	balances, err := read(outputTopic)
	if err != nil {
		return err
	}
	rep.Ledger = verify.Ledger(payments, balances)
	rep.IdenticalDuplicates = identicalDuplicates(balances)
	if rep.Ledger.Missing > 0 && rep.BrokerKills > 0 {
		unmarked, err := unmarkedIDs(ctx, h.clOpts, outputTopic, balanceID)
		if err != nil {
			return err
		}
		rep.UnmarkedMissing = countMissing(payments, balances, unmarked)
	}
	apps := 1
	if h.opts.Windowed {
		apps++
		totals, err := read(totalsTopic)
		if err != nil {
			return err
		}
		late, err := read(lateTopic)
		if err != nil {
			return err
		}
		w := verify.Windowed(payments, windowed.DefaultWindow, windowed.DefaultGrace).Compare(totals)
		w.CheckLate(late)
		rep.Windows = &w
		if (w.Duplicates > 0 || w.LateMissing > 0 || w.LateExtra > 0) && rep.BrokerKills > 0 {
			changelogLog, err := scanLog(ctx, h.clOpts, windowedChangelog)
			if err != nil {
				return err
			}
			rep.TornWindowDuplicates = tornTotalsDuplicates(totals, changelogLog.torn())
			rep.TornLateDuplicates = tornLateDuplicates(late, w.LateExtraIDs, changelogLog.torn())
			if w.LateMissing > 0 {
				lateLog, err := scanLog(ctx, h.clOpts, lateTopic)
				if err != nil {
					return err
				}
				rep.UnmarkedLateMissing = unmarkedLateMissing(w.LateMissingIDs, lateLog.unmarked, changelogLog.committed)
			}
		}
	}
	dead, err := read(dlqTopic)
	if err != nil {
		return err
	}
	invalid := 0
	for _, r := range payments {
		if !validPayment(r.Value) {
			invalid++
		}
	}
	rep.DeadLetters, rep.WantDeadLetters = len(dead), invalid*apps
	cl, err := read(changelog)
	if err != nil {
		return err
	}
	rep.State = finalState(payments, cl)
	rep.Hanging, err = hangingTransactions(ctx, h.clOpts)
	return err
}

// countMissing counts the valid payments without any balance whose id is
// in ids.
func countMissing(payments, balances []*kgo.Record, ids map[string]bool) int {
	out := map[string]bool{}
	for _, r := range balances {
		var b ledger.Balance
		if json.Unmarshal(r.Value, &b) == nil {
			out[b.ID] = true
		}
	}
	n := 0
	for _, r := range payments {
		var p ledger.Payment
		if !validPayment(r.Value) || json.Unmarshal(r.Value, &p) != nil {
			continue
		}
		if !out[p.ID] && ids[p.ID] {
			n++
			out[p.ID] = true // an input duplicated by the broker counts once
		}
	}
	return n
}

// identicalDuplicates counts the outputs that repeat an earlier output of
// the same payment exactly (same seq and balance): what a torn transaction
// of the broker, or a batch it appended twice, leaves. Reprocessing on
// state that already holds a payment gives a different seq instead.
func identicalDuplicates(balances []*kgo.Record) int {
	seen := map[string]bool{}
	n := 0
	for _, r := range balances {
		var b ledger.Balance
		if json.Unmarshal(r.Value, &b) != nil {
			continue
		}
		k := fmt.Sprintf("%s/%d/%d", b.ID, b.Seq, b.Balance)
		if seen[k] {
			n++
		}
		seen[k] = true
	}
	return n
}

// StateReport compares the ledger's final state, as its changelog holds it
// (the last value per account), with the reference's final balance per
// account.
type StateReport struct {
	Accounts int // in the reference
	// Missing accounts have no state; Wrong ones another seq or balance;
	// Extra ones are in the state but in no payment.
	Missing, Wrong, Extra int
	Examples              []string
}

// OK reports whether the final state is the reference's.
func (s StateReport) OK() bool { return s.Missing == 0 && s.Wrong == 0 && s.Extra == 0 }

func finalState(payments, changelog []*kgo.Record) StateReport {
	want := map[string]ledger.Account{}
	for _, r := range payments {
		var p ledger.Payment
		if !validPayment(r.Value) || json.Unmarshal(r.Value, &p) != nil {
			continue
		}
		a := want[p.Account]
		a.Seq++
		a.Balance += p.Amount
		want[p.Account] = a
	}
	got := map[string]ledger.Account{}
	for _, r := range changelog {
		if bytes.HasPrefix(r.Key, []byte{0}) {
			continue // the task's offsets record (internal/runtime)
		}
		if r.Value == nil {
			delete(got, string(r.Key))
			continue
		}
		a, err := ledger.AccountSerde{}.Deserialize(r.Value)
		if err != nil {
			continue
		}
		got[string(r.Key)] = a
	}
	s := StateReport{Accounts: len(want)}
	note := func(f string, args ...any) {
		if len(s.Examples) < 5 {
			s.Examples = append(s.Examples, fmt.Sprintf(f, args...))
		}
	}
	for acct, w := range want {
		g, ok := got[acct]
		switch {
		case !ok:
			s.Missing++
			note("account %s: no state, want %+v", acct, w)
		case g != w:
			s.Wrong++
			note("account %s: state %+v, want %+v", acct, g, w)
		}
	}
	for acct := range got {
		if _, ok := want[acct]; !ok {
			s.Extra++
			note("account %s: state but no payment", acct)
		}
	}
	return s
}

// hangingTransactions lists what is left open once every app stopped: a
// transaction that is not complete, or a partition whose last stable
// offset trails its high watermark (an open transaction holds it back).
func hangingTransactions(ctx context.Context, opts []kgo.Opt) ([]string, error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("chaos: client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var out []string
	txns, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("chaos: list transactions: %w", err)
	}
	for _, t := range txns.Sorted() {
		switch t.State {
		case "Empty", "CompleteCommit", "CompleteAbort", "Dead":
		default:
			out = append(out, fmt.Sprintf("transaction %s (producer %d) is %s", t.TxnID, t.ProducerID, t.State))
		}
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("chaos: list topics: %w", err)
	}
	names := topics.Names()
	sort.Strings(names)
	hw, err := adm.ListEndOffsets(ctx, names...)
	if err == nil {
		err = hw.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("chaos: high watermarks: %w", err)
	}
	lso, err := adm.ListCommittedOffsets(ctx, names...)
	if err == nil {
		err = lso.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("chaos: last stable offsets: %w", err)
	}
	hw.Each(func(o kadm.ListedOffset) {
		if s, ok := lso.Lookup(o.Topic, o.Partition); ok && s.Offset != o.Offset {
			out = append(out, fmt.Sprintf("%s/%d: last stable offset %d < high watermark %d", o.Topic, o.Partition, s.Offset, o.Offset))
		}
	})
	return out, nil
}

// unmarkedLateMissing counts the missing late records (missing: by
// payment id, how many copies are missing) that the broker tore away: a
// copy of the record sits in the late topic's raw log without a marker
// (followed by its producer's next epoch), and that producer epoch's
// transaction committed on the windowed app's changelog (docs/design.md
// §6.5, gap 1). The embedded broker bumps the epoch at every EndTxn
// (KIP-890), so an epoch is one transaction. A missing record without such
// a copy, or whose transaction did not commit, stays eddy's loss.
func unmarkedLateMissing(missing map[string]int, unmarkedLate []*kgo.Record, committedChangelog map[producerEpoch]bool) int {
	torn := map[string]int{}
	for _, r := range unmarkedLate {
		if id, ok := paymentID(r.Value); ok && committedChangelog[epochOf(r)] {
			torn[id]++
		}
	}
	n := 0
	for id, m := range missing {
		n += min(m, torn[id])
	}
	return n
}

// tornLateDuplicates counts the extra late records (extra: by payment id)
// that repeat a first copy written in a transaction the broker tore: the
// late topic got its commit marker and the windowed app's changelog did
// not (tornChangelog: the epochs with unmarked changelog records), so the
// transaction's state and input offsets read as aborted and the record was
// processed again (docs/design.md §6.5, gap 1). An extra whose first copy
// is in an intact transaction stays eddy's duplicate.
func tornLateDuplicates(late []*kgo.Record, extra map[string]int, tornChangelog map[producerEpoch]bool) int {
	first := map[string]producerEpoch{}
	repeats := map[string]int{}
	for _, r := range late {
		id, ok := paymentID(r.Value)
		if !ok {
			continue
		}
		if pe, seen := first[id]; !seen {
			first[id] = epochOf(r)
		} else if tornChangelog[pe] {
			repeats[id]++
		}
	}
	n := 0
	for id, e := range extra {
		n += min(e, repeats[id])
	}
	return n
}

// tornTotalsDuplicates counts the totals that repeat, byte for byte, an
// earlier total whose transaction the broker tore (the totals partition
// marked, the windowed app's changelog not: its state read as aborted, so
// the window closed again). A repeat of a total from an intact transaction
// stays eddy's duplicate.
func tornTotalsDuplicates(totals []*kgo.Record, tornChangelog map[producerEpoch]bool) int {
	first := map[string]producerEpoch{}
	n := 0
	for _, r := range totals {
		k := string(r.Key) + "\x00" + string(r.Value)
		if pe, seen := first[k]; !seen {
			first[k] = epochOf(r)
		} else if tornChangelog[pe] {
			n++
		}
	}
	return n
}
