// Package pipeline is the windowed example's topology and command line,
// shared by examples/windowed, by `eddy windowed` (which `eddy demo` runs as
// a child process) and by the benchmarks.
//
// The example reads the ledger's payments and writes, per account and
// tumbling event-time window, one final total once the window closed: the
// smallest windowed workload where an early, duplicated, lost or partial
// window is visible in the output.
package pipeline

import (
	"fmt"
	"time"

	"github.com/eddy-streams/eddy"
	ledger "github.com/eddy-streams/eddy/examples/ledger/pipeline"
	"github.com/eddy-streams/eddy/serde"
)

// Payment is an input record's value: the ledger's payment, whose "ts"
// equals the record timestamp.
type Payment = ledger.Payment

// Total is an output record's value: an account's payments in the window
// [Start, End) (ms since the epoch), counted and summed.
type Total struct {
	Account string `json:"account"`
	Start   int64  `json:"start"`
	End     int64  `json:"end"`
	Count   int64  `json:"count"`
	Sum     int64  `json:"sum"`
}

// StoreName is the name of the window store of the running totals.
const StoreName = "totals"

// Options are the topology's parameters; Main fills them from flags.
type Options struct {
	Input, Output string
	// LateTopic, when set, receives the payments dropped as late,
	// unchanged but for their encoding (LatePayments); when empty they
	// are only counted.
	LateTopic string
	// Payments and LatePayments are the serdes of the input's and the
	// late topic's payments (ledger.PaymentCodec); nil is the ledger's
	// JSON. The totals are JSON in every format.
	Payments, LatePayments serde.Serde[Payment]
	// Window is the size of the tumbling windows and Grace how long after
	// its end a window still accepts payments; both are whole
	// milliseconds (Main checks).
	Window, Grace time.Duration
}

// Topology builds the windowed totals. Event time is the record timestamp
// (the contract makes it equal to the payment's ts). Windows are grouped by
// the record key, the account id, so that no repartition is needed: the
// payments of an account are on one partition, as the ledger also requires.
//
// It refuses the payments the ledger refuses (see the ledger's package
// doc), with the ledger's key serde and codec: a null, empty or invalid
// UTF-8 key and a malformed payment are decode errors, which touch
// nothing, not even stream time; a payment whose account differs from its
// key, or that would overflow its window's sum, is a process error. The
// DSL's filter and aggregator functions return no error, so these two
// panic with one: eddy turns a panic in a mapper, filter or aggregator
// into the record's processing failure, which Config.OnProcessError
// decides (Main: dead-letter), and the aggregator panics before the
// window's aggregate is stored, so the window is unchanged. Such a payment
// has advanced stream time, as any record that decoded does.
func Topology(o Options) *eddy.Topology {
	t := eddy.NewTopology()
	payments := eddy.Source(t, o.Input, ledger.AccountKeySerde{}, orJSON(o.Payments))
	keyed := eddy.Filter(payments, func(key string, p Payment) bool {
		if err := ledger.CheckAccount(key, p); err != nil {
			panic(err)
		}
		return true
	})
	windows := eddy.TumblingWindows(o.Window).WithGrace(o.Grace)
	ws := eddy.WindowedBy(eddy.GroupByKey(keyed, serde.String()), windows).Emit(eddy.EmitFinal)
	// A window's aggregate is the ledger's per-account state within the
	// window: Seq counts the payments and Balance sums their amounts, in
	// the ledger's 16-byte encoding.
	sums := eddy.WindowAggregate(ws, StoreName, func() ledger.Account { return ledger.Account{} },
		func(account string, p Payment, a ledger.Account) ledger.Account {
			sum, ok := ledger.AddAmount(a.Balance, p.Amount)
			if !ok {
				panic(fmt.Errorf("payment %q of %d would overflow the sum %d of account %q's window", p.ID, p.Amount, a.Balance, account))
			}
			a.Seq++
			a.Balance = sum
			return a
		}, nil, ledger.AccountSerde{})
	totals := eddy.Map(eddy.ToStream(sums), func(w eddy.Windowed[string], a ledger.Account) (string, Total) {
		return w.Key, Total{Account: w.Key, Start: w.Start, End: w.End, Count: a.Seq, Sum: a.Balance}
	})
	eddy.To(totals, o.Output, serde.String(), serde.JSON[Total]())
	if o.LateTopic != "" {
		eddy.To(eddy.LateRecords(ws), o.LateTopic, serde.String(), orJSON(o.LatePayments))
	}
	return t
}

func orJSON(s serde.Serde[Payment]) serde.Serde[Payment] {
	if s == nil {
		return ledger.PaymentSerde{}
	}
	return s
}
