package chaos

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/eddy-streams/eddy/internal/harness/verify"
)

// Report is what a chaos run injected and found.
type Report struct {
	Seed      uint64
	Duration  time.Duration
	Instances int
	Windowed  bool
	Kinds     []string

	Events []Event
	// LongestRecovery is the longest time, over every fault, from its end
	// until every app committed past the input written before it and
	// every balances partition received a record again (Event.Recovery).
	LongestRecovery time.Duration
	// LongestOutage is the longest time, while payments flowed, that a
	// balances partition received no record: what a fault cost while it
	// lasted (a frozen app holds its partitions until the session times
	// out), where LongestRecovery counts from its end.
	LongestOutage time.Duration
	// AppExits counts apps that exited on their own, by the fault being
	// injected or recovered from ("none": between faults; "catch-up":
	// after the last one). They were restarted.
	AppExits map[string]int
	// BrokerKills counts broker SIGKILLs; BrokerErrorHits the requests the
	// broker (or the proxy, for EndTxn) answered with an injected error.
	BrokerKills, BrokerErrorHits int

	Ledger              verify.LedgerReport
	IdenticalDuplicates int
	// UnmarkedMissing are the missing balances that sit, in the raw
	// log, in a transaction the broker left without its marker (see
	// unmarkedBalances).
	UnmarkedMissing int
	// UnmarkedLateMissing are the late records, missing from the late
	// topic, that sit there in such a transaction.
	UnmarkedLateMissing int
	// TornLateDuplicates are the late records that repeat a copy written
	// in a transaction the broker tore (tornLateDuplicates).
	TornLateDuplicates int
	// TornWindowDuplicates are the totals that repeat one written in a
	// transaction the broker tore (tornTotalsDuplicates).
	TornWindowDuplicates int
	Windows              *verify.WindowReport
	State                StateReport
	Hanging              []string
	// DeadLetters are the records on payments.dlq; an exact run has one
	// per malformed input record per app.
	DeadLetters, WantDeadLetters int
	Invalid, ProduceFailures     int
	Stalled                      bool
	UncleanStops                 []string
}

func newReport(o Options) *Report {
	return &Report{Seed: o.Seed, Duration: o.Duration, Instances: o.Instances, Windowed: o.Windowed,
		Kinds: o.Kinds, AppExits: map[string]int{}}
}

func (r *Report) add(e Event) {
	r.Events = append(r.Events, e)
	if !e.Unrecovered {
		r.LongestRecovery = max(r.LongestRecovery, e.Recovery)
	}
}

func (r *Report) faultCount() int { return len(r.Events) }

// BrokerGapDuplicates are the ledger's duplicate outputs counted as the
// embedded broker's, not eddy's: identical copies of an earlier output
// (a torn transaction, or a batch appended twice; docs/design.md §6), and only
// in a run where the broker was SIGKILLed. Without a broker kill every
// duplicate is eddy's.
func (r *Report) BrokerGapDuplicates() int {
	if r.BrokerKills == 0 {
		return 0
	}
	return min(r.IdenticalDuplicates, r.Ledger.Duplicates)
}

// BrokerGapWindowDuplicates are the windowed totals' duplicates counted as
// the broker's: only after a broker SIGKILL, when every duplicate window is
// otherwise right (no wrong, missing or early window), and only those that
// repeat a total of a transaction the broker tore.
func (r *Report) BrokerGapWindowDuplicates() int {
	w := r.Windows
	if r.BrokerKills == 0 || w == nil || w.Wrong > 0 || w.Missing > 0 || w.Early > 0 {
		return 0
	}
	return min(r.TornWindowDuplicates, w.Duplicates)
}

// Duplicates, Losses and Wrong are eddy's exactly-once violations over
// every output (balances, totals, late records, dead letters), the
// broker's gaps taken out.
func (r *Report) Duplicates() int {
	n := r.Ledger.Duplicates - r.BrokerGapDuplicates() + max(r.DeadLetters-r.WantDeadLetters, 0)
	if w := r.Windows; w != nil {
		n += w.Duplicates - r.BrokerGapWindowDuplicates() + w.LateExtra - r.BrokerGapTornLate()
	}
	return n
}

// BrokerGapUnmarked are the missing balances counted as the embedded
// broker's: balances of a transaction that a broker SIGKILL left without
// its marker in their partition, followed by the producer's next epoch
// (docs/design.md §6.5, gap 1; eddy's reader takes them for aborted, the broker's
// read_committed for committed). Counted only after a broker SIGKILL and
// when nothing else is wrong: every other output right and the final
// state equal to the reference, which shows the transaction's state was
// committed with it.
func (r *Report) BrokerGapUnmarked() int {
	if r.BrokerKills == 0 || r.Ledger.Wrong > 0 || !r.State.OK() {
		return 0
	}
	return min(r.UnmarkedMissing, r.Ledger.Missing)
}

// BrokerGapTornLate are the late records counted as duplicated by the
// broker: copies of a record whose first copy's transaction the broker
// tore, when no window is wrong, missing or early.
func (r *Report) BrokerGapTornLate() int {
	w := r.Windows
	if r.BrokerKills == 0 || w == nil || w.Wrong > 0 || w.Missing > 0 || w.Early > 0 {
		return 0
	}
	return min(r.TornLateDuplicates, w.LateExtra)
}

// BrokerGapUnmarkedLate is the same for the windowed app's late records.
func (r *Report) BrokerGapUnmarkedLate() int {
	w := r.Windows
	if w == nil || r.BrokerKills == 0 || w.Wrong > 0 || w.Missing > 0 || w.Early > 0 {
		return 0
	}
	return min(r.UnmarkedLateMissing, w.LateMissing)
}

func (r *Report) Losses() int {
	n := r.Ledger.Missing - r.BrokerGapUnmarked() + max(r.WantDeadLetters-r.DeadLetters, 0)
	if w := r.Windows; w != nil {
		n += w.Missing + w.LateMissing - r.BrokerGapUnmarkedLate()
	}
	return n
}

func (r *Report) Wrong() int {
	n := r.Ledger.Wrong
	if w := r.Windows; w != nil {
		n += w.Wrong + w.Early
	}
	return n
}

// OK reports whether eddy was exactly once through every fault: no
// duplicate, loss or wrong value, the final state the reference's, and no
// hanging transaction.
func (r *Report) OK() bool {
	return r.Duplicates() == 0 && r.Losses() == 0 && r.Wrong() == 0 && r.State.OK() && len(r.Hanging) == 0
}

// Print writes the report's tables (Markdown) and its findings.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "\nchaos run: seed %d, %v of faults, %d ledger instance(s)%s, kinds %s\n\n",
		r.Seed, r.Duration, r.Instances, map[bool]string{true: " + 1 windowed", false: ""}[r.Windowed], strings.Join(r.Kinds, ","))
	fmt.Fprintln(w, "| fault | injected | longest recovery | longest per app | not recovered within 2m | apps that exited during it (restarted) |")
	fmt.Fprintln(w, "| --- | ---: | ---: | --- | ---: | ---: |")
	for _, k := range AllKinds {
		if !slices.Contains(r.Kinds, k) {
			continue
		}
		n, unrec := 0, 0
		var longest time.Duration
		perApp := map[string]time.Duration{}
		for _, e := range r.Events {
			if e.Kind != k {
				continue
			}
			n++
			if e.Unrecovered {
				unrec++
				continue
			}
			longest = max(longest, e.Recovery)
			for app, d := range e.AppRecovery {
				perApp[app] = max(perApp[app], d)
			}
		}
		var apps []string
		for _, app := range slices.Sorted(maps.Keys(perApp)) {
			apps = append(apps, fmt.Sprintf("%s %.1f s", app, perApp[app].Seconds()))
		}
		fmt.Fprintf(w, "| %s | %d | %.1f s | %s | %d | %d |\n", k, n, longest.Seconds(), strings.Join(apps, ", "), unrec, r.AppExits[k])
	}
	fmt.Fprintf(w, "| (between faults / catch-up) | | | | | %d / %d |\n\n", r.AppExits["none"], r.AppExits["catch-up"])
	fmt.Fprintf(w, "broker errors answered: %d; broker SIGKILLs: %d; longest outage of a balances partition while payments flowed: %.1f s\n\n",
		r.BrokerErrorHits, r.BrokerKills, r.LongestOutage.Seconds())

	fmt.Fprintln(w, "| records processed | outputs | duplicates | losses | wrong values | final state wrong | hanging transactions | longest recovery |")
	fmt.Fprintln(w, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	outputs := r.Ledger.Outputs + r.DeadLetters
	processed := r.Ledger.Payments
	if r.Windows != nil {
		outputs += r.Windows.Outputs + r.Windows.LateOutputs
		processed += r.Windows.Payments
	}
	fmt.Fprintf(w, "| %d | %d | %d | %d | %d | %d | %d | %.1f s |\n\n", processed, outputs, r.Duplicates(), r.Losses(), r.Wrong(),
		r.State.Missing+r.State.Wrong+r.State.Extra, len(r.Hanging), r.LongestRecovery.Seconds())

	fmt.Fprintf(w, "ledger: %v\n", r.Ledger)
	if r.Windows != nil {
		fmt.Fprintf(w, "windowed: %v\n", *r.Windows)
	}
	fmt.Fprintf(w, "dead letters: %d (want %d: %d malformed payments in the input, one per app)\n", r.DeadLetters, r.WantDeadLetters, r.Invalid)
	fmt.Fprintf(w, "final state: %d accounts, %d missing, %d wrong, %d extra\n", r.State.Accounts, r.State.Missing, r.State.Wrong, r.State.Extra)
	fmt.Fprintf(w, "embedded broker's own gaps (docs/design.md §6, not eddy's): input duplicated by the broker %d, identical duplicate outputs after a broker SIGKILL %d (balances) + %d (totals) + %d (late records of torn transactions), outputs in transactions the broker left unmarked %d (balances) + %d (late records)\n",
		r.Ledger.InputDuplicates, r.BrokerGapDuplicates(), r.BrokerGapWindowDuplicates(), r.BrokerGapTornLate(), r.BrokerGapUnmarked(), r.BrokerGapUnmarkedLate())
	if r.ProduceFailures > 0 {
		fmt.Fprintf(w, "generator: %d payments failed to produce (the broker was down); the input is what the broker holds\n", r.ProduceFailures)
	}
	for _, s := range r.UncleanStops {
		fmt.Fprintln(w, "unclean stop:", s)
	}
	if r.Stalled {
		fmt.Fprintln(w, "the apps stopped making progress before all outputs were there")
	}
	for _, e := range r.Ledger.Examples {
		fmt.Fprintln(w, "  ledger:", e)
	}
	if r.Windows != nil {
		for _, e := range r.Windows.Examples {
			fmt.Fprintln(w, "  windowed:", e)
		}
	}
	for _, e := range r.State.Examples {
		fmt.Fprintln(w, "  state:", e)
	}
	for _, hng := range r.Hanging {
		fmt.Fprintln(w, "  hanging:", hng)
	}
	if r.OK() {
		fmt.Fprintln(w, "\nexactly once: yes")
	} else {
		fmt.Fprintln(w, "\nexactly once: NO")
	}
}
