package chaos

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// watcher follows the committed records of a topic as they arrive: their
// count and, per partition, when the last one arrived and its offset.
// Recovery from a fault is measured with it: the pipeline works again once
// every output partition holds a committed record written after the fault
// ended.
type watcher struct {
	topic  string
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	n    int64
	last map[int32]time.Time
	next map[int32]int64 // per partition, the offset after the last record seen
	gap  time.Duration
}

func newWatcher(opts []kgo.Opt, topic string) *watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{topic: topic, cancel: cancel, done: make(chan struct{}), last: map[int32]time.Time{}, next: map[int32]int64{}}
	go func() {
		defer close(w.done)
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.ConsumeTopics(topic),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
		if err != nil {
			return
		}
		defer cl.Close()
		for ctx.Err() == nil {
			f := cl.PollFetches(ctx)
			now := time.Now()
			w.mu.Lock()
			f.EachPartition(func(p kgo.FetchTopicPartition) {
				if len(p.Records) > 0 {
					w.n += int64(len(p.Records))
					if l, ok := w.last[p.Partition]; ok {
						w.gap = max(w.gap, now.Sub(l))
					}
					w.last[p.Partition] = now
					w.next[p.Partition] = p.Records[len(p.Records)-1].Offset + 1
				}
			})
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *watcher) count() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// allPast reports whether every partition in ends received a committed
// record at or past its offset there: ends are high watermarks taken when a
// fault ended, so such a record was written after it.
func (w *watcher) allPast(ends map[int32]int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p, end := range ends {
		if w.next[p] <= end {
			return false
		}
	}
	return true
}

// longestGap is the longest time a partition went without a record, from
// its first record on.
func (w *watcher) longestGap() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gap
}

func (w *watcher) close() { w.cancel(); <-w.done }
