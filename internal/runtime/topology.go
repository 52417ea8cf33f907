// Package runtime runs topologies: workers that own a consumer-group member
// and a transactional producer, the tasks they process, the commit cycle of
// DESIGN.md §3 and the restore of §4. Package eddy builds the topology; this
// package knows nothing of its types, only of raw records and stores.
package runtime

import (
	"fmt"
	"log/slog"

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

// Topology is what the runtime needs to know of a user topology.
type Topology struct {
	// Sources are the input topics. They must be co-partitioned: task p
	// reads partition p of each of them.
	Sources []string
	// Stores are the names of the task's state stores; each has a
	// changelog topic "<app-id>-<store>-changelog".
	Stores []string
	// NewTask instantiates the processors of one task. It is called when
	// the task is assigned, after its stores are restored.
	NewTask func(tc TaskContext) (TaskProcessor, error)
}

// TaskProcessor is one task's instance of the topology.
type TaskProcessor interface {
	// Process runs one source record through the task's processors. An
	// error stops the worker: the open transaction is aborted.
	Process(rec *kgo.Record) error
	// Close releases the processors' resources.
	Close() error
}

// TaskContext is what a task's processors may use of the runtime while a
// record is processed.
type TaskContext interface {
	ID() TaskID
	// Store returns the write buffer of the named store, or an error if
	// the topology did not declare it (it would have no changelog).
	Store(name string) (*state.StoreBuffer, error)
	// Produce sends a record to topic within the open transaction. It
	// copies key, value and headers, so the caller may reuse its buffers.
	// The partition is Kafka's default partitioner of the key (or spread
	// for a nil key).
	Produce(topic string, key, value []byte, timestamp int64, headers []kgo.RecordHeader) error
	// Logger carries the app, instance and task attributes.
	Logger() *slog.Logger
}

// ChangelogTopic is the name of a store's changelog topic.
func ChangelogTopic(appID, store string) string { return appID + "-" + store + "-changelog" }
