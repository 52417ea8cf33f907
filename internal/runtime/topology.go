// Package runtime runs topologies: workers that own a consumer-group member
// and a transactional producer, the tasks they process, the commit cycle of
// docs/design.md §3 and the restore of §4. Package eddy builds the topology; this
// package knows nothing of its types, only of raw records and stores.
package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/state"
)

// TaskID names a task: partition Partition of the source topics of
// sub-topology Subtopology, printed as Kafka Streams does ("0_3").
type TaskID struct {
	Subtopology int
	Partition   int32
}

func (id TaskID) String() string { return fmt.Sprintf("%d_%d", id.Subtopology, id.Partition) }

// Topology is what the runtime needs to know of a user topology: its
// sub-topologies (parts joined only through topics) and global stores.
type Topology struct {
	Subtopologies []Subtopology
	// Repartitions are internal topics the runtime creates before it
	// starts: topics that one sub-topology writes (re-keyed records) and
	// another reads. Names are full topic names.
	Repartitions []Repartition
	// Globals are stores replicated in full to every instance, each read
	// from its own topic (a global table).
	Globals []GlobalStore
	// Sinks are the external topics the topology writes: they must exist
	// when the app starts (a produce to a missing topic would fail every
	// transaction, or create the topic with the broker's defaults).
	Sinks []string
}

// Subtopology is a connected part of the topology. Its task p reads
// partition p of every one of its Sources (they must be co-partitioned)
// and owns partition p of each store's changelog.
type Subtopology struct {
	Sources []string
	// Patterns make every topic whose name matches one a source too
	// (SourcePattern): Run resolves them against the cluster's topics when
	// it starts and again whenever the matching set changes (patterns.go).
	Patterns []*regexp.Regexp
	// Addressed are the sources whose writer chose each record's
	// partition rather than hashing a key (a foreign-key join's answers,
	// which have no key). They have the sub-topology's partition count,
	// but they do not make its other sources co-partitioned by key: the
	// partition guard checks keys only where two keyed sources meet.
	Addressed []string
	// Writes are the topics the sub-topology writes (full names):
	// repartition topics and those of its sinks. EndOrder ends a
	// sub-topology that writes a topic another reads before that one.
	Writes []string
	Stores []Store
	// NewTask instantiates the processors of one task. It is called when
	// the task is assigned, after its stores are restored.
	NewTask func(tc TaskContext) (TaskProcessor, error)
}

// Store is a state store of a sub-topology; its changelog topic is
// ChangelogTopic(appID, Name).
type Store struct {
	Name string
	// Retention, when positive, makes the changelog "compact,delete" with
	// retention.ms = Retention + 24h (a window or session store: records
	// of expired windows are never read again). Zero: compacted only.
	Retention time.Duration
}

// Repartition is an internal topic written by one sub-topology and read by
// another. Partitions zero lets Run size it (repartitionCounts): as the
// topics it is co-partitioned with, or as the largest source of the
// sub-topologies that write it.
type Repartition struct {
	Topic      string
	Partitions int32
	// Writers are the indexes of the sub-topologies that write the topic;
	// empty: unknown (the largest external source sizes it).
	Writers []int
}

// GlobalStore is a store that every instance holds whole, fed from Topic
// (read_committed, from the start), not from a changelog of its own.
type GlobalStore struct {
	Name  string
	Topic string
}

// TaskProcessor is one task's instance of the topology.
type TaskProcessor interface {
	// Process runs one source record through the task's processors. An
	// error stops the worker: the open transaction is aborted.
	Process(rec *kgo.Record) error
	// Punctuate is called with the wall clock, within a transaction, at
	// least every commit interval while the task is open: wall-clock
	// punctuators run from it.
	Punctuate(now time.Time) error
	// Close releases the processors' resources.
	Close() error
}

// TaskFlusher is implemented by a TaskProcessor that holds updates back
// within a transaction (the DSL's table cache: the latest update per key,
// forwarded once). The runtime calls Flush at the start of every commit,
// before the changelog is written, because forwarding writes other stores
// and produces records that belong to the same transaction; an error
// aborts the transaction like a processing error. Discard drops what is
// held when the transaction aborts: its records are processed again.
type TaskFlusher interface {
	Flush() error
	Discard()
}

// TaskInputEnder is implemented by a TaskProcessor whose operators act on
// stream time (windows, suppression, stream joins, stream-time
// punctuators). EndOfInput is called, inside a transaction, when the
// task's bounded input has ended and no more records will reach it: the
// operators act as if stream time had reached end, so every window
// closes and emits its final result.
type TaskInputEnder interface {
	EndOfInput(end int64) error
}

// EndOrder is the order in which a bounded run ends the sub-topologies'
// input: a sub-topology that writes a topic (a repartition topic, or one
// chained with To and Source) before those that read it, so that what it
// emits at its end (final window results) reaches them while they still
// take records. A topic's readers are those the records are routed to:
// the sub-topologies that name it as a source, or else the one whose
// SourcePattern matches it (PatternSub's rule; today it refuses every
// topic a topology writes — its sinks, its internal topics — but the
// order must follow the routing whatever that rule becomes). Ties, and
// sub-topologies that feed each other (a foreign-key join's subscription
// and response topics), keep their index order.
func (t Topology) EndOrder() []int {
	n := len(t.Subtopologies)
	readers := make(map[string][]int)
	for i, s := range t.Subtopologies {
		for _, topic := range s.Sources {
			readers[topic] = append(readers[topic], i)
		}
	}
	// after[w] are the sub-topologies that read what w writes.
	after := make([][]int, n)
	waiting := make([]int, n)
	for w, s := range t.Subtopologies {
		for _, topic := range s.Writes {
			if _, named := readers[topic]; !named {
				if i, ok := t.patternReader(topic); ok {
					readers[topic] = []int{i}
				}
			}
			for _, i := range readers[topic] {
				if i != w {
					after[w] = append(after[w], i)
					waiting[i]++
				}
			}
		}
	}
	order := make([]int, 0, n)
	done := make([]bool, n)
	for len(order) < n {
		next := -1
		for i := range n {
			if !done[i] && waiting[i] == 0 {
				next = i
				break
			}
		}
		if next < 0 { // a cycle: take the first left
			for i := range n {
				if !done[i] {
					next = i
					break
				}
			}
		}
		done[next] = true
		order = append(order, next)
		for _, i := range after[next] {
			waiting[i]--
		}
	}
	return order
}

// TaskCommitter is implemented by a TaskProcessor that writes to a system
// outside Kafka in two phases (the DSL's ToTransactional; docs/design.md
// §3.7). Prepare is called once per commit, after Flush and before the
// changelog is written: it prepares that system's transaction and writes
// its token in the task's state, so in the changelog of the Kafka
// transaction (an error aborts it). Committed is called once the Kafka
// transaction committed and the task's state was applied, to commit the
// prepared one; an error ends the session, and the task, opened again,
// commits it from the token its changelog holds. Uncertain is called,
// before the rollback's Discard, when ending the Kafka transaction failed
// and whether it committed is unknown: the prepared transaction must then
// be neither committed nor rolled back, but left to the task's next open,
// which reads the outcome from the changelog. A Prepare error that wraps
// ErrTaskFenced ends the session instead of stopping the app. Pending
// reports writes not yet prepared: a punctuator's writes to such a
// system make the task dirty, so that they are committed with the
// transaction that made them rather than wait for another.
type TaskCommitter interface {
	Prepare() error
	Committed() error
	Uncertain()
	Pending() bool
}

// ErrTaskFenced is wrapped by a TaskCommitter's error when the system
// outside Kafka says a newer owner has the task (an epoch raised past the
// task's): this instance lost the task while it was frozen or cut off, as
// a zombie does. The transaction aborts and the session ends; the new
// session rejoins the group and opens whichever tasks it is given again,
// as after Kafka fences a producer. Nothing is the record's fault.
var ErrTaskFenced = errors.New("a newer owner of the task fenced it")

// TaskContext is what a task's processors may use of the runtime while a
// record is processed.
type TaskContext interface {
	ID() TaskID
	// Store returns the write buffer of the named store, or an error if
	// the topology did not declare it (it would have no changelog).
	Store(name string) (*state.StoreBuffer, error)
	// GlobalStore returns a read-only view of a global store.
	GlobalStore(name string) (GlobalReader, error)
	// StreamTime is the task's stream time: the largest timestamp passed to
	// AdvanceStreamTime, restored with the state after a restart, or
	// state.NoStreamTime.
	StreamTime() int64
	// AdvanceStreamTime moves stream time to ts if ts is later. It is part
	// of the open transaction: an abort moves it back.
	AdvanceStreamTime(ts int64)
	// WallClock is the wall clock in ms since the Unix epoch as of the
	// current poll (or punctuation): read once per poll, as Kafka Streams
	// caches the system time per loop, so that stamping records with
	// processing time costs no clock read per record.
	WallClock() int64
	// Produce sends a record to topic within the open transaction. It
	// copies key, value and headers, so the caller may reuse its buffers.
	// timestamp is ms since the epoch, 0 included; a negative one
	// (NoTimestamp) leaves it to the producer's clock.
	// The partition is Kafka's default partitioner of the key (or spread
	// for a nil key).
	Produce(topic string, key, value []byte, timestamp int64, headers []kgo.RecordHeader) error
	// ProduceTo is Produce to an explicit partition of topic, whatever the
	// key: a foreign-key join answers a left row on the partition it was
	// read from. (The in-process runner has one partition per topic.)
	ProduceTo(topic string, partition int32, key, value []byte, timestamp int64, headers []kgo.RecordHeader) error
	// Logger carries the app, instance and task attributes.
	Logger() *slog.Logger
	// TableCache is the budget of the table caches of the tasks that run
	// with this one (its worker's); nil when table caching is off.
	TableCache() *TableCacheBudget
}

// GlobalReader reads a global store. It is safe for concurrent use: the
// global store's own goroutine updates it as its topic moves on.
type GlobalReader interface {
	Get(key []byte) (value []byte, ok bool, err error)
}

// ChangelogTopic is the name of a store's changelog topic.
func ChangelogTopic(appID, store string) string { return appID + "-" + store + "-changelog" }
