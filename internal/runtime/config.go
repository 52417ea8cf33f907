package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/checkpoint"
	"github.com/eddy-streams/eddy/metrics"
	"github.com/eddy-streams/eddy/state"
)

// Config is the runtime's configuration. Package eddy fills it from the
// user's eddy.Config after applying defaults; Validate reports every problem
// at once.
type Config struct {
	AppID      string
	Brokers    []string
	StateDir   string
	InstanceID string
	// Workers is the number of workers (group members) in this process.
	Workers int
	// CommitInterval is how often a worker commits its transaction.
	CommitInterval time.Duration
	// CommitRecords caps the records processed in one transaction.
	CommitRecords int
	// SessionTimeout is the group session timeout: how long a silent
	// member keeps its partitions.
	SessionTimeout time.Duration
	// TransactionTimeout is how long the broker lets a transaction stay
	// open before aborting it; it bounds how long a zombie can block a
	// successor's reads.
	TransactionTimeout time.Duration
	// StandbyReplicas is the number of standby copies of each stateful
	// task the group keeps on other instances (DESIGN.md §4): warm
	// databases that follow the task's changelog, so that a task whose
	// instance fails resumes elsewhere after replaying only a short tail.
	// The group leader's setting places them; give every instance the
	// same. 0 keeps none.
	StandbyReplicas int
	// AtLeastOnce trades exactly-once for a plain producer and offset
	// commits (Kafka Streams' at_least_once): a crash replays the records
	// since the last commit, and their outputs appear again.
	AtLeastOnce bool
	// IgnoreStateOffsets makes tasks resume from the group's committed
	// offsets alone, as Kafka Streams does, ignoring the input offsets
	// their changelog carries. It exists to measure what those offsets
	// protect against (DESIGN.md §6); never set it in production.
	IgnoreStateOffsets bool
	Backend            state.Backend
	// Checkpoints, when set, is where remote checkpoints of the task
	// databases go (DESIGN.md §4): every CheckpointInterval and at a clean
	// shutdown, and a task whose local database is missing, empty or
	// corrupt restores from the newest one before replaying the
	// changelog's tail. Nil: none, a task without local state replays
	// its whole changelog.
	Checkpoints checkpoint.Store
	// CheckpointInterval is how often each task is checkpointed; zero
	// means only at a clean shutdown.
	CheckpointInterval time.Duration
	// CheckpointKeep is how many checkpoints per task the store keeps
	// (at least 1 when Checkpoints is set).
	CheckpointKeep int
	// OnRestoreProgress, if set, receives each task's restore progress
	// (see RestoreProgress); it runs in the worker's goroutine, so it
	// must return quickly.
	OnRestoreProgress func(RestoreProgress)
	// Metrics receives the instance's metrics; New makes one when nil.
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// ClientOpts are added to every Kafka client (TLS, SASL, ...).
	ClientOpts []kgo.Opt

	// hooks let the package's tests observe the runtime; nil otherwise.
	hooks *testHooks
}

// testHooks are called, when set, at points the tests watch.
type testHooks struct {
	// standbyApplied runs after each catch-up round of a standby task with
	// the offsets its database reflects and its lag.
	standbyApplied func(id TaskID, applied state.Offsets, lag int64)
}

// Validate returns every problem of c, joined, each naming the field.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !ValidName(c.AppID) {
		bad("AppID %q: set a non-empty id of letters, digits, '.', '_' and '-' (it prefixes topic names), e.g. \"ledger\"", c.AppID)
	}
	if len(c.Brokers) == 0 {
		bad("Brokers: set at least one host:port, e.g. 127.0.0.1:9092")
	}
	if c.StateDir == "" {
		bad("StateDir: set the directory that holds the task databases")
	}
	if !ValidName(c.InstanceID) {
		bad("InstanceID %q: set a stable id per instance of letters, digits, '.', '_' and '-' (static group membership)", c.InstanceID)
	}
	if c.Workers < 1 {
		bad("Workers %d: must be at least 1", c.Workers)
	}
	if c.StandbyReplicas < 0 {
		bad("StandbyReplicas %d: must be 0 (none) or more", c.StandbyReplicas)
	}
	if c.CommitInterval <= 0 {
		bad("CommitInterval %v: must be positive, e.g. 100ms", c.CommitInterval)
	}
	if c.CommitRecords < 1 {
		bad("CommitRecords %d: must be at least 1", c.CommitRecords)
	}
	if c.SessionTimeout <= 0 {
		bad("SessionTimeout %v: must be positive, e.g. 10s", c.SessionTimeout)
	}
	if c.TransactionTimeout <= 0 {
		bad("TransactionTimeout %v: must be positive, e.g. 10s", c.TransactionTimeout)
	}
	if c.Backend == nil {
		bad("Backend: set a state backend")
	}
	if c.CheckpointInterval < 0 {
		bad("CheckpointInterval %v: must be zero (only at shutdown) or positive, e.g. 1m", c.CheckpointInterval)
	}
	if c.Checkpoints != nil && c.CheckpointKeep < 1 {
		bad("CheckpointKeep %d: keep at least 1 checkpoint per task, e.g. 3", c.CheckpointKeep)
	}
	if c.Logger == nil {
		bad("Logger: set a logger")
	}
	return errors.Join(errs...)
}

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
