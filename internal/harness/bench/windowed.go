package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/eddy-streams/eddy"
	windowed "github.com/eddy-streams/eddy/examples/windowed/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

// WindowedOptions configure the windowed-totals benchmark.
type WindowedOptions struct {
	// LedgerOptions are the common settings: records, partitions,
	// accounts, rounds, the app's commit interval and workers, profile.
	LedgerOptions
	// Window and Grace are the example's (default 10s and 2s).
	Window, Grace time.Duration
	// PerWindow is the mean number of payments per account and window
	// (default 10). It sets the event-time span of the input, and so how
	// many windows close: records / PerWindow totals are written.
	PerWindow int
}

// eventTimeBase is the event time of the first payment: fixed, so every run
// reads the same input.
const eventTimeBase = 1_767_225_600_000 // 2026-01-01T00:00:00Z

// eventTimes stamps payment i at eventTimeBase + i·step ms, one in ten of
// them up to the grace g earlier (out of order but accepted) and one in two
// hundred more than window w + grace earlier (late). seen, when set, is
// called with each payment's account and stamp.
func eventTimes(step float64, w, g int64, seen func(account string, ts int64)) func(i int, account string, rng *rand.Rand) int64 {
	return func(i int, account string, rng *rand.Rand) int64 {
		ts := eventTimeBase + int64(float64(i)*step)
		switch x := rng.Float64(); {
		case x < 0.005:
			ts -= w + g + 1000 + rng.Int64N(w)
		case x < 0.105 && g > 0:
			ts -= rng.Int64N(g)
		}
		if seen != nil {
			seen(account, ts)
		}
		return ts
	}
}

// Windowed measures examples/windowed as Ledger measures the ledger. The
// payments' event time advances evenly over the span that PerWindow sets;
// one in ten is out of order within the grace period and one in two
// hundred is late, as in the demo.
func Windowed(ctx context.Context, opts WindowedOptions) ([]Result, error) {
	if opts.Window <= 0 {
		opts.Window = windowed.DefaultWindow
	}
	if opts.Grace <= 0 {
		opts.Grace = windowed.DefaultGrace
	}
	if opts.PerWindow <= 0 {
		opts.PerWindow = 10
	}
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	w, g := opts.Window.Milliseconds(), opts.Grace.Milliseconds()
	windows := max(1, opts.Records/(opts.Accounts*opts.PerWindow)) // per account
	step := float64(int64(windows)*w) / float64(opts.Records)      // ms of event time per payment
	fmt.Fprintf(out, "each run: %d payments over %d accounts in %d partitions, %v windows (grace %v), %d windows per account (%.0f s of event time), on a fresh embedded broker\n",
		opts.Records, opts.Accounts, opts.Partitions, opts.Window, opts.Grace, windows, float64(int64(windows)*w)/1000)
	return compare(ctx, opts.LedgerOptions, workload{
		produce: func(ctx context.Context, cl *kgo.Client) error {
			return producePayments(ctx, cl, opts.Records, opts.Accounts, eventTimes(step, w, g, nil))
		},
		topology: func(output string) *eddy.Topology {
			return windowed.Topology(windowed.Options{Input: inputTopic, Output: output, Window: opts.Window, Grace: opts.Grace})
		},
	})
}
