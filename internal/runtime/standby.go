package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/state"
)

// standbyInterval is how often the standby tasks catch up with their
// changelogs. A standby is behind its active task by about this much plus
// one catch-up round, and that is about what a failover to it replays.
const standbyInterval = 200 * time.Millisecond

// standbys keeps this process's standby tasks (docs/design.md §4): warm copies
// of tasks that run on other instances. A standby has its own database in
// the task's directory, the one the task uses when it runs here, and
// follows the committed part of the task's changelog partitions, applying
// each batch with the changelog offsets, input offsets and stream time it
// reaches, as a restore does. One goroutine per process catches every
// standby up each standbyInterval, outside the workers' transaction loops,
// with its own client that never produces.
//
// A standby and an active copy of one task never coexist in a process:
// they would share the directory. A worker that opens a task acquires it
// first, which stops its standby and hands its open database over (the
// restore that follows replays only what the standby had not applied; not
// reopening the database spares the replay of its write-ahead log); a
// task's standby is opened only while no worker of the process has the
// task. While a worker restores tasks, the standbys pause, so that a
// takeover does not share the machine with their catching up.
type standbys struct {
	cfg  Config
	plan *plan
	log  *slog.Logger
	wake chan struct{}

	// paused counts the workers restoring tasks; holdUntil (UnixNano)
	// holds the rounds back from an assignment that brings tasks here
	// until their restore begins (pause), or for standbyHold at most.
	paused    atomic.Int32
	holdUntil atomic.Int64

	mu sync.Mutex
	// roundCancel cancels the catch-up round under way.
	roundCancel context.CancelFunc
	// wanted are the standby tasks of each worker's last assignment, and
	// incoming its active tasks: a standby of one of those is kept until
	// the worker acquires the task and takes its database over.
	wanted   map[string][]TaskID
	incoming map[string][]TaskID
	// active counts, per task, the workers of this process that have it
	// open (one, except for a moment while a task moves between them).
	active map[TaskID]int
	tasks  map[TaskID]*standbyTask
	// handed are the stopped standbys whose open database acquire set
	// aside for the worker's handOver.
	handed map[TaskID]*standbyTask
	// wantedSince is when each standby not open yet became wanted; it
	// opens startDelay (standbyStartDelay; tests set 0) later.
	wantedSince map[TaskID]time.Time
	startDelay  time.Duration
	// unreadable are the tasks whose local database is of a format this
	// eddy does not read (a newer eddy's): no standby of them is opened
	// again until the process restarts, rather than failing every round.
	unreadable map[TaskID]bool
	// lastErr is the last catch-up error logged, so that a broker that
	// stays down is logged once, not every round.
	lastErr string
}

func newStandbys(cfg Config, p *plan) *standbys {
	return &standbys{
		cfg: cfg, plan: p, log: cfg.Logger.With("standby", true),
		wake:     make(chan struct{}, 1),
		wanted:   make(map[string][]TaskID),
		incoming: make(map[string][]TaskID),
		active:   make(map[TaskID]int),
		tasks:    make(map[TaskID]*standbyTask),
		handed:   make(map[TaskID]*standbyTask),

		wantedSince: make(map[TaskID]time.Time),
		unreadable:  make(map[TaskID]bool),
		startDelay:  standbyStartDelay,
	}
}

// standbyTask is one standby copy.
type standbyTask struct {
	id     TaskID
	sub    *subPlan
	dir    string
	log    *slog.Logger
	opened time.Time

	// mu serialises the database between the catch-up goroutine, which
	// applies batches, and stop or close, which acquire and reconcile
	// call. closed is set once the standby no longer applies anything
	// (its database closed, or handed over to a worker).
	mu     sync.Mutex
	db     state.DB
	closed atomic.Bool
	// applied are the offsets db reflects; it changes under mu only.
	applied state.Offsets
	// The catch-up goroutine's own: batch is the next batch to apply, its
	// Offsets what it reaches; ends are the round's last stable offsets
	// per store; records counts what was applied since open; failed
	// marks a database that did not take a batch.
	batch    state.Batch
	ends     map[string]int64
	records  int64
	failed   bool
	caughtUp bool
	// behind is the lag at the start of the round.
	behind int64
	// lag is the changelog offsets (summed over the stores) that the
	// standby was behind the last stable offsets at its last catch-up;
	// -1 before the first.
	lag atomic.Int64
}

// run catches the standbys up until ctx is done, then closes them.
func (s *standbys) run(ctx context.Context) {
	defer s.closeAll()
	cl, err := kgo.NewClient(append(append(kafka.RetryOptions(), kgo.SeedBrokers(s.cfg.Brokers...)), s.cfg.ClientOpts...)...)
	if err != nil {
		// Only bad client options fail here, and the workers, which use
		// the same, stop the app for them.
		s.log.Error("standby tasks disabled: no client", "err", err)
		return
	}
	defer cl.Close()
	tick := time.NewTicker(standbyInterval)
	defer tick.Stop()
	for {
		if !s.held() {
			s.reconcile()
			round, cancel := context.WithCancel(ctx)
			s.mu.Lock()
			s.roundCancel = cancel
			s.mu.Unlock()
			if s.paused.Load() > 0 {
				cancel() // paused between the check and now
			}
			err := s.catchUp(round, cl)
			s.mu.Lock()
			s.roundCancel = nil
			s.mu.Unlock()
			paused := round.Err() != nil
			cancel()
			if ctx.Err() != nil {
				return
			}
			if !paused {
				s.noteErr(err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-s.wake:
		}
	}
}

// noteErr logs a catch-up failure when it differs from the last one, and
// the recovery from one. Standbys retry every round: a broker that is away
// costs them nothing but their lag.
func (s *standbys) noteErr(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if msg == s.lastErr {
		return
	}
	if err != nil {
		s.log.Warn("standby tasks: catching up failed; retrying every round", "err", err)
	} else {
		s.log.Info("standby tasks: catching up again")
	}
	s.lastErr = msg
}

func (s *standbys) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// assign implements standbyHost: member's assignment brought its standby
// and active tasks. When it brings tasks that do not run here yet, the
// catch-up rounds (and the reconcile that opens new standbys) wait for
// their restore, which pause and resume then bracket: the restore, and the
// hand-over of a standby's database to it, come first.
func (s *standbys) assign(member string, standby, active []TaskID) {
	s.mu.Lock()
	s.wanted[member] = slices.Clone(standby)
	s.incoming[member] = slices.Clone(active)
	takeover := false
	for _, id := range active {
		takeover = takeover || s.active[id] == 0
	}
	s.mu.Unlock()
	if takeover {
		s.holdUntil.Store(time.Now().Add(standbyHold).UnixNano())
		return
	}
	s.poke()
}

// standbyStartDelay is how long a standby is wanted before it opens. A
// rebalance that starts standbys usually moves tasks too, and a new
// standby costs a database open (a write-ahead log replay) and maybe a
// whole changelog to read: it waits until the moved tasks have committed
// their first transactions (a few hundred milliseconds), so that the two
// do not compete for the machine.
const standbyStartDelay = 2 * time.Second

// standbyHold bounds how long an assignment holds the standbys back for a
// restore that may never begin (the session ended first).
const standbyHold = 5 * time.Second

// pause stops the catch-up rounds, and the one under way, until resume:
// a worker restores tasks, and a task that waits for its restore waits
// for everything that runs beside it on the machine.
func (s *standbys) pause() {
	if s == nil {
		return
	}
	s.paused.Add(1)
	s.mu.Lock()
	if s.roundCancel != nil {
		s.roundCancel()
	}
	s.mu.Unlock()
}

func (s *standbys) resume() {
	if s == nil {
		return
	}
	s.holdUntil.Store(0)
	s.paused.Add(-1)
	s.poke()
}

// held reports whether the catch-up rounds wait.
func (s *standbys) held() bool {
	return s.paused.Load() > 0 || time.Now().UnixNano() < s.holdUntil.Load()
}

// lags implements standbyHost: the standbys that have been caught up at
// least once, with their lags, in task order.
func (s *standbys) lags() []standbyLag {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []standbyLag
	for id, st := range s.tasks {
		if lag := st.lag.Load(); lag >= 0 {
			out = append(out, standbyLag{Task: id, Lag: lag})
		}
	}
	slices.SortFunc(out, func(a, b standbyLag) int { return compareTaskIDs(a.Task, b.Task) })
	return out
}

// acquire marks id open in a worker of this process and stops its
// standby, if there is one, setting its open database aside for handOver:
// from here on only the worker may open the task's database.
func (s *standbys) acquire(id TaskID) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.active[id]++
	st := s.tasks[id]
	delete(s.tasks, id)
	s.mu.Unlock()
	if st == nil {
		return
	}
	st.mu.Lock()
	stopped := !st.closed.Swap(true)
	st.mu.Unlock()
	if !stopped {
		return // closed after a failure: nothing to hand over
	}
	// Stopped, the catch-up goroutine no longer touches applied.
	st.log.Info("standby task becomes active", "changelog_offsets", fmt.Sprint(st.applied.Changelog))
	s.mu.Lock()
	s.handed[id] = st
	s.mu.Unlock()
}

// handOver returns the database of the standby that acquire stopped, open
// and with the offsets it reflects, if there is one.
func (s *standbys) handOver(id TaskID) (state.DB, state.Offsets, bool) {
	if s == nil {
		return nil, state.Offsets{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.handed[id]
	if st == nil {
		return nil, state.Offsets{}, false
	}
	delete(s.handed, id)
	return st.db, st.applied, true
}

// release undoes acquire once the worker closed the task (or failed to
// open it): its standby, if this process keeps one, reopens at the next
// round.
func (s *standbys) release(id TaskID) {
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.active[id]--; s.active[id] <= 0 {
		delete(s.active, id)
	}
	st := s.handed[id]
	delete(s.handed, id)
	s.mu.Unlock()
	if st != nil {
		// Acquired, never taken over: close it here.
		if err := st.db.Close(); err != nil {
			st.log.Warn("close standby state", "err", err)
		}
	}
	s.poke()
}

// reconcile opens the standbys that the assignments want and no worker
// here runs, and closes the others. Their directories stay: a standby
// dropped now and assigned again later (or the task itself) resumes from
// what its database holds.
func (s *standbys) reconcile() {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := make(map[TaskID]bool)
	for _, ids := range s.wanted {
		for _, id := range ids {
			if s.active[id] == 0 && id.Subtopology >= 0 && id.Subtopology < len(s.plan.subs) &&
				len(s.plan.subs[id.Subtopology].storeNames) > 0 {
				want[id] = true
			}
		}
	}
	incoming := make(map[TaskID]bool)
	for _, ids := range s.incoming {
		for _, id := range ids {
			incoming[id] = true
		}
	}
	for id, st := range s.tasks {
		if !want[id] && incoming[id] && !st.failed {
			continue // its worker is about to acquire it and take the database
		}
		if !want[id] || st.failed {
			delete(s.tasks, id)
			st.close()
			if st.failed {
				st.log.Warn("standby task closed after a failed write; reopening it")
			} else {
				st.log.Info("standby task dropped")
			}
		}
	}
	ids := make([]TaskID, 0, len(want))
	now := time.Now()
	for id := range s.wantedSince {
		if !want[id] || s.tasks[id] != nil {
			delete(s.wantedSince, id)
		}
	}
	for id := range want {
		if s.tasks[id] != nil || s.unreadable[id] {
			continue
		}
		since, ok := s.wantedSince[id]
		if !ok {
			s.wantedSince[id] = now
			since = now
		}
		if now.Sub(since) >= s.startDelay {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, compareTaskIDs)
	// Opening a database replays its write-ahead log, which takes a
	// while: it happens outside s.mu, so that a worker's acquire of
	// another task does not wait for it. The standby is listed first,
	// with its own lock held until it is open, so that an acquire of
	// this very task waits for the open and then takes the database over.
	opening := make([]*standbyTask, len(ids))
	for i, id := range ids {
		opening[i] = s.newStandbyTask(id)
		opening[i].mu.Lock()
		s.tasks[id] = opening[i]
	}
	s.mu.Unlock()
	for _, st := range opening {
		err := s.open(st)
		if err != nil {
			st.failed = true
			st.closed.Store(true)
		}
		st.mu.Unlock()
		if errors.Is(err, state.ErrFormat) {
			s.log.Warn("standby task: its database is of a format this eddy does not read; no standby of it until this process restarts", "task", st.id.String(), "err", err)
			s.mu.Lock()
			s.unreadable[st.id] = true
			s.mu.Unlock()
			continue
		}
		if err != nil {
			s.log.Warn("standby task: open failed; retrying next round", "task", st.id.String(), "err", err)
			continue
		}
		st.log.Info("standby task started", "changelog_offsets", fmt.Sprint(st.applied.Changelog))
	}
	s.mu.Lock()
	for _, st := range opening {
		if st.failed && s.tasks[st.id] == st {
			delete(s.tasks, st.id)
		}
	}
}

func (s *standbys) newStandbyTask(id TaskID) *standbyTask {
	st := &standbyTask{
		id: id, sub: &s.plan.subs[id.Subtopology],
		dir:    filepath.Join(s.cfg.StateDir, s.cfg.AppID, id.String()),
		log:    s.log.With("task", id.String()),
		opened: time.Now(),
	}
	st.lag.Store(-1)
	return st
}

// open opens a standby's database, rebuilding it when the backend reports
// it corrupt (the changelog is the truth).
func (s *standbys) open(st *standbyTask) error {
	if err := os.MkdirAll(st.dir, 0o700); err != nil {
		return err
	}
	db, err := s.cfg.Backend.Open(st.dir)
	if errors.Is(err, state.ErrCorrupt) {
		st.log.Warn("standby state is corrupt; rebuilding it from the changelog", "err", err)
		if err = s.cfg.Backend.Destroy(st.dir); err == nil {
			db, err = s.cfg.Backend.Open(st.dir)
		}
	}
	if err != nil {
		return fmt.Errorf("open state: %w", err)
	}
	offsets, err := db.Offsets()
	if err != nil {
		db.Close()
		return fmt.Errorf("read offsets: %w", err)
	}
	st.db, st.applied = db, offsets
	return nil
}

// close closes the database; a batch being applied finishes first.
func (st *standbyTask) close() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed.Swap(true) || st.db == nil {
		return
	}
	if err := st.db.Close(); err != nil {
		st.log.Warn("close standby state", "err", err)
	}
}

func (s *standbys) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, st := range s.tasks {
		st.close()
		delete(s.tasks, id)
	}
	for id, st := range s.handed {
		st.db.Close()
		delete(s.handed, id)
	}
}

// standbyTarget is where a changelog partition's records go.
type standbyTarget struct {
	st    *standbyTask
	store string
}

// catchUp brings every standby to its changelogs' last stable offsets:
// one read of all their changelog tails, each standby applying its
// records in batches (a batch of restoreBatch writes, and one at the end
// with the ends). A standby closed meanwhile is skipped.
func (s *standbys) catchUp(ctx context.Context, cl *kgo.Client) error {
	s.mu.Lock()
	list := make([]*standbyTask, 0, len(s.tasks))
	for _, st := range s.tasks {
		list = append(list, st)
	}
	s.mu.Unlock()
	if len(list) == 0 {
		return nil
	}
	var topics []string
	for _, st := range list {
		for _, topic := range st.sub.changelogs {
			if !slices.Contains(topics, topic) {
				topics = append(topics, topic)
			}
		}
	}
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("list changelog ends: %w", err)
	}
	spans := make(map[string]map[int32]kafka.Span)
	targets := make(map[topicPartition]standbyTarget)
	var pending []*standbyTask
	for _, st := range list {
		has, err := st.plan(ends, spans, targets, s.cfg.Backend)
		if err != nil {
			return err
		}
		if has {
			pending = append(pending, st)
		}
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(s.cfg.Brokers...)}, s.cfg.ClientOpts...)
	err = kafka.ReadCommitted(ctx, opts, spans, func(r *kgo.Record) error {
		tg, ok := targets[topicPartition{r.Topic, r.Partition}]
		if !ok || tg.st.failed || tg.st.closed.Load() {
			return nil
		}
		tg.st.records++
		if err := applyChangelogRecord(&tg.st.batch, tg.store, r); err != nil {
			return fmt.Errorf("standby task %s: %w", tg.st.id, err)
		}
		if len(tg.st.batch.Writes) >= restoreBatch {
			tg.st.flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The spans were read to their ends: what lies before is applied or
	// was never committed.
	for topic, parts := range spans {
		for p, span := range parts {
			tg := targets[topicPartition{topic, p}]
			tg.st.batch.Offsets.Changelog[tg.store] = span.End
		}
	}
	for _, st := range pending {
		// Logged once it first caught up, and again whenever it had
		// fallen more than a failover may replay behind.
		if st.flush() && (!st.caughtUp || st.behind > acceptableRecoveryLag) {
			st.caughtUp = true
			st.log.Info("standby task caught up", "records", st.records, "since_start", time.Since(st.opened).Round(time.Millisecond),
				"lag_before", st.behind, "changelog_offsets", fmt.Sprint(st.batch.Offsets.Changelog))
		}
	}
	for _, st := range list {
		if !st.failed && !st.closed.Load() && s.cfg.hooks != nil && s.cfg.hooks.standbyApplied != nil {
			s.cfg.hooks.standbyApplied(st.id, st.batch.Offsets.Clone(), st.lag.Load())
		}
	}
	return nil
}

// plan adds the standby's changelog tails to spans and targets and sets its
// lag; has tells whether there is anything to read. A database that claims
// more than a changelog holds is from another life of the topic: it is
// rebuilt from scratch, as an active task's would be.
func (st *standbyTask) plan(ends kadm.ListedOffsets, spans map[string]map[int32]kafka.Span, targets map[topicPartition]standbyTarget, backend state.Backend) (has bool, err error) {
	if st.failed || st.closed.Load() {
		return false, nil
	}
	st.ends = make(map[string]int64, len(st.sub.storeNames))
	for i, store := range st.sub.storeNames {
		topic := st.sub.changelogs[i]
		lo, ok := ends.Lookup(topic, st.id.Partition)
		if !ok {
			return false, fmt.Errorf("changelog %s has no partition %d", topic, st.id.Partition)
		}
		st.ends[store] = lo.Offset
		if st.applied.Changelog[store] > lo.Offset {
			st.log.Warn("standby state is ahead of its changelog; rebuilding it", "store", store,
				"state", st.applied.Changelog[store], "changelog_end", lo.Offset)
			st.rebuild(backend)
		}
	}
	if st.failed || st.closed.Load() {
		return false, nil
	}
	st.batch = state.Batch{Offsets: st.applied.Clone()}
	var lag int64
	for i, store := range st.sub.storeNames {
		from, end := st.applied.Changelog[store], st.ends[store]
		if from >= end {
			continue
		}
		topic := st.sub.changelogs[i]
		if spans[topic] == nil {
			spans[topic] = make(map[int32]kafka.Span)
		}
		spans[topic][st.id.Partition] = kafka.Span{From: from, End: end}
		targets[topicPartition{topic, st.id.Partition}] = standbyTarget{st: st, store: store}
		lag += end - from
	}
	st.lag.Store(lag)
	st.behind = lag
	return lag > 0, nil
}

// rebuild destroys the database and opens an empty one.
func (st *standbyTask) rebuild(backend state.Backend) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed.Load() {
		return
	}
	st.db.Close()
	var db state.DB
	err := backend.Destroy(st.dir)
	if err == nil {
		db, err = backend.Open(st.dir)
	}
	if err != nil {
		st.log.Warn("rebuild standby state", "err", err)
		st.failed = true
		st.closed.Store(true) // nothing is open
		return
	}
	st.db, st.applied = db, state.NewOffsets()
}

// flush applies the pending batch, with the offsets it reaches, and
// reports whether it did; a failure marks the standby for reopening.
func (st *standbyTask) flush() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed.Load() || st.failed {
		return false
	}
	if err := st.db.Apply(&st.batch); err != nil {
		st.log.Warn("apply standby batch", "err", err)
		st.failed = true
		return false
	}
	clear(st.batch.Writes)
	st.batch.Writes = st.batch.Writes[:0]
	st.applied = st.batch.Offsets.Clone()
	var lag int64
	for store, end := range st.ends {
		lag += max(end-st.applied.Changelog[store], 0)
	}
	st.lag.Store(lag)
	return true
}
