package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/failpoint"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/state"
)

// worker owns one consumer-group member and one transactional producer and
// runs the commit cycle for its tasks (docs/design.md §3).
//
// Concurrency: the worker's loop runs on one goroutine. Rebalance callbacks
// run on franz-go's goroutines, but BlockRebalanceOnPoll keeps them from
// running between a poll and AllowRebalance, which is where the loop
// processes and commits; mu makes the hand-over explicit for the race
// detector and for shutdown.
type worker struct {
	cfg      Config
	plan     *plan
	log      *slog.Logger
	memberID string // static group instance id
	// globals are the instance's global stores, shared by its workers.
	globals *globals
	// standbys are the instance's standby tasks, shared by its workers.
	standbys *standbys
	// ckpt takes and restores remote checkpoints; nil when they are off.
	ckpt *checkpoints
	// queries is the instance's registry of queryable tasks (nil in
	// tests that run a worker alone).
	queries *queries
	// board is what the worker publishes of its tasks for Status.
	board *workerBoard
	// purge deletes consumed repartition records (nil: off).
	purge *repartitionPurge
	txnID string

	sess *kgo.GroupTransactSession
	cl   *kgo.Client

	mu    sync.Mutex
	tasks map[TaskID]*task
	fatal error
	// sessionGen counts sessions, so a restore that outlived its session
	// does not install its tasks in the next one.
	sessionGen int
	// runCtx is the context of run: cancelled at shutdown.
	runCtx context.Context
	// revokePending is set by onRevoked; the loop then ends the open
	// transaction (or, idle, the session's rebalance state), so that the
	// next revoke reaches onRevoked again.
	revokePending bool

	inTxn bool
	// committedOnce is set at the session's first committed transaction,
	// which is logged: it marks that a restarted instance is back.
	committedOnce bool
	started       time.Time
	txnStart      time.Time
	txnRecords    int
	// probeAt, when not zero, is when (UnixNano) this worker, as group
	// leader, forces a probing rebalance (see taskBalancer.probe).
	probeAt atomic.Int64
	// lastPunctuate is when the tasks were last punctuated.
	lastPunctuate time.Time
	// wallClock is the wall clock (ms) read at the start of the current
	// poll's processing or punctuation: what TaskContext.WallClock says.
	wallClock int64
	// polled are the tasks that the current poll routed records to, and
	// the tasks that hold records from earlier polls (docs/design.md
	// §5.2).
	polled []*task
	// guard checks the keys of co-partitioned sources (nil: off).
	guard *partitionGuard
	// keepControl is set when a task may align several sources: the
	// consumer then delivers control records too, so that a task knows
	// when it has fetched a partition up to its end (align.go).
	keepControl bool
	// paused are the source partitions whose fetch the worker paused
	// because their task holds alignBuffer of their records.
	paused []pausedPartition
	// reprobe is set when an abort rewound the consumer: the next step
	// tells aligning tasks their partitions' positions again.
	reprobe bool

	// tableCache is the budget of the tasks' table caches (nil: off).
	tableCache *TableCacheBudget

	// produced holds this transaction's records; once the transaction
	// ended they are reused, so outputs cost no allocation.
	produced recordArena
	promise  func(*kgo.Record, error)
	// block cancels an End that a blocked rebalance keeps from returning.
	block   groupBlock
	errMu   sync.Mutex
	prodErr error
}

// memberName is worker idx's static group instance id.
func memberName(cfg Config, idx int) string {
	if cfg.Workers > 1 {
		return fmt.Sprintf("%s-w%d", cfg.InstanceID, idx)
	}
	return cfg.InstanceID
}

func newWorker(cfg Config, p *plan, idx int) *worker {
	w := &worker{
		cfg:      cfg,
		plan:     p,
		memberID: memberName(cfg, idx),
		tasks:    make(map[TaskID]*task),
	}
	for _, sub := range p.subs {
		if len(sub.Sources) > 1 && w.aligns() {
			w.keepControl = true
		}
	}
	// A bounded run counts commit markers as delivered too: a source
	// written in transactions ends with one, past its last record.
	w.keepControl = w.keepControl || cfg.Bounded
	if cfg.TableCacheBytes > 0 {
		// Each worker's tasks share an even part of the instance's
		// budget: a worker is one goroutine, so its part needs no lock.
		w.tableCache = NewTableCacheBudget(cfg.TableCacheBytes / int64(max(cfg.Workers, 1)))
	}
	w.board = newWorkerBoard(idx, w.memberID)
	w.txnID = cfg.AppID + "-" + w.memberID
	w.log = cfg.Logger.With("worker", idx)
	w.promise = w.onProduced
	return w
}

// run runs sessions until ctx is cancelled or an error that a new session
// would repeat (a bad configuration, the topology failing on a record). A
// session ends on an error that leaves the producer or the group membership
// unusable (fencing, a failed End, an unreachable broker); the worker then
// closes its tasks and starts a new one, which fences its own predecessor
// and restores the tasks from their stores.
func (w *worker) run(ctx context.Context) error {
	w.runCtx = ctx
	failures := 0
	for {
		err := w.session(ctx)
		if ctx.Err() != nil {
			var perm permanentError
			if errors.As(err, &perm) {
				return perm.err
			}
			if err != nil {
				// Stopping: a session that failed meanwhile (a fenced
				// zombie's End timing out, a broker going away) left
				// nothing half done: what committed is durable, what
				// did not is processed again by the next owner. The
				// stop is clean; the failure is logged.
				w.log.Warn("session failed while the worker was stopping", "err", err)
			}
			return nil
		}
		if w.committedOnce {
			failures = 0 // the session did useful work: count anew
		}
		var perm permanentError
		if errors.As(err, &perm) {
			return perm.err
		}
		if denied(err) {
			// Missing ACLs do not appear by retrying: say which.
			return fmt.Errorf("eddy: the brokers refused this app an operation; grant the app's principal the ACLs README.md lists (`eddy acls`): %w", err)
		}
		if errors.Is(err, state.ErrFormat) || errors.Is(err, errOffsetsFormat) {
			// State or a changelog written by a newer eddy: every new
			// session would meet it again. The error says what to do.
			return err
		}
		// Anything else (a broker restarting or unreachable, fencing, a
		// failed End) is retried with a new session for as long as it
		// takes, as a Kafka client retries; the backoff grows to 5s.
		failures++
		w.log.Warn("session failed; starting a new one", "err", err, "attempt", failures)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(min(time.Duration(failures)*500*time.Millisecond, 5*time.Second)):
		}
	}
}

// denied reports whether err is an authorization failure.
func denied(err error) bool {
	return errors.Is(err, kerr.GroupAuthorizationFailed) || errors.Is(err, kerr.TopicAuthorizationFailed) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed)
}

// permanentError marks a session error that a new session would repeat
// (a bad configuration), so the worker stops instead of retrying.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

func permanent(err error) error { return permanentError{err} }

func (w *worker) session(ctx context.Context) (err error) {
	heartbeat := min(3*time.Second, w.cfg.SessionTimeout/3)
	// A live heartbeat loop writes End's forced heartbeat within a round
	// trip; a second, at most a heartbeat interval, is far more than that
	// and still a small part of the stall it ends (groupblock.go).
	gen := w.block.reset(min(time.Second, heartbeat))
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(w.cfg.Brokers...),
		kgo.ConsumerGroup(w.cfg.AppID),
		kgo.InstanceID(w.memberID),
		kgo.SessionTimeout(w.cfg.SessionTimeout),
		kgo.HeartbeatInterval(heartbeat),
		// How long the group waits for every member to rejoin a
		// rebalance. A member only commits or aborts its transaction
		// before rejoining, which takes well under this; franz-go's 60s
		// default made Close wait up to a minute when several workers of
		// one process left at once (a JoinGroup in flight is not
		// cancelled, and it waits for members that are leaving).
		kgo.RebalanceTimeout(max(w.cfg.SessionTimeout, 10*time.Second)),
		// Kafka's fetch.max.wait.ms default; franz-go's 5s made a fetch
		// that missed a newly assigned partition hold it back for 5s.
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsCallbackBlocked(func(context.Context, *kgo.Client) { w.block.onBlocked(gen) }),
		kgo.WithHooks(heartbeatHook{&w.block, gen}),
		kgo.Balancers(w.balancers()...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(w.onAssigned),
		kgo.OnPartitionsRevoked(w.onRevoked),
		kgo.OnPartitionsLost(w.onLost),
		kgo.AdjustFetchOffsetsFn(w.adjustOffsets),
		kgo.RecordPartitioner(newPartitioner(w.cfg.Partitioner, w.plan.changelogs)),
		// Kafka Streams' producers do not compress by default either;
		// franz-go's default (snappy) cost a tenth of the ledger's CPU.
		// ClientOpts come after, so a user can turn it back on.
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		// Room for one record of MaxRecordBytes and the batch's own
		// framing; Kafka's max.message.bytes must allow as much.
		kgo.ProducerBatchMaxBytes(int32(cmp.Or(w.cfg.MaxRecordBytes, DefaultMaxRecordBytes) + batchOverhead)),
	}, kafka.RetryOptions()...)
	opts = append(opts, w.cfg.ClientOpts...)
	if w.keepControl {
		opts = append(opts, kgo.KeepControlRecords())
	}
	w.paused = w.paused[:0] // the new client fetches every partition
	w.reprobe = false       // the tasks are opened, and probed, anew
	if w.cfg.AtLeastOnce {
		cl, err := kgo.NewClient(append(opts, kgo.DisableAutoCommit())...)
		if err != nil {
			return permanent(fmt.Errorf("eddy: new client: %w", err))
		}
		w.sess, w.cl = nil, cl
	} else {
		opts = append(opts,
			kgo.TransactionalID(w.txnID),
			kgo.TransactionTimeout(w.cfg.TransactionTimeout),
			kgo.RequireStableFetchOffsets())
		sess, err := kgo.NewGroupTransactSession(opts...)
		if err != nil {
			return permanent(fmt.Errorf("eddy: new session: %w", err))
		}
		w.sess, w.cl = sess, sess.Client()
	}
	w.started, w.committedOnce = time.Now(), false
	w.mu.Lock()
	w.fatal, w.revokePending = nil, false // they belonged to the last session
	w.mu.Unlock()
	defer w.closeSession()

	// Fence a predecessor with our transactional id (a crashed run of this
	// instance) before joining: its open transaction is aborted now, so our
	// stable offset fetch does not wait for the transaction timeout.
	if w.sess != nil {
		if _, _, err := w.cl.ProducerID(ctx); err != nil {
			if ctx.Err() != nil {
				return nil // stopped while starting: nothing ran
			}
			return fmt.Errorf("eddy: init producer id %s: %w", w.txnID, err)
		}
	}
	w.cl.AddConsumeTopics(w.plan.sources...)
	w.log.Info("worker joined", "member", w.memberID, "transactional_id", w.txnID)

	for {
		pollCtx, cancel := context.WithTimeout(ctx, w.pollWait())
		fetches := w.cl.PollRecords(pollCtx, w.cfg.CommitRecords-w.txnRecords)
		w.block.polled()
		cancel()
		err := w.step(fetches)
		if err == nil && ctx.Err() != nil {
			// Still inside the poll's rebalance block: no revoke callback
			// can run while the final commit holds the lock.
			err = w.shutdown()
			w.allowRebalance()
			return err
		}
		w.allowRebalance()
		if err != nil {
			return err
		}
		w.maybeProbe()
	}
}

// probingInterval is how long after an unsettled plan the leader asks for
// the next rebalance: about the time a warmup standby needs to catch up
// with a task's changelog. Kafka Streams waits 10 minutes by default; a
// rebalance here costs every member a join round trip, nothing more.
const probingInterval = 5 * time.Second

// scheduleProbe is the task balancer's probe: a rebalance in
// probingInterval.
func (w *worker) scheduleProbe() {
	w.probeAt.Store(time.Now().Add(probingInterval).UnixNano())
}

// maybeProbe forces the rebalance scheduleProbe asked for, once due. The
// leader's rejoin makes the coordinator rebalance the group, and every
// member's metadata then carries its current standby lags.
func (w *worker) maybeProbe() {
	at := w.probeAt.Load()
	if at == 0 || time.Now().UnixNano() < at || !w.probeAt.CompareAndSwap(at, 0) {
		return
	}
	w.log.Info("probing rebalance: tasks wait for their standbys to warm up before they move, or the plan is uneven")
	w.cl.ForceRebalance()
}

// pollWait is how long a poll may block: until the open transaction or the
// next punctuation is due, or a while when neither is.
func (w *worker) pollWait() time.Duration {
	// Not longer than the commit interval even without tasks: a task
	// assigned during the poll is punctuated within an interval.
	wait := min(time.Second, w.cfg.CommitInterval)
	if w.inTxn {
		wait = min(wait, time.Until(w.txnStart.Add(w.cfg.CommitInterval)))
	}
	w.mu.Lock()
	open := len(w.tasks) > 0
	w.mu.Unlock()
	if open {
		wait = min(wait, time.Until(w.lastPunctuate.Add(w.cfg.CommitInterval)))
	}
	return max(wait, time.Millisecond)
}

// step processes one poll's records and commits when the transaction is due.
// It runs while rebalances are blocked.
func (w *worker) step(fetches kgo.Fetches) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fatal != nil {
		return w.fatal
	}
	if err := fetchError(fetches); err != nil {
		return err
	}
	if w.revokePending {
		w.revokePending = false
		// At least once there is no session to reset, and no rewind: the
		// poll's records are processed as they are.
		if w.sess != nil {
			if w.inTxn {
				w.abort() // End would abort it anyway: the group rebalanced
			} else {
				// End with no transaction only resets the session's record
				// of the revoke, which would hide the next one from us.
				ctx, cancel := w.endContext()
				_, err := w.sess.End(ctx, kgo.TryAbort)
				cancel()
				if err != nil {
					return fmt.Errorf("eddy: reset after revoke: %w", err)
				}
			}
			// End rewound the consumer to the committed offsets: this
			// poll's records come again, and those tasks held.
			w.dropAllHeld()
			w.reprobe = w.keepControl
			return nil
		}
	}
	w.keepHeld()
	if w.reprobe {
		w.reprobeInputs()
	}
	defer w.clearPolled()
	now := time.Now()
	w.wallClock = now.UnixMilli()
	err := w.route(fetches)
	punctuationDue := !now.Before(w.lastPunctuate.Add(w.cfg.CommitInterval))
	// The transaction begins here, before anything may produce into it:
	// the records of this poll, or the punctuators.
	if err == nil && (len(w.polled) > 0 || punctuationDue) {
		err = w.begin()
	}
	if err == nil {
		err = w.processPolled()
	}
	if err == nil && w.keepControl {
		w.flowControl()
	}
	if err == nil && w.cfg.Bounded {
		err = w.endTasks()
	}
	if err == nil && punctuationDue {
		err = w.punctuate(now)
	}
	if err != nil {
		// The records of this poll after the failed one were consumed
		// but not processed: abort so the consumer rewinds to them.
		w.abort()
		w.suspendTableCache(err)
		return err
	}
	if w.inTxn && w.txnEmpty() {
		// Every record was already in the state and no punctuator wrote:
		// end the transaction the step began, which the broker never saw.
		w.endEmpty()
	}
	if w.inTxn && (w.txnRecords >= w.cfg.CommitRecords || !time.Now().Before(w.txnStart.Add(w.cfg.CommitInterval))) {
		if err := w.commit(); err != nil {
			return err
		}
		w.purge.offer(w.memberID, w.tasks) // off the cycle: its own goroutine deletes
	}
	if !w.inTxn && w.ckpt != nil {
		// Between transactions: each database holds exactly its task's
		// committed state.
		now := time.Now()
		for _, t := range w.tasks {
			if w.ckpt.due(t, now) {
				w.ckpt.take(t, false)
			}
		}
	}
	return nil
}

// fetchError returns the first error of a poll that is not merely its
// context ending.
func fetchError(fetches kgo.Fetches) error {
	var err error
	fetches.EachError(func(topic string, p int32, e error) {
		if errors.Is(e, context.DeadlineExceeded) || errors.Is(e, context.Canceled) {
			return
		}
		err = errors.Join(err, fmt.Errorf("eddy: fetch %s/%d: %w", topic, p, e))
	})
	if errors.Is(err, kgo.ErrClientClosed) {
		return fmt.Errorf("eddy: client closed: %w", err)
	}
	return err
}

func (w *worker) processRecord(t *task, r *kgo.Record) error {
	if !t.Consume(t.sourceIndex(r.Topic), r.Offset+1) {
		// Already in the state (the group's offset fell behind the
		// offsets our changelog carried, docs/design.md §6) or already
		// processed in this transaction (the consumer was rewound).
		return nil
	}
	if t.end != nil {
		if t.end.ended {
			return nil // nothing reaches an ended task but a marker read twice
		}
		if t.takeEndMarker(t.sourceIndex(r.Topic), r) {
			t.dirty = true
			return nil
		}
	}
	if err := w.guard.check(t.sub, r); err != nil {
		return err
	}
	t.dirty = true
	w.txnRecords++
	if err := t.process(r); err != nil {
		if errors.Is(err, state.ErrCorrupt) {
			return t.corrupted(err)
		}
		if errors.Is(err, ErrHeldUpdate) || errors.Is(err, ErrTaskFenced) {
			// An earlier record's update, held in a table cache, failed
			// on its way out: step suspends the cache and the records
			// are processed again, so that the policy meets that record.
			// Or a sink outside Kafka says another instance owns the
			// task: a new session rejoins.
			return fmt.Errorf("eddy: task %s: process %s/%d@%d: %w", t.id, r.Topic, r.Partition, r.Offset, err)
		}
		// The topology's own error (a processor, a serde, the fail
		// policy for bad records): processing the record again would fail
		// again, so the app stops, as Kafka Streams' default handler does.
		return permanent(fmt.Errorf("eddy: task %s: process %s/%d@%d: %w", t.id, r.Topic, r.Partition, r.Offset, err))
	}
	return nil
}

// endContext bounds one commit or abort. It does not derive from the run
// context: cancelling End half-way leaves franz-go's producer unusable, and
// a shutdown wants its final commit.
func (w *worker) endContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), w.cfg.TransactionTimeout+30*time.Second)
}

// commit runs steps 2–5 of the commit cycle for every task of the worker.
func (w *worker) commit() error {
	if !w.inTxn {
		return nil
	}
	start := time.Now()
	tasks := w.sortedTasks()
	// Step 1: what the tasks held back (their table caches) is forwarded
	// into this transaction, before the changelog takes the state it
	// writes. A failure aborts, as a processing error does.
	if err := w.flush(tasks); err != nil {
		w.abort()
		w.suspendTableCache(err)
		return err
	}
	// The transactional sinks prepare, once every record of the
	// transaction reached them; their tokens go in the changelog.
	if err := w.prepareSinks(tasks); err != nil {
		w.abort()
		w.suspendTableCache(err)
		return err
	}
	ctx, cancel := w.endContext()
	defer cancel()
	var err error
	w.cfg.Failpoints.Hit(failpoint.CommitBeforeChangelog)
	for _, t := range tasks {
		if t.dirty {
			if err = t.logChangelog(); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = w.cl.Flush(ctx)
	}
	if err == nil {
		err = w.produceErr()
	}
	try := kgo.TryCommit
	if err != nil {
		try = kgo.TryAbort
	} else {
		w.cfg.Failpoints.Hit(failpoint.CommitBeforeEnd)
	}
	committed, endErr := w.end(ctx, try)
	w.inTxn, w.txnRecords = false, 0
	if committed {
		if w.tableCache != nil {
			w.tableCache.Resume()
		}
		if !w.committedOnce {
			w.committedOnce = true
			w.log.Info("first transaction committed", "since_start", time.Since(w.started).Round(time.Millisecond))
		}
		w.cfg.Failpoints.Hit(failpoint.CommitAfterEnd)
		applied := 0
		for _, t := range tasks {
			if !t.dirty {
				continue
			}
			if applied++; applied == 2 {
				w.cfg.Failpoints.Hit(failpoint.CommitMidApply)
			}
			if aerr := t.applyCommitted(); aerr != nil {
				err = errors.Join(err, aerr)
			}
			if c, ok := t.proc.(TaskCommitter); ok {
				if cerr := c.Committed(); cerr != nil {
					err = errors.Join(err, fmt.Errorf("eddy: task %s: %w", t.id, cerr))
				}
			}
			if !t.assignedAt.IsZero() {
				t.log.Info("task's first transaction committed", "since_assigned", time.Since(t.assignedAt).Round(time.Millisecond))
				t.assignedAt = time.Time{}
			}
		}
		w.cfg.Failpoints.Hit(failpoint.CommitAfterApply)
	} else {
		if endErr != nil && try == kgo.TryCommit {
			// The commit may have happened: what the sinks prepared is
			// left for the tasks' next open to resolve.
			for _, t := range tasks {
				if c, ok := t.proc.(TaskCommitter); ok {
					c.Uncertain()
				}
			}
		}
		w.rollbackAll()
	}
	w.recycle()
	w.cfg.Metrics.ObserveCommit(time.Since(start), committed)
	if endErr != nil {
		// err, if any, is why the transaction was being aborted (a flush
		// that timed out, a produce error): the log needs both.
		return fmt.Errorf("eddy: end transaction: %w", errors.Join(endErr, err))
	}
	if err != nil && !committed {
		if errors.Is(err, kerr.MessageTooLarge) {
			// The broker allows less than MaxRecordBytes: every retry
			// would fail the same way.
			return permanent(fmt.Errorf("eddy: the brokers refused a record as too large; lower MaxRecordBytes (%d) to the topic's max.message.bytes or raise that: %w", cmp.Or(w.cfg.MaxRecordBytes, DefaultMaxRecordBytes), err))
		}
		return fmt.Errorf("eddy: transaction aborted: %w", err)
	}
	if err != nil {
		// The transaction committed but a task's database, or a
		// transactional sink's second phase, did not take it: a new
		// session restores that task from the changelog, and its sink
		// commits from the token there.
		return fmt.Errorf("eddy: transaction committed, local state or a sink not updated: %w", err)
	}
	if !committed {
		w.log.Info("transaction aborted (the group rebalanced or the session was fenced); reprocessing from the committed offsets")
	}
	return nil
}

// flush forwards what the tasks' processors hold back (TaskFlusher) into
// the open transaction. A task whose flush wrote state or produced is
// dirty, as after a punctuation.
func (w *worker) flush(tasks []*task) error {
	for _, t := range tasks {
		f, ok := t.proc.(TaskFlusher)
		if !ok {
			continue
		}
		produced := w.produced.len()
		if err := t.flush(f); err != nil {
			if errors.Is(err, state.ErrCorrupt) {
				return t.corrupted(err)
			}
			if errors.Is(err, ErrHeldUpdate) || errors.Is(err, ErrTaskFenced) {
				// Processed again, uncached; or a sink outside Kafka
				// found the task another instance's: a new session.
				return fmt.Errorf("eddy: task %s: flush: %w", t.id, err)
			}
			return permanent(fmt.Errorf("eddy: task %s: flush: %w", t.id, err))
		}
		t.flushMetrics(0, 0) // what the flush produced
		if w.produced.len() != produced || t.buf.Len() > 0 {
			t.dirty = true
		}
	}
	return nil
}

// prepareSinks runs the first phase of the tasks' transactional sinks
// (TaskCommitter). A task whose sink wrote a token is dirty: its
// changelog must carry it.
func (w *worker) prepareSinks(tasks []*task) error {
	for _, t := range tasks {
		c, ok := t.proc.(TaskCommitter)
		if !ok {
			continue
		}
		if err := c.Prepare(); err != nil {
			err = fmt.Errorf("eddy: task %s: %w", t.id, err)
			if errors.Is(err, ErrTaskFenced) || errors.Is(err, ErrHeldUpdate) {
				// A zombie: a new session rejoins. A held update
				// refused: processed again, uncached.
				return err
			}
			return permanent(err)
		}
		if t.buf.Len() > 0 {
			t.dirty = true
		}
	}
	return nil
}

// suspendTableCache turns the table caches off until the next commit when
// err is a held update's failure (ErrHeldUpdate): the new session
// processes the aborted transaction's records again with every update
// forwarded at once, so the failure comes from the record that causes it
// and the error policies apply to that record.
func (w *worker) suspendTableCache(err error) {
	if w.tableCache != nil && errors.Is(err, ErrHeldUpdate) {
		w.tableCache.Suspend()
		w.log.Warn("an operator failed on a table update held in the table cache; processing the transaction's records again with the cache off, so that the error policy meets the record that fails", "err", err)
	}
}

// begin begins a transaction (exactly-once) or a commit period (at least
// once) unless one is open. step calls it before it processes records or
// punctuates, so producing never begins one. Begin only changes the
// producer's state; the broker hears of the transaction with its first
// record or offset.
func (w *worker) begin() error {
	if w.inTxn {
		return nil
	}
	if w.sess != nil {
		if err := w.sess.Begin(); err != nil {
			return fmt.Errorf("eddy: begin transaction: %w", err)
		}
	}
	w.inTxn, w.txnStart, w.txnRecords = true, time.Now(), 0
	return nil
}

// txnEmpty reports whether the open transaction holds nothing: no record
// processed, nothing produced, no task's state or stream time changed.
func (w *worker) txnEmpty() bool {
	if w.txnRecords > 0 || w.produced.len() > 0 {
		return false
	}
	for _, t := range w.tasks {
		if t.dirty {
			return false
		}
	}
	return true
}

// endEmpty ends an empty transaction. Nothing was produced, so franz-go
// ends it without a request to the broker, and it is neither a commit nor
// an abort: the consumer is not rewound and nothing is counted.
func (w *worker) endEmpty() {
	if w.sess != nil {
		ctx, cancel := w.endContext()
		if err := w.cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
			w.log.Warn("end empty transaction", "err", err)
		}
		cancel()
	}
	w.inTxn, w.txnRecords = false, 0
}

// punctuate calls every task's Punctuate in the open transaction. A task whose Punctuate wrote state,
// produced or moved its stream time is dirty: it must be committed (its
// changelog and offsets record written) like a task that processed
// records. Nothing else tells a write apart, so the buffer (writes and
// range deletes), the worker's produced records and the stream time are
// compared before and after, and the transactional sinks asked.
func (w *worker) punctuate(now time.Time) error {
	w.lastPunctuate, w.wallClock = now, now.UnixMilli()
	for _, t := range w.sortedTasks() {
		if t.end != nil && t.end.ended {
			continue // its operators acted at the end of time already
		}
		produced, streamTime := w.produced.len(), t.streamTime
		if err := t.punctuate(now); err != nil {
			if errors.Is(err, state.ErrCorrupt) {
				return t.corrupted(err)
			}
			if errors.Is(err, ErrHeldUpdate) || errors.Is(err, ErrTaskFenced) {
				// The flush before the punctuators failed on an update
				// held in a table cache: processed again, uncached. Or
				// a sink is fenced: a new session rejoins.
				return fmt.Errorf("eddy: task %s: punctuate: %w", t.id, err)
			}
			// Like a processing error: user code failing would fail
			// again, so the app stops and the transaction aborts.
			return permanent(fmt.Errorf("eddy: task %s: punctuate: %w", t.id, err))
		}
		t.flushMetrics(0, 0) // what punctuators produced
		if t.dirty || w.produced.len() == produced && t.buf.Len() == 0 && t.streamTime == streamTime && !t.hasRanges() && !t.sinksPending() {
			continue
		}
		t.dirty = true
	}
	return nil
}

// sinksPending reports whether the task's transactional sinks hold writes
// not yet prepared (TaskCommitter).
func (t *task) sinksPending() bool {
	c, ok := t.proc.(TaskCommitter)
	return ok && c.Pending()
}

// end ends the transaction. At least once, "commit" is a synchronous commit
// of the consumed offsets after the outputs were flushed: a crash in
// between replays records whose outputs were already written.
func (w *worker) end(ctx context.Context, try kgo.TransactionEndTry) (bool, error) {
	ctx = w.commitHeldFrom(ctx)
	if w.sess != nil {
		if try == kgo.TryAbort {
			return w.sess.End(ctx, try)
		}
		if len(w.cl.UncommittedOffsets()) == 0 {
			return w.endWithoutOffsets(ctx)
		}
		// Only a commit with offsets forces a heartbeat, which a group
		// that waits for this worker can hold (groupblock.go).
		ctx, stop := w.block.watch(ctx)
		committed, err := w.sess.End(ctx, try)
		stop()
		return committed, endErr(ctx, err)
	}
	if try == kgo.TryAbort {
		return false, nil
	}
	if err := w.cl.CommitUncommittedOffsets(ctx); err != nil {
		return false, err
	}
	return true, nil
}

// endWithoutOffsets commits a transaction that consumed nothing: only
// punctuators wrote. The session's End would do the same (flush, EndTxn:
// with no offsets it sends no TxnOffsetCommit and no heartbeat), but, not
// having seen a TxnOffsetCommit response, it assumes a broker older than
// KIP-447 and holds its lock for 500ms after the commit, which blocked the
// worker that long for every such transaction. What End checks besides,
// that the group did not revoke or lose partitions during the
// transaction, the worker knows itself: the callbacks set revokePending,
// which step handles (aborting) before it processes or commits, and they
// cannot run while step runs (BlockRebalanceOnPoll). Like End's, this
// commit carries no group generation: a member dropped from the group that
// has not heard of it yet is not fenced for it, where a transaction with
// offsets would be.
func (w *worker) endWithoutOffsets(ctx context.Context) (bool, error) {
	if w.revokePending {
		return w.sess.End(ctx, kgo.TryAbort)
	}
	if err := w.cl.Flush(ctx); err != nil {
		return false, err
	}
	if err := w.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return false, err
	}
	return true, nil
}

// abort ends the open transaction with an abort and drops the tasks' work.
func (w *worker) abort() {
	if !w.inTxn {
		return
	}
	ctx, cancel := w.endContext()
	defer cancel()
	if _, err := w.end(ctx, kgo.TryAbort); err != nil {
		w.log.Warn("abort transaction", "err", err)
	}
	w.inTxn, w.txnRecords = false, 0
	w.rollbackAll()
	w.recycle()
	w.cfg.Metrics.ObserveAbort()
}

func (w *worker) rollbackAll() {
	for _, t := range w.tasks {
		t.rollback()
	}
	w.reprobe = w.keepControl && w.sess != nil // the session rewound the consumer
}

// sortedTasks returns the tasks in id order, so changelog records are
// produced (and punctuators run) in a deterministic order.
func (w *worker) sortedTasks() []*task {
	ts := make([]*task, 0, len(w.tasks))
	for _, t := range w.tasks {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b *task) int { return compareTaskIDs(a.id, b.id) })
	return ts
}

// shutdown commits the open transaction and closes the tasks, so a clean
// stop leaves nothing to replay.
func (w *worker) shutdown() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	// Both steps are best effort: a final transaction that does not
	// commit (a fenced zombie's, say) is aborted and its records are
	// processed again by the next owner, and changelog ends that are not
	// recorded only cost a short replay. Neither makes the stop unclean.
	if err := w.commit(); err != nil {
		w.log.Warn("final commit failed; the records since the last commit will be processed again", "err", err)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := w.recordChangelogEnds(ctx); err != nil {
			w.log.Warn("could not record the changelog ends; the next start replays the last transaction", "err", err)
		}
		// The final checkpoints: a task that restarts elsewhere finds
		// the state as of this stop. Run waits for their uploads.
		if w.ckpt != nil {
			for _, t := range w.sortedTasks() {
				w.ckpt.take(t, true)
			}
		}
	}
	w.closeTasks()
	w.log.Info("worker stopped")
	return nil
}

// recordChangelogEnds moves each task's changelog offsets past the commit
// markers of its last transaction. The worker owns these partitions and has
// committed, so the end offsets are exactly what the database reflects, and
// a restart finds nothing to replay.
func (w *worker) recordChangelogEnds(ctx context.Context) error {
	if len(w.plan.changelogs) == 0 || len(w.tasks) == 0 {
		return nil
	}
	ends, err := kadm.NewClient(w.cl).ListCommittedOffsets(ctx, w.plan.changelogs...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("eddy: changelog end offsets at shutdown: %w", err)
	}
	for _, t := range w.sortedTasks() {
		if err := t.recordChangelogEnds(ends); err != nil {
			return err
		}
	}
	return nil
}

func (w *worker) closeTasks() {
	for id, t := range w.tasks {
		if err := w.closeTask(t); err != nil {
			w.log.Warn("close task", "task", t.id.String(), "err", err)
		}
		delete(w.tasks, id)
	}
}

func (w *worker) closeSession() {
	w.mu.Lock()
	w.sessionGen++ // a restore still running installs nothing
	w.closeTasks()
	w.board.reset()
	w.inTxn = false
	w.mu.Unlock()
	// A step that panicked (Pebble panics on a failed write-ahead log
	// write) never reached its AllowRebalance, and Close's LeaveGroup
	// would wait for that rebalance forever: the process hung instead of
	// crashing (found by eddy chaos, disk EIO). A no-op otherwise.
	w.allowRebalance()
	w.cl.Close()
	w.recycle()
}

// allowRebalance ends the poll's hold on rebalances: the group's callbacks
// may run until the next poll.
func (w *worker) allowRebalance() {
	w.block.allowed()
	w.cl.AllowRebalance()
}
