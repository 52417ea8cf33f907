package pgsink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/serde"
)

// OffsetsTable is the table the sink keeps its offsets in, created at
// start if missing: per (group, topic, partition) the next offset to
// write and the epoch of the instance that owns the partition.
const OffsetsTable = "eddy_sink_offsets"

const createOffsetsTable = `CREATE TABLE IF NOT EXISTS ` + OffsetsTable + ` (
	group_id text NOT NULL, topic text NOT NULL, partition int NOT NULL,
	next_offset bigint NOT NULL, epoch bigint NOT NULL,
	PRIMARY KEY (group_id, topic, partition))`

// BadRecordPolicy is what the sink does with a record it cannot write: one
// its Mapper refuses, that does not map to the table's columns, or that
// PostgreSQL refuses (a constraint, a value its column does not read).
type BadRecordPolicy int

const (
	// DeadLetter writes the record to the dead-letter topic, with eddy's
	// dead-letter headers (eddy.error, eddy.stage "sink", eddy.topic,
	// eddy.partition, eddy.offset), and goes on. The default.
	DeadLetter BadRecordPolicy = iota
	// Stop makes Run return an error naming the record; nothing of its
	// batch is written.
	Stop
)

// Config configures Run.
type Config struct {
	// Brokers are Kafka's bootstrap servers; Topic the topic to write.
	Brokers []string
	Topic   string
	// Group is the consumer group; instances of one group share the
	// topic's partitions. Default "eddy-sink-" + Table.Name.
	Group string
	// DSN is the database's connection string (a URL or key=value).
	DSN string
	// Table is where the records go.
	Table Table
	// Mapper turns a record into a row. Default JSONMapper of the one key
	// column (of no column when the table has several or none).
	Mapper Mapper
	// ValueFields, when known, are the fields of every value (those of
	// the Avro schema the values are written with: AvroFields). Run then
	// checks at start that each is a column written, naming those that
	// are not, rather than dead-letter every record for them.
	ValueFields []string
	// BatchSize (default 5000) and BatchWait (default 200ms) bound a
	// batch: it is written, in one transaction, when it holds BatchSize
	// records or its first record waited BatchWait.
	BatchSize int
	BatchWait time.Duration
	// OnBadRecord is DeadLetter (the default) or Stop.
	OnBadRecord BadRecordPolicy
	// DeadLetterTopic receives the bad records; default Topic + ".dlq".
	DeadLetterTopic string
	// DBTimeout bounds how long the database may fail (down, refusing the
	// credentials) before Run gives up; meanwhile it retries with backoff
	// and logs. Default 2 minutes.
	DBTimeout time.Duration
	// SessionTimeout is the consumer group's session timeout (default
	// 45s): how long a stopped or cut-off instance keeps its partitions.
	// Its open transaction is also ended by the server after this long
	// (idle_in_transaction_session_timeout).
	SessionTimeout time.Duration
	// Logger gets the sink's warnings; default slog.Default().
	Logger *slog.Logger
	// KafkaOpts are added to the Kafka client's options (TLS, SASL).
	KafkaOpts []kgo.Opt
}

func (c *Config) defaults() error {
	if len(c.Brokers) == 0 || c.Topic == "" || c.DSN == "" {
		return errors.New("eddy: pgsink: Brokers, Topic and DSN are required")
	}
	if c.Group == "" {
		c.Group = "eddy-sink-" + c.Table.Name
	}
	if c.Mapper == nil {
		key := ""
		if len(c.Table.Key) == 1 {
			key = c.Table.Key[0]
		}
		c.Mapper = JSONMapper(key)
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 5000
	}
	if c.BatchWait <= 0 {
		c.BatchWait = 200 * time.Millisecond
	}
	if c.DeadLetterTopic == "" {
		c.DeadLetterTopic = c.Topic + ".dlq"
	}
	if c.DBTimeout <= 0 {
		c.DBTimeout = 2 * time.Minute
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 45 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// sink is one running instance.
type sink struct {
	cfg Config
	log *slog.Logger
	w   *Writer
	cl  *kgo.Client
	// main writes batches; claims raises epochs from the group's
	// callbacks, which run on franz-go's goroutines.
	main   *db
	claims *db

	mu     sync.Mutex
	epochs map[int32]int64 // the partitions this instance owns, by epoch
	fatal  error           // a claim that failed: Run returns it

	cancel context.CancelFunc
}

// Run reads cfg.Topic (read_committed) as a member of cfg.Group and writes
// its records into cfg.Table exactly once, until ctx is cancelled (then it
// returns nil) or an error stops it.
//
// Exactly once: each batch is one database transaction that writes the
// rows and advances the partitions' next offsets in OffsetsTable; on
// assignment an instance raises the partition's epoch there and seeks to
// its next offset. A batch locks its partitions' offsets rows, writes only
// if their epochs are still its own (a zombie whose partitions moved is
// fenced: it writes nothing) and skips records below the next offset (a
// batch redone after a commit whose answer was lost). Offsets are also
// committed to Kafka after the database commit, for lag tools only: the
// sink never reads them.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &sink{cfg: cfg, log: cfg.Logger, epochs: map[int32]int64{}, cancel: cancel}
	setup := []string{
		// A frozen instance's open transaction holds its offsets rows'
		// locks: end it when the group would have moved its partitions.
		fmt.Sprintf("SET idle_in_transaction_session_timeout = %d", cfg.SessionTimeout.Milliseconds()),
	}
	// A claim, or a batch, waits for the offsets rows' locks that a
	// frozen previous owner holds until the server ends its transaction.
	wait := cfg.SessionTimeout + 10*time.Second
	s.main = &db{dsn: cfg.DSN, timeout: cfg.DBTimeout, timeoutName: "Config.DBTimeout, --db-timeout", log: s.log, setup: setup, attemptAtLeast: wait}
	s.claims = &db{dsn: cfg.DSN, timeout: cfg.DBTimeout, timeoutName: "Config.DBTimeout, --db-timeout", log: s.log, setup: setup, attemptAtLeast: wait}
	defer s.main.close()
	defer s.claims.close()

	err := s.main.do(ctx, "start", func(ctx context.Context, conn *pgx.Conn) error {
		if err := createIfMissing(ctx, conn, OffsetsTable, createOffsetsTable); err != nil {
			return err
		}
		w, err := NewWriter(ctx, conn, cfg.Table)
		if err != nil {
			return writerError(err)
		}
		if err := w.checkFields(cfg.ValueFields); err != nil {
			return permanent{err}
		}
		s.w = w
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return err
	}

	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(cfg.SessionTimeout),
		// How long the group waits for every member to rejoin a
		// rebalance, as the app's workers bound it: franz-go's 60 s
		// default held the whole group for a minute whenever a member
		// died in the middle of a rebalance (sinks SIGKILLed and
		// replaced while the broker restarts). A member still writing
		// its batch past it is dropped from the group, and the epochs
		// in the database fence what it writes after.
		kgo.RebalanceTimeout(max(cfg.SessionTimeout, 10*time.Second)),
		// No rebalance while a batch is gathered, so that one batch does
		// not straddle a reassignment (its records of a partition that
		// moved would be fenced and fetched again). Exactly once does not
		// rest on it: a batch being written when the group rebalances is
		// checked against the epochs in the database.
		kgo.BlockRebalanceOnPoll(),
		kgo.AdjustFetchOffsetsFn(s.claim),
		kgo.OnPartitionsRevoked(s.release),
		kgo.OnPartitionsLost(s.release),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	}
	cl, err := kgo.NewClient(append(opts, cfg.KafkaOpts...)...)
	if err != nil {
		return fmt.Errorf("eddy: pgsink: kafka client: %w", err)
	}
	s.cl = cl
	defer func() {
		// Close leaves the group, which waits for a held poll's rebalance.
		cl.AllowRebalance()
		cl.Close()
	}()
	if cfg.OnBadRecord == DeadLetter {
		// Kafka's clients do not create topics on produce: a dead letter
		// must not wait for a topic nobody creates.
		if err := kafka.CreateTopics(ctx, cl, kafka.TopicSpec{Name: cfg.DeadLetterTopic}); err != nil {
			return fmt.Errorf("eddy: pgsink: dead-letter topic: %w", err)
		}
	}
	return s.loop(ctx)
}

// createIfMissing creates table with create unless it exists: a user
// without CREATE on the schema (PostgreSQL 15's default for public) can
// run the sinks once the table was created for it.
func createIfMissing(ctx context.Context, conn *pgx.Conn, table, create string) error {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, create); err != nil && !createdMeanwhile(err) {
		return fmt.Errorf("eddy: pgsink: create %s: %w", table, err)
	}
	return nil
}

// createdMeanwhile reports whether CREATE TABLE IF NOT EXISTS failed
// because another instance created the table at the same moment (the
// catalog's unique index on type names, or the table itself): the table
// exists, which is what was wanted.
func createdMeanwhile(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P07")
}

// claim is the group's offset adjustment for newly assigned partitions:
// it raises each one's epoch in the database (fencing its previous owner)
// and starts fetching at the next offset stored there, whatever Kafka's
// committed offset says.
func (s *sink) claim(ctx context.Context, assigned map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	parts := make([]int32, 0, len(assigned[s.cfg.Topic]))
	for p := range assigned[s.cfg.Topic] {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	type claimed struct{ next, epoch int64 }
	got := map[int32]claimed{}
	err := s.claims.do(ctx, "claim partitions", func(ctx context.Context, conn *pgx.Conn) error {
		clear(got)
		rows, err := conn.Query(ctx, `INSERT INTO `+OffsetsTable+` AS o (group_id, topic, partition, next_offset, epoch)
			SELECT $1, $2, p, 0, 1 FROM unnest($3::int[]) AS p
			ON CONFLICT (group_id, topic, partition) DO UPDATE SET epoch = o.epoch + 1
			RETURNING partition, next_offset, epoch`, s.cfg.Group, s.cfg.Topic, parts)
		if err != nil {
			return err
		}
		for rows.Next() {
			var p int32
			var c claimed
			if err := rows.Scan(&p, &c.next, &c.epoch); err != nil {
				rows.Close()
				return err
			}
			got[p] = c
		}
		return rows.Err()
	})
	if err != nil {
		if ctx.Err() != nil {
			// A new rebalance (franz-go cancels the claim's context) or
			// a stop: the next session claims again.
			return nil, err
		}
		s.mu.Lock()
		s.fatal = fmt.Errorf("eddy: pgsink: claiming partitions %v: %w", parts, err)
		s.mu.Unlock()
		s.cancel()
		return nil, err
	}
	s.mu.Lock()
	for p, c := range got {
		s.epochs[p] = c.epoch
		assigned[s.cfg.Topic][p] = kgo.NewOffset().At(c.next)
	}
	s.mu.Unlock()
	s.log.Info("pgsink: partitions claimed", "topic", s.cfg.Topic, "partitions", parts)
	return assigned, nil
}

// release forgets revoked or lost partitions: their records are no longer
// written by this instance.
func (s *sink) release(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range lost[s.cfg.Topic] {
		delete(s.epochs, p)
	}
}

func (s *sink) loop(ctx context.Context) error {
	// One batch is written (by the goroutine below) while the next is
	// polled and mapped: the database and the mapping overlap. Correctness
	// does not rest on it: each write checks its epochs and offsets in the
	// database.
	jobs := make(chan job)
	results := make(chan error, 1)
	go func() {
		for j := range jobs {
			results <- s.flush(ctx, j)
		}
	}()
	inflight := false
	defer func() {
		close(jobs)
		if inflight {
			<-results
		}
	}()
	stopped := func(err error) error {
		if ctx.Err() != nil {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.fatal
		}
		return err
	}

	var pending []*kgo.Record
	snap := map[int32]int64{} // per partition of pending: the epoch when its first record came
	var started time.Time
	for {
		wait := s.cfg.BatchWait
		if len(pending) > 0 {
			wait -= time.Since(started)
		}
		pctx, cancel := context.WithTimeout(ctx, max(wait, time.Millisecond))
		fetches := s.cl.PollRecords(pctx, s.cfg.BatchSize-len(pending))
		cancel()
		if ctx.Err() != nil {
			return stopped(nil)
		}
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				s.log.Warn("pgsink: fetch", "topic", t, "partition", p, "err", err)
			}
		})
		recs := fetches.Records()
		if len(recs) > 0 {
			if len(pending) == 0 {
				started = time.Now()
			}
			s.mu.Lock()
			for _, r := range recs {
				if _, ok := snap[r.Partition]; !ok {
					e, owned := s.epochs[r.Partition]
					if !owned {
						e = -1
					}
					snap[r.Partition] = e
				}
			}
			s.mu.Unlock()
			pending = append(pending, recs...)
		}
		if inflight && len(pending) == 0 {
			select {
			case err := <-results:
				inflight = false
				if err != nil {
					return stopped(err)
				}
			default:
			}
		}
		if len(pending) > 0 && (len(pending) >= s.cfg.BatchSize || time.Since(started) >= s.cfg.BatchWait) {
			j := s.mapRecords(pending, snap)
			if inflight {
				inflight = false
				if err := <-results; err != nil {
					return stopped(err)
				}
			}
			jobs <- j
			inflight = true
			pending, snap = nil, map[int32]int64{}
		}
		if len(pending) == 0 {
			s.cl.AllowRebalance()
		}
	}
}

// job is a batch for the writing goroutine: its records, mapped, and the
// epochs of their partitions when they were polled.
type job struct {
	items []item
	snap  map[int32]int64
}

// item is a record and its row: the texts of its columns and whether it
// deletes, or why it cannot be written.
type item struct {
	r     *kgo.Record
	texts []*string
	del   bool
	err   error
}

// mapRecords maps a batch's records to rows (Go's part of the work). A
// record whose Mapper found a service unavailable (a schema registry
// past its client's retry bound: serde.ErrUnavailable) ends the mapping:
// the batch's later records get its error rather than each wait the same
// bound, and the sink stops on the first of them it writes (see write).
func (s *sink) mapRecords(recs []*kgo.Record, snap map[int32]int64) job {
	j := job{items: make([]item, len(recs)), snap: snap}
	var unavailable error
	for i, r := range recs {
		it := item{r: r, err: unavailable}
		if unavailable == nil {
			row, err := s.cfg.Mapper(r.Key, r.Value)
			if err == nil {
				it.texts, err = s.w.checkRow(row)
				it.del = row.Delete
			}
			if errors.Is(err, serde.ErrUnavailable) {
				unavailable = err
			}
			it.err = err
		}
		j.items[i] = it
	}
	return j
}

// badRecord is a record that cannot be written, and why.
type badRecord struct {
	r   *kgo.Record
	err error
}

// flush writes a batch in one transaction, redoing it while the database
// fails (see db.do), then commits the offsets to Kafka for lag tools.
func (s *sink) flush(ctx context.Context, j job) error {
	var next map[int32]int64
	err := s.main.do(ctx, "write batch", func(ctx context.Context, conn *pgx.Conn) error {
		var err error
		next, err = s.write(ctx, conn, j)
		return err
	})
	if err != nil {
		return err
	}
	if len(next) > 0 {
		offs := map[int32]kgo.EpochOffset{}
		for p, o := range next {
			offs[p] = kgo.EpochOffset{Epoch: -1, Offset: o}
		}
		s.cl.CommitOffsets(ctx, map[string]map[int32]kgo.EpochOffset{s.cfg.Topic: offs}, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, _ *kmsg.OffsetCommitResponse, err error) {
			if err != nil && ctx.Err() == nil {
				s.log.Debug("pgsink: commit to Kafka (for lag tools only)", "err", err)
			}
		})
	}
	return nil
}

// write is one attempt at a batch: it returns the next offsets it
// committed per partition.
func (s *sink) write(ctx context.Context, conn *pgx.Conn, j job) (map[int32]int64, error) {
	snap := j.snap
	parts := make([]int32, 0, len(snap))
	for p := range snap {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.Background())
	// A deferred constraint would fail the commit, past the search
	// that finds the record at fault: check every one at its row.
	if _, err := tx.Exec(ctx, "SET CONSTRAINTS ALL IMMEDIATE"); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, `SELECT partition, next_offset, epoch FROM `+OffsetsTable+`
		WHERE group_id = $1 AND topic = $2 AND partition = ANY($3) FOR UPDATE`, s.cfg.Group, s.cfg.Topic, parts)
	if err != nil {
		return nil, err
	}
	from := map[int32]int64{}
	dbEpoch := map[int32]int64{}
	for rows.Next() {
		var p int32
		var n, e int64
		if err := rows.Scan(&p, &n, &e); err != nil {
			rows.Close()
			return nil, err
		}
		from[p], dbEpoch[p] = n, e
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	owned := map[int32]bool{}
	for _, p := range parts {
		if e, ok := dbEpoch[p]; ok && e == snap[p] {
			owned[p] = true
			continue
		}
		s.log.Warn("pgsink: fenced: the partition is another instance's now; its records in this batch are not written",
			"topic", s.cfg.Topic, "partition", p, "my_epoch", snap[p], "db_epoch", dbEpoch[p])
		s.mu.Lock()
		if e, ok := s.epochs[p]; ok && e == snap[p] {
			delete(s.epochs, p)
		}
		s.mu.Unlock()
	}

	var good checkedRows
	var goodRecs []*kgo.Record
	var bad []badRecord
	next := map[int32]int64{}
	for _, it := range j.items {
		r := it.r
		if !owned[r.Partition] || r.Offset < from[r.Partition] {
			continue // fenced, or written by an earlier commit
		}
		next[r.Partition] = r.Offset + 1
		if errors.Is(it.err, serde.ErrUnavailable) {
			// Not the record's fault: stop, as eddy's apps do; the
			// record is written once the sink is restarted.
			return nil, permanent{fmt.Errorf("eddy: pgsink: record %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, it.err)}
		}
		if it.err != nil {
			bad = append(bad, badRecord{r, it.err})
			continue
		}
		good.add(it.texts, it.del)
		goodRecs = append(goodRecs, r)
	}
	if len(next) == 0 {
		return nil, nil
	}
	if len(goodRecs) > 0 {
		if _, err := tx.Exec(ctx, "SAVEPOINT eddy_batch"); err != nil {
			return nil, err
		}
		err := s.w.writeChecked(ctx, tx, good)
		if err != nil && !IsRowError(err) {
			return nil, err
		}
		if err != nil {
			// Some row is refused: find which, by halves.
			if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT eddy_batch"); err != nil {
				return nil, err
			}
			errs, err := s.w.writeEach(ctx, tx, good)
			if err != nil {
				return nil, err
			}
			for i, e := range errs {
				if e != nil {
					bad = append(bad, badRecord{goodRecs[i], e})
				}
			}
		}
	}
	if len(bad) > 0 {
		if err := s.deadLetter(ctx, bad); err != nil {
			return nil, err
		}
	}
	ps := make([]int32, 0, len(next))
	ns := make([]int64, 0, len(next))
	for p, n := range next {
		ps, ns = append(ps, p), append(ns, n)
	}
	if _, err := tx.Exec(ctx, `UPDATE `+OffsetsTable+` SET next_offset = u.n
		FROM unnest($3::int[], $4::bigint[]) AS u(p, n)
		WHERE group_id = $1 AND topic = $2 AND partition = u.p`, s.cfg.Group, s.cfg.Topic, ps, ns); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	return next, nil
}

// deadLetter writes the bad records of a batch to the dead-letter topic
// and waits for Kafka's acknowledgement, before the batch's database
// commit: a dead letter is never lost, but a batch redone after a failure
// between the two writes its dead letters again (at least once; their
// eddy.topic, eddy.partition and eddy.offset headers tell duplicates
// apart). Under Stop it returns the first record's error instead.
func (s *sink) deadLetter(ctx context.Context, bad []badRecord) error {
	if s.cfg.OnBadRecord == Stop {
		b := bad[0]
		return permanent{fmt.Errorf("eddy: pgsink: record %s/%d@%d cannot be written to %s: %w", b.r.Topic, b.r.Partition, b.r.Offset, s.w.name, b.err)}
	}
	out := make([]*kgo.Record, len(bad))
	for i, b := range bad {
		headers := append(slices.Clone(b.r.Headers),
			kgo.RecordHeader{Key: eddy.HeaderDLQError, Value: []byte(truncateError(b.err.Error()))},
			kgo.RecordHeader{Key: eddy.HeaderDLQStage, Value: []byte("sink")},
			kgo.RecordHeader{Key: eddy.HeaderDLQTopic, Value: []byte(b.r.Topic)},
			kgo.RecordHeader{Key: eddy.HeaderDLQPartition, Value: strconv.AppendInt(nil, int64(b.r.Partition), 10)},
			kgo.RecordHeader{Key: eddy.HeaderDLQOffset, Value: strconv.AppendInt(nil, b.r.Offset, 10)},
		)
		out[i] = &kgo.Record{Topic: s.cfg.DeadLetterTopic, Key: b.r.Key, Value: b.r.Value, Headers: headers}
		s.log.Warn("pgsink: record dead-lettered", "topic", b.r.Topic, "partition", b.r.Partition, "offset", b.r.Offset, "to", s.cfg.DeadLetterTopic, "err", b.err)
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.DBTimeout)
	defer cancel()
	if err := s.cl.ProduceSync(pctx, out...).FirstErr(); err != nil {
		return permanent{fmt.Errorf("eddy: pgsink: write dead letters to %s: %w", s.cfg.DeadLetterTopic, err)}
	}
	return nil
}

func truncateError(s string) string {
	const most = 1 << 10
	if len(s) > most {
		return s[:most-3] + "..."
	}
	return s
}
