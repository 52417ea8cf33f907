package bench

// The repartition benchmark shows whether an app's repartition topic stops
// growing: eddy deletes the repartition records its committed transactions
// consumed (Kafka's DeleteRecords, every Config.RepartitionPurgeInterval),
// so with the purge on the topic holds only the records in transit and the
// ones consumed since the last purge; with it off, everything ever written.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/ledger/pipeline"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/serde"
)

// RepartitionOptions configure one run of the repartition benchmark.
type RepartitionOptions struct {
	// Rate is the payments produced per second, steadily, for Duration.
	Rate     int
	Duration time.Duration
	// Sample is the interval between samples.
	Sample time.Duration
	// Partitions of the payments topic; Accounts the distinct accounts.
	Partitions, Accounts int
	// PurgeInterval is the app's Config.RepartitionPurgeInterval
	// (negative: no purge).
	PurgeInterval time.Duration
	// TableCacheBytes is the app's Config.TableCacheBytes (0: eddy's
	// default; negative: off): the count's updates per commit.
	TableCacheBytes int64
	// Out receives a line per sample (nil: none).
	Out io.Writer
}

// TopicSize is what the broker holds of a topic, summed over its
// partitions.
type TopicSize struct {
	// StartOffsets and EndOffsets are the sums of the partitions' log start
	// offsets and high watermarks; Records their difference, the offsets
	// the broker retains (in a transactional topic, the records and the
	// transactions' commit markers).
	StartOffsets int64 `json:"start_offsets"`
	EndOffsets   int64 `json:"end_offsets"`
	Records      int64 `json:"retained_records"`
	// Bytes is the size of the partitions' logs as the broker reports it
	// (DescribeLogDirs), or -1 when it does not answer.
	Bytes int64 `json:"bytes"`
}

// RepartitionSample is one sample of a run.
type RepartitionSample struct {
	Seconds  float64 `json:"seconds"`
	Produced int64   `json:"payments_produced"`
	// Committed is the payments the app's group has committed (consumed
	// for good); Lag is Produced - Committed.
	Committed int64 `json:"payments_committed"`
	Lag       int64 `json:"lag"`
	// Repartition is the repartition topic; Consumed the offsets of it the
	// group has committed (the purge deletes up to those).
	Repartition TopicSize `json:"repartition"`
	Consumed    int64     `json:"repartition_committed"`
	// Output is the output topic's high watermarks (the count updates and
	// commit markers written).
	Output int64 `json:"output_offsets"`
}

// RepartitionResult is a run: its purge interval, its repartition topic and
// its samples.
type RepartitionResult struct {
	PurgeInterval time.Duration       `json:"purge_interval"`
	Topic         string              `json:"topic"`
	Samples       []RepartitionSample `json:"samples"`
}

// byAmount is the name of the benchmark's repartition: payments re-keyed
// by amount bucket.
const byAmount = "by-amount"

// repartitionTopology counts payments by amount bucket: the payments,
// keyed by account, are re-keyed (GroupBy, through the repartition topic
// "<app-id>-by-amount-repartition"), counted, and every count update is
// written to output.
func repartitionTopology(input, output string) *eddy.Topology {
	t := eddy.NewTopology()
	payments := eddy.Source(t, input, serde.String(), pipeline.PaymentSerde{})
	buckets := eddy.GroupBy(payments, func(_ string, p pipeline.Payment) string {
		return fmt.Sprintf("amount-%d00s", p.Amount/100)
	}, byAmount, serde.String(), pipeline.PaymentSerde{})
	counts := eddy.Count(buckets, "counts-by-amount")
	eddy.To(eddy.ToStream(counts), output, serde.String(), serde.Int64())
	return t
}

// Repartition runs the benchmark once: an embedded broker, an exactly-once
// app that re-keys payments through a repartition topic, and payments
// produced at opts.Rate for opts.Duration, sampled every opts.Sample.
func Repartition(ctx context.Context, opts RepartitionOptions) (RepartitionResult, error) {
	if opts.Rate < 1 || opts.Duration <= 0 || opts.Sample <= 0 || opts.Partitions < 1 || opts.Accounts < 1 {
		return RepartitionResult{}, errors.New("bench: repartition: Rate, Partitions and Accounts must be at least 1, Duration and Sample positive")
	}
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	const appID, output = "bench-repartition", "counts"
	res := RepartitionResult{PurgeInterval: opts.PurgeInterval, Topic: eddy.RepartitionTopic(appID, byAmount)}
	dir, err := os.MkdirTemp("", "eddy-bench-repartition-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	broker, cl, err := startBroker(opts.Partitions)
	if err != nil {
		return res, err
	}
	defer broker.Close()
	defer cl.Close()
	seeds := []string{broker.Addr()}
	if err := kafka.CreateTopics(ctx, cl, kafka.TopicSpec{Name: inputTopic, Partitions: int32(opts.Partitions)},
		kafka.TopicSpec{Name: output, Partitions: int32(opts.Partitions)}); err != nil {
		return res, err
	}
	app, err := eddy.New(repartitionTopology(inputTopic, output), eddy.Config{
		AppID: appID, Brokers: seeds, StateDir: dir, Guarantee: eddy.ExactlyOnce,
		RepartitionPurgeInterval: opts.PurgeInterval,
		TableCacheBytes:          opts.TableCacheBytes,
		Logger:                   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return res, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	appDone := make(chan error, 1)
	go func() { appDone <- app.Run(runCtx) }()
	var produced atomic.Int64
	prodDone := make(chan error, 1)
	start := time.Now()
	go func() { prodDone <- produceSteadily(runCtx, cl, opts, start, &produced) }()
	adm := kadm.NewClient(cl)

	fmt.Fprintf(out, "%s: %s, %d payments/s for %v\n", res.Topic, purgeName(opts.PurgeInterval), opts.Rate, opts.Duration)
	tick := time.NewTicker(opts.Sample)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case err := <-appDone:
			return res, fmt.Errorf("bench: repartition: the app stopped: %w", err)
		case err := <-prodDone:
			if err != nil {
				return res, err
			}
			prodDone = nil // produced everything: keep sampling to the end
			continue
		case <-tick.C:
		}
		s, err := sampleRepartition(ctx, adm, appID, res.Topic, output)
		if err != nil {
			return res, err
		}
		s.Seconds = time.Since(start).Seconds()
		s.Produced = produced.Load()
		s.Lag = s.Produced - s.Committed
		res.Samples = append(res.Samples, s)
		fmt.Fprintf(out, "%6.0fs  produced %8d  committed %8d  lag %6d  repartition: retained %8d  start %8d  end %8d  committed %8d  bytes %s  output offsets %8d\n",
			s.Seconds, s.Produced, s.Committed, s.Lag, s.Repartition.Records, s.Repartition.StartOffsets, s.Repartition.EndOffsets, s.Consumed, FormatBytes(s.Repartition.Bytes), s.Output)
		if time.Since(start) >= opts.Duration {
			break
		}
	}
	cancel()
	if prodDone != nil {
		<-prodDone // stopped by cancel: what it had not produced does not matter
	}
	if err := <-appDone; err != nil {
		return res, fmt.Errorf("bench: repartition: the app: %w", err)
	}
	return res, nil
}

// produceSteadily produces opts.Rate payments a second from start until
// opts.Duration after it, counting them in produced once the broker has
// acknowledged them. Every 10 ms it produces what the rate owes by then,
// so a slow tick does not lower the rate.
func produceSteadily(ctx context.Context, cl *kgo.Client, opts RepartitionOptions, start time.Time, produced *atomic.Int64) error {
	rng := rand.New(rand.NewPCG(1, 2))
	var failed atomic.Pointer[error]
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.CompareAndSwap(nil, &err)
			return
		}
		produced.Add(1)
	}
	total := int64(float64(opts.Rate) * opts.Duration.Seconds())
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := int64(0); i < total; {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		owed := min(total, int64(float64(opts.Rate)*time.Since(start).Seconds()))
		for ; i < owed; i++ {
			account := fmt.Sprintf("acct-%05d", rng.IntN(opts.Accounts))
			p := pipeline.Payment{ID: fmt.Sprintf("p%d", i), Account: account, Amount: rng.Int64N(1501) - 500}
			v, _ := json.Marshal(p)
			cl.Produce(ctx, &kgo.Record{Key: []byte(account), Value: v}, promise)
		}
		if err := failed.Load(); err != nil {
			return fmt.Errorf("bench: produce payments: %w", *err)
		}
	}
	if err := cl.Flush(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	if err := failed.Load(); err != nil {
		return fmt.Errorf("bench: produce payments: %w", *err)
	}
	return nil
}

// sampleRepartition measures the app's progress and its repartition topic.
func sampleRepartition(ctx context.Context, adm *kadm.Client, appID, repartition, output string) (RepartitionSample, error) {
	var s RepartitionSample
	var err error
	if s.Repartition, err = topicSize(ctx, adm, repartition); err != nil {
		return s, err
	}
	offs, err := adm.FetchOffsets(ctx, appID)
	if err != nil {
		return s, fmt.Errorf("bench: committed offsets of %s: %w", appID, err)
	}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			return
		}
		switch o.Topic {
		case inputTopic:
			s.Committed += o.At
		case repartition:
			s.Consumed += o.At
		}
	})
	ends, err := adm.ListEndOffsets(ctx, output)
	if err != nil {
		return s, fmt.Errorf("bench: end offsets of %s: %w", output, err)
	}
	if err := ends.Error(); err != nil {
		return s, fmt.Errorf("bench: end offsets of %s: %w", output, err)
	}
	ends.Each(func(o kadm.ListedOffset) { s.Output += o.Offset })
	return s, nil
}

// topicSize is what the broker holds of topic: its log start offsets and
// high watermarks (ListStartOffsets, ListEndOffsets) and, if the broker
// answers DescribeLogDirs, the size of its logs in bytes. A topic that
// does not exist yet (the app creates its repartition topic) is empty.
func topicSize(ctx context.Context, adm *kadm.Client, topic string) (TopicSize, error) {
	size := TopicSize{Bytes: -1}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return size, fmt.Errorf("bench: start offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return size, fmt.Errorf("bench: end offsets of %s: %w", topic, err)
	}
	var errs []error
	starts.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, o.Err)
			return
		}
		size.StartOffsets += o.Offset
	})
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, o.Err)
			return
		}
		size.EndOffsets += o.Offset
	})
	if len(errs) > 0 {
		if isUnknownTopic(errs) {
			return TopicSize{Bytes: -1}, nil
		}
		return size, fmt.Errorf("bench: offsets of %s: %w", topic, errors.Join(errs...))
	}
	size.Records = size.EndOffsets - size.StartOffsets
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		return size, nil // the broker does not say: bytes unknown
	}
	size.Bytes = 0
	dirs.Each(func(d kadm.DescribedLogDir) {
		for _, p := range d.Topics[topic] {
			size.Bytes += p.Size
		}
	})
	return size, nil
}

func isUnknownTopic(errs []error) bool {
	for _, err := range errs {
		if !errors.Is(err, kerr.UnknownTopicOrPartition) {
			return false
		}
	}
	return true
}

// FormatBytes formats n bytes for the tables ("n/a" when negative,
// unknown).
func FormatBytes(n int64) string {
	switch {
	case n < 0:
		return "n/a"
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}

// CPUModel is lscpu's "Model name", for the reports ("unknown" without
// lscpu).
func CPUModel() string {
	b, err := exec.Command("lscpu").Output()
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "Model name:"); ok {
			return strings.TrimSpace(name)
		}
	}
	return "unknown"
}

// WriteRepartitionTable writes runs side by side as a Markdown table, a row
// per sample: the time, the payments produced (of the first run), and for
// each run its repartition topic's retained records, log start offsets and
// bytes, and the app's lag. Runs with fewer samples leave their cells
// empty.
func WriteRepartitionTable(w io.Writer, runs []RepartitionResult) {
	header, rule := "| elapsed | payments produced |", "|---:|---:|"
	rows := 0
	for _, r := range runs {
		name := purgeName(r.PurgeInterval)
		header += fmt.Sprintf(" %[1]s: retained records | %[1]s: log start offsets | %[1]s: bytes | %[1]s: lag |", name)
		rule += "---:|---:|---:|---:|"
		rows = max(rows, len(r.Samples))
	}
	fmt.Fprintln(w, header)
	fmt.Fprintln(w, rule)
	for i := 0; i < rows; i++ {
		var elapsed, produced string
		var cells strings.Builder
		for _, r := range runs {
			if i >= len(r.Samples) {
				cells.WriteString("  |  |  |  |")
				continue
			}
			s := r.Samples[i]
			if elapsed == "" {
				elapsed, produced = fmt.Sprintf("%.0f s", s.Seconds), fmt.Sprint(s.Produced)
			}
			fmt.Fprintf(&cells, " %d | %d | %s | %d |", s.Repartition.Records, s.Repartition.StartOffsets, FormatBytes(s.Repartition.Bytes), s.Lag)
		}
		fmt.Fprintf(w, "| %s | %s |%s\n", elapsed, produced, cells.String())
	}
}

// purgeName names a run by its purge interval.
func purgeName(interval time.Duration) string {
	if interval > 0 {
		return "purge " + interval.String()
	}
	return "purge off"
}
