package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Span is a range of offsets [From, End) of one partition.
type Span struct {
	From, End int64
}

// ReadCommitted calls fn, in offset order per partition, for every record
// in the spans that a read_committed consumer returns, and returns once
// every span has been read to its End (callers pass the last stable
// offset, from kadm's ListCommittedOffsets).
//
// Why not simply consume with read_committed: franz-go does not expose a
// consumer's position, so a reader cannot tell it reached End when the last
// records before End are ones read_committed hides. The embedded broker
// hides such records with no marker after them: after a SIGKILL it aborts
// the transactions that were open without writing abort markers (docs/design.md
// §6), and a read_committed restore waited forever for offsets it would
// never be shown. So this reads uncommitted, with control records, sees
// every offset, and applies the transactions itself:
//
//   - a non-transactional record is committed;
//   - a transactional record waits for its producer's next control record
//     in the partition: a commit marker releases it, an abort marker drops it;
//   - a record from a producer at a higher epoch than its pending records
//     means that earlier transaction ended without a marker: an abort;
//   - a transaction still pending at End is resolved by its marker after
//     End (read up to the high watermark, releasing nothing past End), and
//     dropped when none comes before the high watermark.
//
// Records are released in offset order, as read_committed delivers them.
func ReadCommitted(ctx context.Context, opts []kgo.Opt, spans map[string]map[int32]Span, fn func(*kgo.Record) error) error {
	want := make(map[string]map[int32]kgo.Offset)
	filters := make(map[string]map[int32]*txnFilter)
	left := 0
	for topic, parts := range spans {
		for p, s := range parts {
			if s.From >= s.End {
				continue
			}
			if want[topic] == nil {
				want[topic] = make(map[int32]kgo.Offset)
				filters[topic] = make(map[int32]*txnFilter)
			}
			want[topic][p] = kgo.NewOffset().At(s.From)
			filters[topic][p] = &txnFilter{end: s.End, pending: map[int64]int16{}}
			left++
		}
	}
	if left == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), opts...),
		kgo.ConsumePartitions(want),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return fmt.Errorf("kafka: read committed: %w", err)
	}
	defer cl.Close()
	// The high watermarks bound how far past End a reader looks for the
	// markers of transactions that began before End (below).
	topics := make([]string, 0, len(filters))
	for topic := range filters {
		topics = append(topics, topic)
	}
	hwms, err := kadm.NewClient(cl).ListEndOffsets(ctx, topics...)
	if err == nil {
		err = hwms.Error()
	}
	if err != nil {
		return fmt.Errorf("kafka: read committed: high watermarks: %w", err)
	}
	for topic, parts := range filters {
		for p, f := range parts {
			f.hwm = f.end
			if o, ok := hwms.Lookup(topic, p); ok && o.Offset > f.end {
				f.hwm = o.Offset
			}
		}
	}
	for left > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("kafka: fetch %s/%d: %w", t, p, err))
		})
		if ferr != nil {
			return ferr
		}
		var uerr error
		fetches.EachRecord(func(r *kgo.Record) {
			f := filters[r.Topic][r.Partition]
			if uerr != nil || f == nil || f.done {
				return
			}
			if uerr = f.add(r, fn); uerr == nil && f.done {
				left--
			}
		})
		if uerr != nil {
			return uerr
		}
	}
	return nil
}

// txnFilter applies transaction outcomes to one partition's records.
type txnFilter struct {
	end int64
	// hwm is the high watermark when reading began: a transaction whose
	// records lie before end can have its marker after end (another
	// producer's transaction opened in between, which is what ended the
	// stable range). Reading goes on up to hwm for those markers only.
	hwm  int64
	done bool
	// queue holds records in offset order until they are resolved.
	queue []entry
	// pending maps a producer id with unresolved records to their epoch.
	pending map[int64]int16
}

type entry struct {
	r     *kgo.Record
	state int8 // 0 pending, 1 committed, -1 aborted
}

func (f *txnFilter) add(r *kgo.Record, fn func(*kgo.Record) error) error {
	if r.Offset >= f.end {
		// Past the span: only the outcome of what is pending matters.
		if _, ok := f.pending[r.ProducerID]; ok {
			if r.Attrs.IsControl() {
				f.resolve(r.ProducerID, isCommitMarker(r.Key))
			} else if r.ProducerEpoch > f.pending[r.ProducerID] {
				f.resolve(r.ProducerID, false)
			}
		}
		if err := f.release(fn); err != nil {
			return err
		}
		if len(f.pending) == 0 || r.Offset+1 >= f.hwm {
			return f.finish(fn)
		}
		return nil
	}
	switch {
	case r.Attrs.IsControl():
		f.resolve(r.ProducerID, isCommitMarker(r.Key))
	case !r.Attrs.IsTransactional():
		f.queue = append(f.queue, entry{r: r, state: 1})
	default:
		if epoch, ok := f.pending[r.ProducerID]; ok && r.ProducerEpoch > epoch {
			f.resolve(r.ProducerID, false) // its last transaction ended unmarked
		}
		f.pending[r.ProducerID] = r.ProducerEpoch
		f.queue = append(f.queue, entry{r: r})
	}
	if err := f.release(fn); err != nil {
		return err
	}
	if r.Offset+1 >= f.end && (len(f.pending) == 0 || r.Offset+1 >= f.hwm) {
		return f.finish(fn)
	}
	return nil
}

func (f *txnFilter) resolve(pid int64, commit bool) {
	if _, ok := f.pending[pid]; !ok {
		return
	}
	delete(f.pending, pid)
	state := int8(-1)
	if commit {
		state = 1
	}
	for i := range f.queue {
		if f.queue[i].state == 0 && f.queue[i].r.ProducerID == pid {
			f.queue[i].state = state
		}
	}
}

// release passes on the resolved records at the head of the queue.
func (f *txnFilter) release(fn func(*kgo.Record) error) error {
	n := 0
	for ; n < len(f.queue) && f.queue[n].state != 0; n++ {
		if f.queue[n].state == 1 {
			if err := fn(f.queue[n].r); err != nil {
				return err
			}
		}
	}
	f.queue = f.queue[:copy(f.queue, f.queue[n:])]
	return nil
}

// finish drops what is unresolved at End and releases the rest.
func (f *txnFilter) finish(fn func(*kgo.Record) error) error {
	for pid := range f.pending {
		f.resolve(pid, false)
	}
	f.done = true
	return f.release(fn)
}

// isCommitMarker decodes a control record key: version int16, type int16
// (0 abort, 1 commit). An unreadable key counts as an abort, as the broker
// itself treats one.
func isCommitMarker(key []byte) bool {
	return len(key) >= 4 && binary.BigEndian.Uint16(key[2:4]) == 1
}
