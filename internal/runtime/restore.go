package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

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
func (w *worker) restore(t *task) error {
	ctx := w.ctx
	adm := kadm.NewClient(w.cl)
	ends, err := adm.ListCommittedOffsets(ctx, w.changelogs...)
	if err != nil {
		return fmt.Errorf("list changelog end offsets: %w", err)
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("list changelog end offsets: %w", err)
	}
	want := make(map[string]map[int32]kgo.Offset)
	end := make(map[string]int64)
	var total int64
	for _, store := range w.topo.Stores {
		topic := ChangelogTopic(w.cfg.AppID, store)
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
			want[topic] = map[int32]kgo.Offset{t.id.Partition: kgo.NewOffset().At(from)}
			end[topic] = lo.Offset
			total += lo.Offset - from
		}
	}
	if len(want) == 0 {
		return nil
	}
	start := time.Now()
	t.log.Info("restoring state from changelog", "records", total)

	opts := append([]kgo.Opt{
		kgo.SeedBrokers(w.cfg.Brokers...),
		kgo.ConsumePartitions(want),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Control records show where a transaction ended, so restore can
		// tell it reached the end offset even when the last records of the
		// partition are commit markers.
		kgo.KeepControlRecords(),
	}, w.cfg.ClientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("restore client: %w", err)
	}
	defer cl.Close()

	storeOf := make(map[string]string, len(w.topo.Stores))
	for _, store := range w.topo.Stores {
		storeOf[ChangelogTopic(w.cfg.AppID, store)] = store
	}
	batch := state.Batch{Offsets: t.committed.Clone()}
	var replayed int64
	lastLog := time.Now()
	for len(end) > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fetches.EachError(func(topic string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("fetch %s/%d: %w", topic, p, err))
		})
		if ferr != nil {
			return ferr
		}
		var derr error
		fetches.EachRecord(func(r *kgo.Record) {
			store := storeOf[r.Topic]
			stop, ok := end[r.Topic]
			if !ok || r.Offset >= stop {
				return // past the end captured at the start: not ours to apply
			}
			replayed++
			batch.Offsets.Changelog[store] = r.Offset + 1
			if r.Offset+1 >= stop {
				delete(end, r.Topic)
			}
			switch {
			case r.Attrs.IsControl():
			case isOffsetsRecord(r):
				input, err := decodeOffsetsRecord(r.Value)
				if err != nil {
					derr = errors.Join(derr, fmt.Errorf("%s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err))
					return
				}
				for tp, off := range input {
					if off > batch.Offsets.Input[tp] {
						batch.Offsets.Input[tp] = off
					}
				}
			default:
				batch.Writes = append(batch.Writes, state.Write{Store: store, Key: r.Key, Value: r.Value, Delete: r.Value == nil})
			}
		})
		if derr != nil {
			return derr
		}
		if len(batch.Writes) >= restoreBatch || len(end) == 0 {
			if err := t.db.Apply(&batch); err != nil {
				return fmt.Errorf("apply restored batch: %w", err)
			}
			clear(batch.Writes)
			batch.Writes = batch.Writes[:0]
		}
		if time.Since(lastLog) > 5*time.Second {
			lastLog = time.Now()
			t.log.Info("restoring", "done", replayed, "records", total,
				"percent", fmt.Sprintf("%.1f", 100*float64(replayed)/float64(max(total, 1))))
		}
	}
	t.committed = batch.Offsets
	t.log.Info("restored state from changelog", "records", replayed, "took", time.Since(start).Round(time.Millisecond))
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
