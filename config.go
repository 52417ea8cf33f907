package eddy

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/checkpoint"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/internal/runtime"
	"github.com/eddy-streams/eddy/internal/sysmem"
	"github.com/eddy-streams/eddy/state"
)

// Guarantee is the processing guarantee.
type Guarantee int

const (
	// ExactlyOnce: every input changes state and outputs exactly once,
	// through Kafka transactions (the default).
	ExactlyOnce Guarantee = iota
	// AtLeastOnce: no transactions; after a crash the records since the
	// last commit are processed again and their outputs written again.
	AtLeastOnce
)

func (g Guarantee) String() string {
	switch g {
	case ExactlyOnce:
		return "exactly-once"
	case AtLeastOnce:
		return "at-least-once"
	}
	return fmt.Sprintf("Guarantee(%d)", int(g))
}

// ParseGuarantee parses "exactly-once" or "at-least-once".
func ParseGuarantee(s string) (Guarantee, error) {
	switch s {
	case "exactly-once", "exactly_once":
		return ExactlyOnce, nil
	case "at-least-once", "at_least_once":
		return AtLeastOnce, nil
	}
	return 0, fmt.Errorf("eddy: guarantee %q: use exactly-once or at-least-once", s)
}

// Config configures Run. Zero fields take the defaults named on them.
type Config struct {
	// AppID names the application: its consumer group, the prefix of its
	// changelog topics and transactional ids. Required.
	AppID string
	// Brokers are the Kafka bootstrap servers. Required.
	Brokers []string
	// StateDir holds the task databases, under StateDir/AppID. Required.
	StateDir string
	// InstanceID is the static group membership id of this instance: a
	// restarted instance with the same id gets its tasks back at once.
	// Default: derived from the absolute StateDir, so one state directory
	// is one instance.
	InstanceID string
	// Workers is the number of workers (group members) in this process.
	// Default 1.
	Workers int
	// StandbyReplicas is how many standby copies of each stateful task the
	// group keeps on other instances (docs/design.md §4): a standby follows the
	// task's changelog into its own local database, so that when the
	// task's instance fails the group gives the task to the instance with
	// the most caught-up standby, which replays only the last few
	// transactions instead of the whole changelog. A copy needs an
	// instance (a process) that does not run the task: with fewer
	// instances, fewer copies exist. Each standby costs its instance the
	// task's disk space and a share of a changelog reader. The group
	// leader's setting applies: give every instance the same. Default 0.
	StandbyReplicas int
	// CommitInterval is how often a transaction commits. Default 100ms.
	CommitInterval time.Duration
	// CommitRecords caps the records of one transaction. Default 100000
	// (the interval usually ends a transaction first).
	CommitRecords int
	// MaxTaskIdle is how long a task with several source partitions (a
	// join, a merge) waits for one of them that has nothing buffered
	// before it processes the others without it (Kafka Streams'
	// max.task.idle.ms, KIP-695; docs/design.md §5.2). A task always
	// processes the record with the smallest timestamp among the heads of
	// its partitions, and waits, whatever this says, while a partition it
	// has nothing of holds records on the broker that it has not fetched
	// yet. Zero (the default) waits only for that; a positive value also
	// waits that long for a partition that has nothing on the broker
	// either (an input that is slow to be written); a negative value
	// never waits, and processes what each poll brought in timestamp
	// order. A task that waits holds its records in memory (at most
	// about 1,000 a partition: the fetch of a partition that has as many
	// buffered pauses) and commits what it processed meanwhile; other
	// tasks go on. Each time a wait ends without the partition's records
	// counts in eddy_task_idle_forced_total. Tasks that read one
	// partition never wait.
	MaxTaskIdle time.Duration
	// StopAtEndOffsets makes the run bounded, as Flink's bounded sources
	// (docs/design.md §5.3): each source partition is read up to the end
	// offset it had when its task first opened (recorded in the task's
	// state, so a restart keeps the bound; later records are not read),
	// a task whose inputs have all ended acts as if stream time reached
	// EndOfInputTime (windows emit their final results, suppressed
	// updates and the unmatched records of outer joins are forwarded),
	// the end reaches the sub-topologies downstream in-band, through
	// the repartition topics, and Run returns nil once every task of the
	// app, on every instance, has ended. Under ExactlyOnce each task
	// ends once, through crashes and moves; under AtLeastOnce a crash can
	// repeat an end (its final results come again). A topology with
	// source patterns or a foreign-key join is refused. The bound is the app id's: running an app id that
	// ended again ends at once. Default false.
	StopAtEndOffsets bool
	// SessionTimeout is the group session timeout. Default 10s.
	SessionTimeout time.Duration
	// BrokerTimeout is how long the app waits, from Run, for its first
	// connection to a broker: until then every failed attempt is logged
	// as a warning naming Brokers and the dial error (at once, then every
	// 30 s), and once it passes Run returns an error that names them
	// (wrapping ErrBrokersUnreachable). A broker lost after the first
	// connection is retried for as long as it takes. Default 2 minutes.
	BrokerTimeout time.Duration
	// TransactionTimeout bounds how long a crashed instance's open
	// transaction blocks its partitions. Default 10s.
	TransactionTimeout time.Duration
	// Guarantee is the processing guarantee. Default ExactlyOnce.
	Guarantee Guarantee
	// OnDecodeError is the policy for records that fail to decode.
	// Default DeadLetter.
	OnDecodeError ErrorPolicy
	// OnProcessError is the policy for records whose processing fails
	// (an error or a panic in user code, an output that fails to
	// encode). Default Fail.
	OnProcessError ErrorPolicy
	// OnProduceError is the policy for output records larger than
	// MaxRecordBytes. Default Fail.
	OnProduceError ErrorPolicy
	// MaxEventTimeAhead bounds how far ahead of the wall clock a source
	// record's event time (its Kafka timestamp, or what TimestampFrom
	// extracts) may be. A record further ahead — a typo'd year, a clock
	// or a unit gone wrong — would move its task's stream time there for
	// good, and every later record of the task's windows would be late
	// and dropped; instead it is refused with stage "time" before it
	// touches stream time, under OnDecodeError (dead-lettered by
	// default), and counted in eddy_time_refused_records_total. Only
	// being ahead counts: replaying an old topic is fine. Records of
	// repartition topics are not checked again (their times were checked
	// at the app's sources). The wall clock is read once per poll, so the
	// check is one comparison per record. Default DefaultMaxEventTimeAhead
	// (24 hours): far more than any clock skew or time zone mix-up, so
	// that no real record is refused, yet it bounds a bad one's harm to a
	// day of windows rather than forever; Kafka 4.0 brokers refuse
	// producer timestamps more than an hour ahead by default
	// (log.message.timestamp.after.max.ms), but they do not check a time
	// TimestampFrom takes from the value, and older brokers check
	// nothing. Negative: off (a test or generator that stamps records
	// ahead of the wall clock on purpose). eddytest applies it only when
	// set.
	MaxEventTimeAhead time.Duration
	// Partitioner is the partitioner the producers of the app's
	// co-partitioned sources use (the topics of a join, of a table and a
	// stream repartitioned to meet it, of merged streams): eddy produces
	// its repartition topics and keyed outputs with it too, routes state
	// queries by it, and checks that the keys it reads sit where it puts
	// them (PartitionCheckEvery, OnMisplacedRecord). Set CRC32 only when
	// every producer of those topics uses librdkafka's default. Default
	// Murmur2, Kafka's default. See docs/partitioners.md.
	Partitioner Partitioner
	// PartitionCheckEvery: the partition guard checks one keyed record in
	// every PartitionCheckEvery of the co-partitioned sources against
	// Partitioner. Default 1: every record, as the check is a hash of
	// the key and a compare, tens of nanoseconds (docs/partitioners.md).
	// Negative: off.
	PartitionCheckEvery int
	// OnMisplacedRecord is what a misplaced record does: a record of a
	// co-partitioned source whose key Partitioner puts on another
	// partition, so that it misses the records of its key in the other
	// sources. Default WarnMisplaced: counted, logged once per topic with
	// the fix, processed.
	OnMisplacedRecord MisplacedPolicy
	// MaxRecordBytes caps an output record's key, value and headers
	// (changelog records included): a larger one is refused at once with
	// ErrRecordTooLarge (and OnProduceError applies), rather than failing
	// the transaction at the broker. Default 1,000,000, under Kafka's
	// default max.message.bytes (1,048,588); raise both together.
	MaxRecordBytes int
	// IgnoreStateOffsets resumes tasks from the group's committed offsets
	// alone, ignoring the input offsets carried in the changelog. It exists
	// only to measure what those offsets protect against (lost group
	// offsets, docs/design.md §6); it weakens exactly-once. Default false.
	IgnoreStateOffsets bool
	// Backend stores task state. Default: Pebble (state/pebble), its
	// block cache sized by StateMemory.
	Backend state.Backend
	// StateMemory is the memory, in bytes, for the state of all the App's
	// tasks together (docs/design.md §2.1). Half is the write buffers'
	// cache of committed values, which serves most reads of hot keys
	// without going to the database and evicts key by key when full;
	// when Backend is nil, the other half is the default Pebble backend's
	// block cache, which also holds its memtables (Pebble charges them to
	// it). With a Backend of your own, size its caches yourself; the write
	// buffers still take half. The Go heap can hold up to twice the write
	// buffers' half between collections. Default DefaultStateMemory(): a
	// quarter of the memory the process may use (the machine's, or its
	// cgroup's limit), at least 256 MiB. At least 16 MiB.
	StateMemory int64
	// TableCacheBytes is the memory, in bytes, of the table cache (Kafka
	// Streams' cache.max.bytes.buffering): the tables a topology keeps in
	// a store (Aggregate, Reduce, Count, AggregateTable, ToTable,
	// TableFrom, a Materialize'd FilterTable or MapTableValues) forward
	// the latest update per key once per commit instead of every update,
	// so a hot key costs its downstream one record per commit interval.
	// The stores are written at once: joins and queries see every update.
	// Held updates are forwarded in the order their keys were first
	// updated, at each commit, before punctuators run, and, oldest first,
	// when the cache is full. The budget is the instance's, split evenly
	// among its Workers; a worker's tasks share its part. Default
	// DefaultTableCacheBytes (10 MiB, as Kafka Streams'). 0 means the
	// default, so turning it off takes a negative value, NoTableCache:
	// every update is forwarded at once (eddy before the cache). eddytest
	// applies it only when set (its default is off there), and commits
	// after every piped record unless in Driver.Transaction.
	TableCacheBytes int64
	// CheckpointURL turns on remote incremental checkpoints of the task
	// databases (docs/design.md §4): "file:///absolute/path" (a directory,
	// local or mounted) or "s3://bucket/prefix" (endpoint, credentials and
	// region from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY and AWS_REGION; the bucket must exist). Each
	// task uploads the files its last checkpoint lacks, every
	// CheckpointInterval and at a clean stop; a task that starts without
	// local state (a new machine, a wiped or corrupt directory) downloads
	// the newest checkpoint and replays only the changelog written since.
	// Default: none; such a task replays its whole changelog. Checkpoints
	// need a backend that can take them (Pebble on the OS file system).
	CheckpointURL string
	// CheckpointStore is used instead of CheckpointURL, for a store of
	// your own. Default: none.
	CheckpointStore checkpoint.Store
	// CheckpointInterval is how often each task is checkpointed when
	// checkpoints are on. Default 1 minute; negative: only at a clean stop.
	CheckpointInterval time.Duration
	// CheckpointKeep is how many checkpoints per task the store keeps; the
	// files only older ones need are deleted. Default 3.
	CheckpointKeep int
	// RepartitionPurgeInterval is how often the records of the repartition
	// topics that committed transactions consumed are deleted (Kafka's
	// DeleteRecords, as Kafka Streams does after its commits), so that a
	// repartition topic holds only records in transit rather than its
	// retention's worth. It runs on its own goroutine, outside the
	// transactions. With ACLs on, the app's principal needs DELETE on its
	// "<app-id>-" topics. Default 30s; negative: never.
	RepartitionPurgeInterval time.Duration
	// AllowTopologyChange lets the app start when a repartition topic of
	// its (the "<app-id>-...-repartition" topics its group consumed) is no
	// longer in the topology but still holds records the app has not
	// consumed: they are then left unread, with a warning. By default Run
	// refuses to start and names the topic and the fix, which is usually
	// eddy.Named on the operator whose position changed (see Named).
	AllowTopologyChange bool
	// Logger receives the app's logs. Default slog.Default().
	Logger *slog.Logger
	// KafkaOptions are added to every Kafka client (TLS, SASL, ...).
	KafkaOptions []kgo.Opt
	// Endpoint is the host:port at which this instance serves its HTTP
	// endpoints (App.Handler), as other instances reach it: the group
	// learns it, so that any instance can forward a state query to the
	// instance that owns the key (Kafka Streams' application.server).
	// Default: none; the instance answers for its own tasks only, and
	// other instances cannot route to it.
	Endpoint string
	// HTTPToken, when set, protects the endpoints of Handler: every
	// request but /healthz and /readyz must carry it as a bearer token
	// (or the browser cookie the web UI gets from "?token=TOKEN"). Give
	// every instance the same: forwarded queries carry it. Default: none.
	HTTPToken string
	// HTTPPeerTLS, when set, makes queries forwarded to other instances
	// use HTTPS with this client configuration: set it when the instances
	// serve Handler over TLS. Default: plain HTTP.
	HTTPPeerTLS *tls.Config
	// OnRestoreProgress, if set, receives each task's restore progress:
	// at the start, at most every second, and at the end (Done). It runs
	// in a worker's goroutine: return quickly. Restores are also logged
	// every 5 seconds with records, bytes, percent and ETA.
	OnRestoreProgress func(RestoreProgress)
}

func (c *Config) applyDefaults() {
	if c.InstanceID == "" && c.StateDir != "" {
		c.InstanceID = InstanceIDFromDir(c.StateDir)
	}
	if c.Workers == 0 {
		c.Workers = 1
	}
	if c.CommitInterval == 0 {
		c.CommitInterval = 100 * time.Millisecond
	}
	if c.CommitRecords == 0 {
		c.CommitRecords = 100_000
	}
	if c.StateMemory == 0 {
		c.StateMemory = DefaultStateMemory()
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 10 * time.Second
	}
	if c.TransactionTimeout == 0 {
		c.TransactionTimeout = 10 * time.Second
	}
	if c.BrokerTimeout == 0 {
		c.BrokerTimeout = DefaultBrokerTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = DefaultCheckpointInterval
	}
	if c.RepartitionPurgeInterval == 0 {
		c.RepartitionPurgeInterval = DefaultRepartitionPurgeInterval
	}
	if c.CheckpointKeep == 0 {
		c.CheckpointKeep = checkpoint.DefaultKeep
	}
	if c.PartitionCheckEvery == 0 {
		c.PartitionCheckEvery = 1
	}
	if c.MaxEventTimeAhead == 0 {
		c.MaxEventTimeAhead = DefaultMaxEventTimeAhead
	}
	if c.TableCacheBytes == 0 {
		c.TableCacheBytes = DefaultTableCacheBytes
	}
	c.policyDefaults()
}

// MinStateMemory is the smallest Config.StateMemory.
const MinStateMemory = 16 << 20

// DefaultStateMemory returns Config.StateMemory's default: a quarter of
// the memory the process may use (the machine's, or less when its cgroup
// says so), at least 256 MiB; 1 GiB where that cannot be read. A quarter
// is what CockroachDB recommends for Pebble's cache; Flink gives its
// RocksDB state 40% of a task manager's memory, which also holds the JVM.
func DefaultStateMemory() int64 {
	avail, ok := sysmem.Linux().Available()
	if !ok {
		return 1 << 30
	}
	return max(avail/4, 256<<20)
}

// DefaultBrokerTimeout is Config.BrokerTimeout's default: as long as a
// Kafka client waits for a broker starting after it.
const DefaultBrokerTimeout = kafka.StartupWait

// ErrBrokersUnreachable is wrapped by Run's error when no broker was
// reached within Config.BrokerTimeout.
var ErrBrokersUnreachable = kafka.ErrUnreachable

// DefaultRepartitionPurgeInterval is Config.RepartitionPurgeInterval's
// default, Kafka Streams' repartition.purge.interval.ms.
const DefaultRepartitionPurgeInterval = 30 * time.Second

// DefaultMaxEventTimeAhead is Config.MaxEventTimeAhead's default.
const DefaultMaxEventTimeAhead = 24 * time.Hour

// DefaultTableCacheBytes is Config.TableCacheBytes' default: 10 MiB per
// instance, Kafka Streams' cache.max.bytes.buffering default.
const DefaultTableCacheBytes = 10 << 20

// NoTableCache, as Config.TableCacheBytes, turns the table cache off
// (any negative value does; 0 means the default).
const NoTableCache = -1

// minTableCacheShare is the least table cache a worker may have: less
// holds next to nothing (an update costs about 100 bytes) and is a
// mistake for NoTableCache.
const minTableCacheShare = 1 << 10

// DefaultCheckpointInterval is Config.CheckpointInterval's default.
const DefaultCheckpointInterval = time.Minute

var unsafeIDChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// InstanceIDFromDir derives a static membership id from a state directory:
// its base name and a hash of its absolute path.
func InstanceIDFromDir(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	sum := sha256.Sum256([]byte(abs))
	base := unsafeIDChars.ReplaceAllString(filepath.Base(abs), "_")
	return base + "-" + hex.EncodeToString(sum[:4])
}

// validate returns every problem of c (after applyDefaults), joined, each
// naming the field and a valid value: New reports them all at once,
// before anything contacts a broker.
func (c *Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !runtime.ValidName(c.AppID) {
		bad("AppID %q: set a non-empty id of letters, digits, '.', '_' and '-' (it prefixes topic names), e.g. \"ledger\"", c.AppID)
	}
	if len(c.Brokers) == 0 {
		bad("Brokers: set at least one host:port, e.g. 127.0.0.1:9092")
	}
	if c.StateDir == "" {
		bad("StateDir: set the directory that holds the task databases")
	}
	if !runtime.ValidName(c.InstanceID) {
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
	if c.StateMemory < MinStateMemory {
		bad("StateMemory %d: must be at least %d (16 MiB), or 0 for the default (a quarter of the memory available, here %d)", c.StateMemory, MinStateMemory, DefaultStateMemory())
	}
	if c.MaxRecordBytes < 0 || c.MaxRecordBytes > runtime.MaxMaxRecordBytes {
		bad("MaxRecordBytes %d: must be from 1 to %d, or 0 for the default %d (under Kafka's default max.message.bytes)", c.MaxRecordBytes, runtime.MaxMaxRecordBytes, DefaultMaxRecordBytes)
	}
	if c.SessionTimeout <= 0 {
		bad("SessionTimeout %v: must be positive, e.g. 10s", c.SessionTimeout)
	}
	if c.BrokerTimeout <= 0 {
		bad("BrokerTimeout %v: must be positive, e.g. 2m (0 is the default, %v)", c.BrokerTimeout, DefaultBrokerTimeout)
	}
	if c.TransactionTimeout <= 0 {
		bad("TransactionTimeout %v: must be positive, e.g. 10s", c.TransactionTimeout)
	}
	if c.Guarantee != ExactlyOnce && c.Guarantee != AtLeastOnce {
		bad("Guarantee %d: use eddy.ExactlyOnce or eddy.AtLeastOnce", c.Guarantee)
	}
	if c.Partitioner != Murmur2 && c.Partitioner != CRC32 {
		bad("Partitioner %d: use eddy.Murmur2 (Kafka's default) or eddy.CRC32 (librdkafka's default)", c.Partitioner)
	}
	if c.OnMisplacedRecord != WarnMisplaced && c.OnMisplacedRecord != FailMisplaced {
		bad("OnMisplacedRecord %d: use eddy.WarnMisplaced or eddy.FailMisplaced", c.OnMisplacedRecord)
	}
	if c.CheckpointURL != "" && c.CheckpointStore != nil {
		bad("CheckpointURL and CheckpointStore are both set; set one")
	}
	if c.TableCacheBytes > 0 && c.Workers >= 1 && c.TableCacheBytes/int64(c.Workers) < minTableCacheShare {
		bad("TableCacheBytes %d: each of the %d workers would hold less than 1 KiB; give at least %d, or 0 for the default (%d), or eddy.NoTableCache (negative) to turn the cache off", c.TableCacheBytes, c.Workers, minTableCacheShare*int64(c.Workers), DefaultTableCacheBytes)
	}
	if c.CheckpointKeep < 1 {
		bad("CheckpointKeep %d: keep at least 1 checkpoint per task, e.g. 3 (0 is the default, 3)", c.CheckpointKeep)
	}
	if err := runtime.CheckEndpoint(c.Endpoint); err != nil {
		bad("Endpoint: %v", err)
	}
	if err := c.checkPolicies(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("eddy: invalid config: %w", errors.Join(errs...))
	}
	return nil
}
