package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

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
// exactly what committed transactions wrote (DESIGN.md §4). Offsets records
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
	start := time.Now()
	t.log.Info("restoring state from changelog", "records", total)

	storeOf := make(map[string]string, len(t.sub.storeNames))
	for i, store := range t.sub.storeNames {
		storeOf[t.sub.changelogs[i]] = store
	}
	batch := state.Batch{Offsets: t.committed.Clone()}
	var replayed, size int64
	lastLog := time.Now()
	flush := func() error {
		if err := t.db.Apply(&batch); err != nil {
			return fmt.Errorf("apply restored batch: %w", err)
		}
		clear(batch.Writes)
		batch.Writes = batch.Writes[:0]
		return nil
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(w.cfg.Brokers...)}, w.cfg.ClientOpts...)
	err = kafka.ReadCommitted(ctx, opts, spans, func(r *kgo.Record) error {
		store := storeOf[r.Topic]
		replayed++
		size += int64(len(r.Key) + len(r.Value))
		// Released in offset order: everything before r is applied.
		batch.Offsets.Changelog[store] = r.Offset + 1
		if isOffsetsRecord(r) {
			input, streamTime, err := decodeOffsetsRecord(r.Value)
			if err != nil {
				return fmt.Errorf("%s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			for tp, off := range input {
				if off > batch.Offsets.Input[tp] {
					batch.Offsets.Input[tp] = off
				}
			}
			// Each store's changelog carries the task's stream time,
			// which only moves forward: the largest is the task's.
			batch.Offsets.StreamTime = max(batch.Offsets.StreamTime, streamTime)
		} else {
			batch.Writes = append(batch.Writes, state.Write{Store: store, Key: r.Key, Value: r.Value, Delete: r.Value == nil})
		}
		if len(batch.Writes) >= restoreBatch {
			if err := flush(); err != nil {
				return err
			}
		}
		if time.Since(lastLog) > 5*time.Second {
			lastLog = time.Now()
			t.log.Info("restoring", "records_applied", replayed, "offsets", total)
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
	took := time.Since(start)
	t.log.Info("restored state from changelog", "records", replayed, "offsets", total, "bytes", size, "took", took.Round(time.Millisecond),
		"mb_per_s", fmt.Sprintf("%.1f", float64(size)/1e6/took.Seconds()))
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
