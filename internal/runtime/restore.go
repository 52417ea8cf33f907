package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/failpoint"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/state"
)

// errStateAhead means a database's changelog offset is past the changelog's
// end: the database is not a materialisation of this changelog.
var errStateAhead = errors.New("state is ahead of the changelog end")

// restoreBatch is how many changelog records one database batch applies.
const restoreBatch = 10_000

// restore replays each store's changelog partition from the offset the
// database recorded up to the last stable offset, so the database holds
// exactly what committed transactions wrote (docs/design.md §4). Offsets records
// met on the way move the database's input offsets forward.
func (w *worker) restore(ctx context.Context, t *task) error {
	adm := kadm.NewClient(w.cl)
	ends, err := adm.ListCommittedOffsets(ctx, t.sub.changelogs...)
	if err != nil {
		return fmt.Errorf("list changelog end offsets: %w", err)
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("list changelog end offsets: %w", err)
	}
	spans := make(map[string]map[int32]kafka.Span)
	var total int64
	for i, store := range t.sub.storeNames {
		topic := t.sub.changelogs[i]
		lo, ok := ends.Lookup(topic, t.id.Partition)
		if !ok {
			return fmt.Errorf("changelog %s has no partition %d", topic, t.id.Partition)
		}
		from := t.committed.Changelog[store]
		if from > lo.Offset {
			return fmt.Errorf("%w: store %s at offset %d, changelog %s/%d ends at %d",
				errStateAhead, store, from, topic, t.id.Partition, lo.Offset)
		}
		if from < lo.Offset {
			spans[topic] = map[int32]kafka.Span{t.id.Partition: {From: from, End: lo.Offset}}
			total += lo.Offset - from
		}
	}
	if len(spans) == 0 {
		return nil
	}
	prog := newRestoreProgress(w.cfg.OnRestoreProgress, w.board, t, "changelog", total, spans)

	storeOf := make(map[string]string, len(t.sub.storeNames))
	for i, store := range t.sub.storeNames {
		storeOf[t.sub.changelogs[i]] = store
	}
	batch := state.Batch{Offsets: t.committed.Clone()}
	flush := func() error {
		if err := t.db.Apply(&batch); err != nil {
			return fmt.Errorf("apply restored batch: %w", err)
		}
		w.cfg.Failpoints.Hit(failpoint.RestoreMid)
		clear(batch.Writes)
		batch.Writes = batch.Writes[:0]
		return nil
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(w.cfg.Brokers...)}, w.cfg.ClientOpts...)
	err = kafka.ReadCommitted(ctx, opts, spans, func(r *kgo.Record) error {
		prog.record(r)
		if err := applyChangelogRecord(&batch, storeOf[r.Topic], r); err != nil {
			return err
		}
		if len(batch.Writes) >= restoreBatch {
			if err := flush(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The spans were read to their ends: what lies before is applied or
	// was never committed.
	for topic, parts := range spans {
		batch.Offsets.Changelog[storeOf[topic]] = parts[t.id.Partition].End
	}
	if err := flush(); err != nil {
		return err
	}
	t.committed = batch.Offsets
	prog.done()
	return nil
}

// RestoreProgress is where a task's restore stands. The runtime reports it
// at the start, at most every second while records are applied, and at the
// end (Done), to Config.OnRestoreProgress, and logs it every 5 seconds.
type RestoreProgress struct {
	Task TaskID
	// Source is what is replayed: "changelog".
	Source string
	// Offsets is how many changelog offsets the restore covers (records,
	// transaction markers and aborted records alike) and Done how many
	// of them it has passed; Records and Bytes count what it applied.
	Offsets, OffsetsDone, Records, Bytes int64
	Elapsed                              time.Duration
	Done                                 bool
}

// Percent is the share of the offsets passed, 0-100.
func (p RestoreProgress) Percent() float64 {
	if p.Offsets == 0 {
		return 100
	}
	return 100 * float64(p.OffsetsDone) / float64(p.Offsets)
}

// ETA estimates the time left at the average rate so far (0 when unknown
// or done).
func (p RestoreProgress) ETA() time.Duration {
	if p.OffsetsDone == 0 || p.Done {
		return 0
	}
	rate := float64(p.OffsetsDone) / p.Elapsed.Seconds()
	return time.Duration(float64(p.Offsets-p.OffsetsDone) / rate * float64(time.Second))
}

// restoreProgress tracks a restore: per partition where its span started,
// so the offset of each record tells how far the restore is.
type restoreProgress struct {
	p        RestoreProgress
	report   func(RestoreProgress)
	log      *slog.Logger
	gauge    prometheus.Gauge // the task's eddy_restore_remaining_records
	start    time.Time
	from     map[string]int64 // per topic (one partition per topic here)
	passed   map[string]int64
	lastSent time.Time
	lastLog  time.Time
	// board and status are where Status reads the progress.
	board  *workerBoard
	status *boardTask
}

func newRestoreProgress(report func(RestoreProgress), board *workerBoard, t *task, source string, total int64, spans map[string]map[int32]kafka.Span) *restoreProgress {
	now := time.Now()
	rp := &restoreProgress{
		p:      RestoreProgress{Task: t.id, Source: source, Offsets: total},
		report: report, log: t.log, gauge: t.m.h.RestoreRemaining, start: now, lastSent: now, lastLog: now,
		board: board, status: t.status,
		from: make(map[string]int64), passed: make(map[string]int64),
	}
	for topic, parts := range spans {
		rp.from[topic] = parts[t.id.Partition].From
	}
	rp.log.Info("restoring state", "source", source, "offsets", total)
	rp.send()
	return rp
}

func (rp *restoreProgress) record(r *kgo.Record) {
	rp.p.Records++
	rp.p.Bytes += int64(len(r.Key) + len(r.Value))
	if n := r.Offset + 1 - rp.from[r.Topic]; n > rp.passed[r.Topic] {
		rp.p.OffsetsDone += n - rp.passed[r.Topic]
		rp.passed[r.Topic] = n
	}
	if rp.p.Records%1024 == 0 {
		rp.gauge.Set(float64(rp.p.Offsets - rp.p.OffsetsDone))
	}
	now := time.Now()
	if now.Sub(rp.lastLog) >= 5*time.Second {
		rp.lastLog = now
		p := rp.snapshot()
		rp.log.Info("restoring state", "source", p.Source, "records", p.Records, "bytes", p.Bytes,
			"percent", fmt.Sprintf("%.1f", p.Percent()), "eta", p.ETA().Round(time.Second))
	}
	if now.Sub(rp.lastSent) >= time.Second {
		rp.lastSent = now
		rp.send()
	}
}

func (rp *restoreProgress) snapshot() RestoreProgress {
	p := rp.p
	p.Elapsed = time.Since(rp.start)
	return p
}

func (rp *restoreProgress) send() {
	p := rp.snapshot()
	rp.board.progress(rp.status, p)
	rp.gauge.Set(float64(rp.p.Offsets - rp.p.OffsetsDone))
	if rp.report != nil {
		rp.report(p)
	}
}

func (rp *restoreProgress) done() {
	rp.p.OffsetsDone, rp.p.Done = rp.p.Offsets, true
	p := rp.snapshot()
	mbps := 0.0
	if s := p.Elapsed.Seconds(); s > 0 {
		mbps = float64(p.Bytes) / 1e6 / s
	}
	rp.log.Info("restored state", "source", p.Source, "records", p.Records, "bytes", p.Bytes,
		"took", p.Elapsed.Round(time.Millisecond), "mb_per_s", fmt.Sprintf("%.1f", mbps))
	rp.send()
}

// applyChangelogRecord adds a committed changelog record of store to
// batch: a write, or for an offsets record the input offsets and stream
// time it carries; either way the store's changelog offset moves past it.
// Restores and standbys replay changelogs with it.
func applyChangelogRecord(batch *state.Batch, store string, r *kgo.Record) error {
	// Records come in offset order: everything before r is in the batch.
	batch.Offsets.Changelog[store] = r.Offset + 1
	if !isOffsetsRecord(r) {
		batch.Writes = append(batch.Writes, state.Write{Store: store, Key: r.Key, Value: r.Value, Delete: r.Value == nil})
		return nil
	}
	input, streamTime, err := decodeOffsetsRecord(r.Value)
	if err != nil {
		return fmt.Errorf("%s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	for tp, off := range input {
		if off > batch.Offsets.Input[tp] {
			batch.Offsets.Input[tp] = off
		}
	}
	// Each store's changelog carries the task's stream time, which only
	// moves forward: the largest is the task's.
	batch.Offsets.StreamTime = max(batch.Offsets.StreamTime, streamTime)
	return nil
}

func isOffsetsRecord(r *kgo.Record) bool {
	if !bytes.Equal(r.Key, []byte(offsetsRecordKey)) {
		return false
	}
	for _, h := range r.Headers {
		if h.Key == offsetsHeaderKey {
			return true
		}
	}
	return false
}
