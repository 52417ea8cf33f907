package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
)

// NoTimestamp is the timestamp of a record produced without one (Kafka's
// -1), as is any negative one: the producer stamps it with its clock.
// Event times are never negative (sources refuse them), so it cannot be
// mistaken for one; 0 is the epoch, a time like any other.
const NoTimestamp = -1

// produceRecord copies key, value and headers into a recycled record and
// produces it in the open transaction; partition < 0 means the partitioner
// chooses from the key. A nil value stays nil (a tombstone).
func (w *worker) produceRecord(topic string, partition int32, key, value []byte, ts int64, headers []kgo.RecordHeader) (*kgo.Record, error) {
	// Checked here, not left to the producer: franz-go fails such a
	// record asynchronously, which would abort the transaction, and the
	// record would fail again after every restart.
	if err := CheckRecordSize(topic, key, value, headers, w.cfg.MaxRecordBytes); err != nil {
		return nil, err
	}
	if !w.inTxn {
		// step begins the transaction before anything can produce.
		return nil, fmt.Errorf("%w: to %s", ErrNoTransaction, topic)
	}
	r := w.produced.record()
	r.Topic, r.Partition = topic, partition
	r.Key = w.produced.copy(key)
	r.Value = w.produced.copy(value)
	r.Headers = w.produced.copyHeaders(headers)
	if ts >= 0 {
		r.Timestamp = time.UnixMilli(ts) // 0 too: the epoch is a time
	}
	// Not the run context: a shutdown must still be able to produce the
	// changelog of its final commit. The transaction bounds the record.
	w.cl.Produce(context.Background(), r, w.promise)
	return r, nil
}

func (w *worker) onProduced(r *kgo.Record, err error) {
	if err == nil {
		return
	}
	w.errMu.Lock()
	if w.prodErr == nil {
		w.prodErr = fmt.Errorf("produce to %s/%d: %w", r.Topic, r.Partition, err)
	}
	w.errMu.Unlock()
}

// ErrRecordTooLarge is returned by Produce for a record larger than
// Config.MaxRecordBytes.
var ErrRecordTooLarge = errors.New("record too large")

// ErrNoTransaction is a produce outside a transaction: a bug in eddy,
// never the record's fault (no error policy may skip the record for it).
var ErrNoTransaction = errors.New("eddy: produce outside a transaction (a bug in eddy)")

// CheckRecordSize returns an error wrapping ErrRecordTooLarge when key,
// value and headers (what franz-go counts against a batch's size) exceed
// limit (0: DefaultMaxRecordBytes).
func CheckRecordSize(topic string, key, value []byte, headers []kgo.RecordHeader, limit int) error {
	if limit == 0 {
		limit = DefaultMaxRecordBytes
	}
	n := len(key) + len(value)
	for _, h := range headers {
		n += len(h.Key) + len(h.Value)
	}
	if n > limit {
		return fmt.Errorf("record for %s: %d bytes of key, value and headers, more than MaxRecordBytes (%d): %w", topic, n, limit, ErrRecordTooLarge)
	}
	return nil
}

func (w *worker) produceErr() error {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.prodErr
}

// recycle makes the ended transaction's records reusable. After End,
// franz-go holds none of them.
func (w *worker) recycle() {
	w.produced.reset()
	w.errMu.Lock()
	w.prodErr = nil
	w.errMu.Unlock()
}

// partitioner places changelog records on the partition the task set and
// keyed records where hash puts them: Kafka's default partitioner unless
// Config.Partitioner says otherwise, so that the app's other producers
// (a JVM producer, kcat) and eddy agree on which partition holds a key.
type partitioner struct {
	hash   kafka.Partitioner
	manual map[string]bool
}

func newPartitioner(hash kafka.Partitioner, manualTopics []string) kgo.Partitioner {
	p := partitioner{hash: hash, manual: make(map[string]bool, len(manualTopics))}
	for _, t := range manualTopics {
		p.manual[t] = true
	}
	return p
}

func (p partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if p.manual[topic] {
		return manualPartitioner{}
	}
	return &keyPartitioner{hash: p.hash}
}

type manualPartitioner struct{}

func (manualPartitioner) RequiresConsistency(*kgo.Record) bool { return true }
func (manualPartitioner) Partition(r *kgo.Record, _ int) int   { return int(r.Partition) }

type keyPartitioner struct {
	hash kafka.Partitioner
	next atomic.Uint32
}

// RequiresConsistency: a keyed record, or one for a chosen partition (a
// foreign-key join's answer, which has no key), must land on exactly the
// partition chosen, even while another partition has no leader: franz-go
// otherwise picks among the writable partitions only, by position.
func (*keyPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return r.Key != nil || r.Partition >= 0
}

func (p *keyPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Partition >= 0 {
		return int(r.Partition) // out of range: franz-go fails the record, naming it
	}
	if r.Key == nil {
		return int(p.next.Add(1) % uint32(n))
	}
	return int(p.hash.Partition(r.Key, int32(n)))
}
