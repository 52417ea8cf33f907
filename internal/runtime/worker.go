package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
)

// worker owns one consumer-group member and one transactional producer and
// runs the commit cycle for its tasks (DESIGN.md §3).
//
// Concurrency: the worker's loop runs on one goroutine. Rebalance callbacks
// run on franz-go's goroutines, but BlockRebalanceOnPoll keeps them from
// running between a poll and AllowRebalance, which is where the loop
// processes and commits; mu makes the hand-over explicit for the race
// detector and for shutdown.
type worker struct {
	cfg  Config
	topo Topology
	// sub is the sub-topology the worker runs; storeNames its stores.
	sub        *Subtopology
	storeNames []string
	log        *slog.Logger
	memberID   string // static group instance id
	txnID      string
	changelogs []string
	storeIndex map[string]int

	sess *kgo.GroupTransactSession
	cl   *kgo.Client

	mu    sync.Mutex
	tasks map[int32]*task
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

	// produced are this transaction's records; once the transaction ended
	// they go to free and are reused, so outputs cost no allocation.
	produced []*kgo.Record
	free     []*kgo.Record
	promise  func(*kgo.Record, error)
	errMu    sync.Mutex
	prodErr  error
}

func newWorker(cfg Config, topo Topology, idx int) *worker {
	w := &worker{
		cfg:        cfg,
		topo:       topo,
		memberID:   cfg.InstanceID,
		sub:        &topo.Subtopologies[0],
		storeIndex: make(map[string]int),
	}
	if cfg.Workers > 1 {
		w.memberID = fmt.Sprintf("%s-w%d", cfg.InstanceID, idx)
	}
	w.txnID = cfg.AppID + "-" + w.memberID
	w.log = cfg.Logger.With("worker", idx)
	for i, s := range w.sub.Stores {
		w.storeNames = append(w.storeNames, s.Name)
		w.changelogs = append(w.changelogs, ChangelogTopic(cfg.AppID, s.Name))
		w.storeIndex[s.Name] = i
	}
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
			return err
		}
		if w.committedOnce {
			failures = 0 // the session did useful work: count anew
		}
		var perm permanentError
		if errors.As(err, &perm) {
			return perm.err
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

// permanentError marks a session error that a new session would repeat
// (a bad configuration), so the worker stops instead of retrying.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

func permanent(err error) error { return permanentError{err} }

func (w *worker) session(ctx context.Context) (err error) {
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(w.cfg.Brokers...),
		kgo.ConsumerGroup(w.cfg.AppID),
		kgo.InstanceID(w.memberID),
		kgo.SessionTimeout(w.cfg.SessionTimeout),
		kgo.HeartbeatInterval(min(3*time.Second, w.cfg.SessionTimeout/3)),
		// Kafka's fetch.max.wait.ms default; franz-go's 5s made a fetch
		// that missed a newly assigned partition hold it back for 5s.
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.BlockRebalanceOnPoll(),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(w.onAssigned),
		kgo.OnPartitionsRevoked(w.onRevoked),
		kgo.OnPartitionsLost(w.onRevoked),
		kgo.AdjustFetchOffsetsFn(w.adjustOffsets),
		kgo.RecordPartitioner(newPartitioner(w.changelogs)),
		// Kafka Streams' producers do not compress by default either;
		// franz-go's default (snappy) cost a tenth of the ledger's CPU.
		// ClientOpts come after, so a user can turn it back on.
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	}, w.cfg.ClientOpts...)
	if w.cfg.AtLeastOnce {
		cl, err := kgo.NewClient(append(opts, kgo.DisableAutoCommit())...)
		if err != nil {
			return permanent(fmt.Errorf("runtime: new client: %w", err))
		}
		w.sess, w.cl = nil, cl
	} else {
		opts = append(opts,
			kgo.TransactionalID(w.txnID),
			kgo.TransactionTimeout(w.cfg.TransactionTimeout),
			kgo.RequireStableFetchOffsets())
		sess, err := kgo.NewGroupTransactSession(opts...)
		if err != nil {
			return permanent(fmt.Errorf("runtime: new session: %w", err))
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
			return fmt.Errorf("runtime: init producer id %s: %w", w.txnID, err)
		}
	}
	w.cl.AddConsumeTopics(w.sub.Sources...)
	w.log.Info("worker joined", "member", w.memberID, "transactional_id", w.txnID)

	for {
		pollCtx, cancel := context.WithTimeout(ctx, w.pollWait())
		fetches := w.cl.PollRecords(pollCtx, w.cfg.CommitRecords-w.txnRecords)
		cancel()
		err := w.step(fetches)
		if err == nil && ctx.Err() != nil {
			// Still inside the poll's rebalance block: no revoke callback
			// can run while the final commit holds the lock.
			err = w.shutdown()
			w.cl.AllowRebalance()
			return err
		}
		w.cl.AllowRebalance()
		if err != nil {
			return err
		}
	}
}

// pollWait is how long a poll may block: until the open transaction is due,
// or a while when there is none.
func (w *worker) pollWait() time.Duration {
	if !w.inTxn {
		return time.Second
	}
	return max(time.Until(w.txnStart.Add(w.cfg.CommitInterval)), time.Millisecond)
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
					return fmt.Errorf("runtime: reset after revoke: %w", err)
				}
			}
			// End rewound the consumer to the committed offsets: this
			// poll's records come again.
			return nil
		}
	}
	for it := fetches.RecordIter(); !it.Done(); {
		if err := w.processRecord(it.Next()); err != nil {
			// The records of this poll after the failed one were consumed
			// but not processed: abort so the consumer rewinds to them.
			w.abort()
			return err
		}
	}
	if w.inTxn && (w.txnRecords >= w.cfg.CommitRecords || !time.Now().Before(w.txnStart.Add(w.cfg.CommitInterval))) {
		return w.commit()
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
		err = errors.Join(err, fmt.Errorf("runtime: fetch %s/%d: %w", topic, p, e))
	})
	if errors.Is(err, kgo.ErrClientClosed) {
		return fmt.Errorf("runtime: client closed: %w", err)
	}
	return err
}

func (w *worker) processRecord(r *kgo.Record) error {
	t := w.tasks[r.Partition]
	if t == nil {
		// Rebalances are blocked between poll and processing, so every
		// polled partition has its task; consuming the record without one
		// would commit its offset unprocessed.
		return fmt.Errorf("runtime: no task for %s/%d", r.Topic, r.Partition)
	}
	src := t.sourceIndex(r.Topic)
	if src < 0 {
		return fmt.Errorf("runtime: task %s does not read %s", t.id, r.Topic)
	}
	if r.Offset < t.next[src] {
		// Already in the state (the group's offset fell behind the
		// offsets our changelog carried, DESIGN.md §6) or already
		// processed in this transaction (the consumer was rewound).
		return nil
	}
	if !w.inTxn {
		if err := w.begin(); err != nil {
			return fmt.Errorf("runtime: begin transaction: %w", err)
		}
		w.inTxn, w.txnStart, w.txnRecords = true, time.Now(), 0
	}
	t.dirty = true
	t.next[src] = r.Offset + 1
	w.txnRecords++
	if err := t.process(r); err != nil {
		// The topology's own error (a processor, a serde, the fail
		// policy for bad records): processing the record again would fail
		// again, so the app stops, as Kafka Streams' default handler does.
		return permanent(fmt.Errorf("runtime: task %s: process %s/%d@%d: %w", t.id, r.Topic, r.Partition, r.Offset, err))
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
	ctx, cancel := w.endContext()
	defer cancel()
	tasks := w.sortedTasks()
	var err error
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
	}
	committed, endErr := w.end(ctx, try)
	w.inTxn, w.txnRecords = false, 0
	if committed {
		if !w.committedOnce {
			w.committedOnce = true
			w.log.Info("first transaction committed", "since_start", time.Since(w.started).Round(time.Millisecond))
		}
		for _, t := range tasks {
			if !t.dirty {
				continue
			}
			if aerr := t.applyCommitted(); aerr != nil {
				err = errors.Join(err, aerr)
			}
		}
	} else {
		w.rollbackAll()
	}
	w.recycle()
	if endErr != nil {
		return fmt.Errorf("runtime: end transaction: %w", endErr)
	}
	if err != nil && !committed {
		return fmt.Errorf("runtime: transaction aborted: %w", err)
	}
	if err != nil {
		// The transaction committed but a task's database did not take
		// it: a new session restores that task from the changelog.
		return fmt.Errorf("runtime: transaction committed, local state not updated: %w", err)
	}
	if !committed {
		w.log.Info("transaction aborted (the group rebalanced or the session was fenced); reprocessing from the committed offsets")
	}
	return nil
}

// begin starts a transaction (exactly-once) or a commit period.
func (w *worker) begin() error {
	if w.sess == nil {
		return nil
	}
	return w.sess.Begin()
}

// end ends the transaction. At least once, "commit" is a synchronous commit
// of the consumed offsets after the outputs were flushed: a crash in
// between replays records whose outputs were already written.
func (w *worker) end(ctx context.Context, try kgo.TransactionEndTry) (bool, error) {
	if w.sess != nil {
		return w.sess.End(ctx, try)
	}
	if try == kgo.TryAbort {
		return false, nil
	}
	if err := w.cl.CommitUncommittedOffsets(ctx); err != nil {
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
}

func (w *worker) rollbackAll() {
	for _, t := range w.tasks {
		t.rollback()
	}
}

// sortedTasks returns the tasks in partition order, so changelog records are
// produced in a deterministic order.
func (w *worker) sortedTasks() []*task {
	ts := make([]*task, 0, len(w.tasks))
	for _, t := range w.tasks {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].id.Partition < ts[j].id.Partition })
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
	if len(w.changelogs) == 0 || len(w.tasks) == 0 {
		return nil
	}
	ends, err := kadm.NewClient(w.cl).ListCommittedOffsets(ctx, w.changelogs...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("runtime: changelog end offsets at shutdown: %w", err)
	}
	for _, t := range w.sortedTasks() {
		if err := t.recordChangelogEnds(ends); err != nil {
			return err
		}
	}
	return nil
}

func (w *worker) closeTasks() {
	for p, t := range w.tasks {
		if err := t.close(); err != nil {
			w.log.Warn("close task", "task", t.id.String(), "err", err)
		}
		delete(w.tasks, p)
	}
}

func (w *worker) closeSession() {
	w.mu.Lock()
	w.sessionGen++ // a restore still running installs nothing
	w.closeTasks()
	w.inTxn = false
	w.mu.Unlock()
	w.cl.Close()
	w.recycle()
}

// onAssigned runs for partitions newly assigned to this member. A task we
// still hold for one of them is stale: franz-go's transact session does not
// call our revoke callback for a second revoke before the next End, so its
// partition went to another member and came back while we kept the old
// state. It is closed here and reopened from the changelog in adjustOffsets.
func (w *worker) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, parts := range assigned {
		for _, p := range parts {
			if t := w.tasks[p]; t != nil {
				t.log.Info("closing a stale task: its partition was revoked and assigned again")
				if err := t.close(); err != nil {
					w.log.Warn("close task", "task", t.id.String(), "err", err)
				}
				delete(w.tasks, p)
			}
		}
	}
}

// onRevoked closes revoked or lost tasks. The open transaction will abort,
// so their uncommitted work is dropped with it; revokePending makes the
// loop end it at once.
func (w *worker) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if len(revoked) == 0 {
		// A cooperative rebalance ends with an empty revoke on every
		// member; the session does not abort for it, nor do we.
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.revokePending = true
	for _, parts := range revoked {
		for _, p := range parts {
			if t := w.tasks[p]; t != nil {
				if err := t.close(); err != nil {
					w.log.Warn("close task", "task", t.id.String(), "err", err)
				}
				delete(w.tasks, p)
				t.log.Info("task revoked")
			}
		}
	}
}

// adjustOffsets opens and restores the newly assigned tasks, then starts
// each from the later of the group's committed offset and the offset its
// state reflects (DESIGN.md §6). franz-go calls it after the group's stable
// offset fetch, which waits for the previous owner's pending transaction:
// restoring here rather than in onAssigned means the changelog already holds
// every transaction whose offsets the fetch returned.
func (w *worker) adjustOffsets(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	var parts []int32
	for _, ps := range offsets {
		for p := range ps {
			if !slices.Contains(parts, p) {
				parts = append(parts, p)
			}
		}
	}
	slices.Sort(parts)
	w.mu.Lock()
	gen, fatal := w.sessionGen, w.fatal
	var need []int32
	for _, p := range parts {
		if w.tasks[p] == nil {
			need = append(need, p)
		}
	}
	w.mu.Unlock()
	if fatal != nil {
		return offsets, nil
	}

	// Restore without the lock: the loop keeps processing the tasks it
	// has, and a revoke, which waits for the loop's poll to end, can
	// cancel ctx. The run context stops a restore at shutdown too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(w.runCtx, cancel)()
	var opened []*task
	closeOpened := func() {
		for _, t := range opened {
			if err := t.close(); err != nil {
				w.log.Warn("close task", "task", t.id.String(), "err", err)
			}
		}
	}
	for _, p := range need {
		t, err := w.openTask(ctx, TaskID{Partition: p})
		if err != nil {
			closeOpened()
			if ctx.Err() != nil {
				// A revoke or shutdown: franz-go fetches these partitions
				// again with the next assignment.
				return offsets, fmt.Errorf("runtime: restore interrupted: %w", err)
			}
			w.mu.Lock()
			w.fatal = err
			w.mu.Unlock()
			return offsets, nil
		}
		opened = append(opened, t)
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sessionGen != gen {
		closeOpened() // the session ended while we restored
		return offsets, errors.New("runtime: session ended during restore")
	}
	if w.tasks == nil {
		w.tasks = make(map[int32]*task)
	}
	for _, t := range opened {
		w.tasks[t.id.Partition] = t
		t.log.Info("task assigned", "input_offsets", fmt.Sprint(t.committed.Input))
	}
	for topic, ps := range offsets {
		for p, off := range ps {
			t := w.tasks[p]
			if t == nil {
				continue
			}
			src := t.sourceIndex(topic)
			if src < 0 {
				continue
			}
			ours, theirs := t.skip[src], off.EpochOffset().Offset
			if ours > 0 && ours > theirs {
				t.log.Info("group offset behind the state's; resuming from the state's", "topic", topic, "group", theirs, "state", ours)
				ps[p] = kgo.NewOffset().At(ours)
			}
		}
	}
	return offsets, nil
}

// produceRecord copies key, value and headers into a recycled record and
// produces it in the open transaction; partition < 0 means the partitioner
// chooses from the key. A nil value stays nil (a tombstone).
func (w *worker) produceRecord(topic string, partition int32, key, value []byte, ts int64, headers []kgo.RecordHeader) (*kgo.Record, error) {
	if !w.inTxn {
		return nil, errors.New("runtime: produce outside a transaction")
	}
	var r *kgo.Record
	if n := len(w.free); n > 0 {
		r, w.free = w.free[n-1], w.free[:n-1]
	} else {
		r = new(kgo.Record)
	}
	r.Topic, r.Partition = topic, partition
	r.Key = copyBytes(r.Key, key)
	r.Value = copyBytes(r.Value, value)
	r.Headers = append(r.Headers[:0], headers...)
	if ts > 0 {
		r.Timestamp = time.UnixMilli(ts)
	} else {
		r.Timestamp = time.Time{}
	}
	w.produced = append(w.produced, r)
	// Not the run context: a shutdown must still be able to produce the
	// changelog of its final commit. The transaction bounds the record.
	w.cl.Produce(context.Background(), r, w.promise)
	return r, nil
}

// copyBytes copies src into dst's storage, keeping nil (a null key, a
// tombstone) apart from empty: append to an empty slice would return nil.
func copyBytes(dst, src []byte) []byte {
	switch {
	case src == nil:
		return nil
	case len(src) == 0:
		return []byte{}
	}
	return append(dst[:0], src...)
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

func (w *worker) produceErr() error {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.prodErr
}

// recycle returns the ended transaction's records to the free list. After
// End, franz-go holds none of them.
func (w *worker) recycle() {
	for _, r := range w.produced {
		key, value, headers := r.Key, r.Value, r.Headers
		*r = kgo.Record{Key: key[:0], Value: value[:0], Headers: headers[:0]}
		w.free = append(w.free, r)
	}
	clear(w.produced)
	w.produced = w.produced[:0]
	w.errMu.Lock()
	w.prodErr = nil
	w.errMu.Unlock()
}

// partitioner places changelog records on the partition the task set and
// keyed records where Kafka's default partitioner would, so a JVM producer
// and eddy agree on which partition holds a key.
type partitioner struct{ manual map[string]bool }

func newPartitioner(manualTopics []string) kgo.Partitioner {
	p := partitioner{manual: make(map[string]bool, len(manualTopics))}
	for _, t := range manualTopics {
		p.manual[t] = true
	}
	return p
}

func (p partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if p.manual[topic] {
		return manualPartitioner{}
	}
	return &keyPartitioner{}
}

type manualPartitioner struct{}

func (manualPartitioner) RequiresConsistency(*kgo.Record) bool { return true }
func (manualPartitioner) Partition(r *kgo.Record, _ int) int   { return int(r.Partition) }

type keyPartitioner struct{ next atomic.Uint32 }

func (*keyPartitioner) RequiresConsistency(r *kgo.Record) bool { return r.Key != nil }

func (p *keyPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Partition >= 0 {
		return int(r.Partition) % n
	}
	if r.Key == nil {
		return int(p.next.Add(1) % uint32(n))
	}
	return int(kafka.KeyPartition(r.Key, int32(n)))
}
