package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/checkpoint"
	"github.com/eddy-streams/eddy/metrics"
	"github.com/eddy-streams/eddy/state"

	"github.com/eddy-streams/eddy/internal/failpoint"
	"github.com/eddy-streams/eddy/internal/kafka"
)

// Config is eddy.Config resolved for the runtime: eddy.New applies the
// defaults and validates every field (each field means what eddy.Config
// documents), then App.Run opens what the runtime needs opened (the
// backend, the checkpoint store) and adds its own parts (metrics,
// failpoints). The runtime trusts it.
type Config struct {
	AppID              string
	Brokers            []string
	StateDir           string
	InstanceID         string
	Workers            int
	StandbyReplicas    int
	CommitInterval     time.Duration
	CommitRecords      int
	MaxRecordBytes     int // 0: DefaultMaxRecordBytes
	SessionTimeout     time.Duration
	TransactionTimeout time.Duration
	// AtLeastOnce is eddy.Config.Guarantee == eddy.AtLeastOnce.
	AtLeastOnce        bool
	IgnoreStateOffsets bool
	Backend            state.Backend
	// StateCache is the budget that every task's write buffer shares for
	// its cache of committed values; nil: each buffer has its own
	// state.DefaultBufferCache.
	StateCache *state.CacheBudget
	// TableCacheBytes is the instance's table cache budget, split evenly
	// among its workers; zero or negative: off.
	TableCacheBytes int64
	// Checkpoints is the remote checkpoint store (eddy.Config's
	// CheckpointURL opened, or its CheckpointStore); nil: none.
	Checkpoints checkpoint.Store
	// CheckpointInterval is how often each task is checkpointed; zero
	// means only at a clean shutdown.
	CheckpointInterval time.Duration
	CheckpointKeep     int
	// RepartitionPurgeInterval is how often the records of repartition
	// topics that committed transactions consumed are deleted (purge.go);
	// zero or negative: never.
	RepartitionPurgeInterval time.Duration
	OnRestoreProgress        func(RestoreProgress)
	// Logger carries the app and instance attributes.
	Logger     *slog.Logger
	ClientOpts []kgo.Opt
	Endpoint   string

	// Partitioner is the partitioner the app assumes its co-partitioned
	// sources were produced with, and produces its own keyed records with.
	Partitioner kafka.Partitioner
	// PartitionCheckEvery: the partition guard (partitionguard.go) checks
	// one keyed record of co-partitioned sources in every
	// PartitionCheckEvery; below 1 it is off.
	PartitionCheckEvery int
	// FailOnMisplaced makes a misplaced record stop the app, rather than
	// being counted and logged.
	FailOnMisplaced bool
	// PrepareSources, when set, is called with the topics the source
	// patterns matched before each plan runs with them (patterns.go): the
	// app creates their dead-letter topics, as it does for named sources
	// before Run.
	PrepareSources func(ctx context.Context, topics []string) error
	// MaxTaskIdle is how long a task with several sources waits for an
	// empty one with nothing on the broker; 0: not at all, but a wait
	// for records the broker holds still applies; negative: no wait of
	// any kind (docs/design.md §5.2).
	MaxTaskIdle time.Duration
	// Bounded makes the run end (eddy.Config.StopAtEndOffsets;
	// bounded.go): each external source partition is read up to its end
	// offset as of its task's first open, and Run returns once every
	// task's input has ended.
	Bounded bool

	// Failpoints crash the process at points of the commit cycle, the
	// checkpoint upload and the restore (crash tests; nil: none).
	Failpoints *failpoint.Set
	// Metrics receives the instance's metrics; New makes one when nil.
	Metrics *metrics.Metrics

	// hooks let the package's tests observe the runtime; nil otherwise.
	hooks *testHooks
}

// testHooks are called, when set, at points the tests watch.
type testHooks struct {
	// standbyApplied runs after each catch-up round of a standby task with
	// the offsets its database reflects and its lag.
	standbyApplied func(id TaskID, applied state.Offsets, lag int64)
}

// batchOverhead is what a record batch of one record adds to the record's
// key, value and headers: the batch header (61 bytes) and the record's own
// fields (at most ~30), with margin.
const batchOverhead = 1 << 10

// DefaultMaxRecordBytes is MaxRecordBytes's default: with the batch
// overhead it stays under Kafka's default max.message.bytes (1,048,588).
const DefaultMaxRecordBytes = 1_000_000

// MaxMaxRecordBytes is the largest MaxRecordBytes: it keeps a batch under
// franz-go's 1 GiB limit.
const MaxMaxRecordBytes = 1<<30 - batchOverhead

// ValidName reports whether s is usable in a Kafka topic name (and so in a
// file name); app ids, instance ids and store names must be: the characters Kafka allows, at most 200 of them.
func ValidName(s string) bool {
	if s == "" || len(s) > 200 || s == "." || s == ".." {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// CheckEndpoint reports whether e is a usable query endpoint: empty (none)
// or host:port with a host and a port other than 0 that other instances
// can connect to.
func CheckEndpoint(e string) error {
	if e == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(e)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", e, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port %q: give the port (1-65535) the HTTP server listens on, not 0", e, port)
	}
	if host == "" || len(e) > maxProcessLen {
		return fmt.Errorf("%q: give a host name or address other instances reach this one at, e.g. 10.0.0.5:8080", e)
	}
	return nil
}
