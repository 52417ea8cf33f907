package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/eddy-streams/eddy/checkpoint"
	"github.com/eddy-streams/eddy/internal/failpoint"
	"github.com/eddy-streams/eddy/state"
)

// checkpoints takes the remote checkpoints of the process's tasks and
// restores tasks from them (docs/design.md §4). One per process, shared by the
// workers, since a task can move between workers of one process and its
// uploads must not overlap.
//
// A checkpoint is taken on the worker's goroutine between transactions
// (the database's Checkpoint hard-links its tables: milliseconds), then
// verified and uploaded by a goroutine of its own from that directory,
// while the worker goes on. A task has at most one upload in flight; a
// checkpoint that falls due meanwhile waits for the next step after it.
type checkpoints struct {
	store    checkpoint.Store
	interval time.Duration
	keep     int
	backend  state.Backend
	appID    string
	// dir holds, per task, the checkpoints being uploaded and the
	// downloads being restored: StateDir/AppID/checkpoints/<task>/.
	dir string
	log *slog.Logger
	// fail crashes an upload at its failpoints (crash tests only).
	fail *failpoint.Set

	// ctx bounds uploads; cancelled by close once the shutdown's wait
	// for them ran out.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	tasks map[TaskID]*taskCheckpoints
	// prefetched are the look-ups started for tasks about to open.
	prefetched map[TaskID]*prefetch
	// unsupported is set once a backend's database without
	// state.Checkpointer was met, so the warning is logged once.
	unsupported bool
}

// taskCheckpoints is one task's checkpointing state, guarded by
// checkpoints.mu.
type taskCheckpoints struct {
	up *checkpoint.Uploader
	// done is closed when the upload in flight ends; nil when none is.
	done chan struct{}
	// last is when the last checkpoint was taken (or the task first
	// opened in this process); uploaded the offsets of the last one
	// uploaded, so a task whose state did not move is not checkpointed
	// again.
	last     time.Time
	uploaded state.Offsets
	n        int
}

// shutdownUploadWait bounds how long Run waits, once the workers stopped,
// for the uploads in flight (the final checkpoints) before cancelling them.
const shutdownUploadWait = 2 * time.Minute

func newCheckpoints(cfg Config) *checkpoints {
	ctx, cancel := context.WithCancel(context.Background())
	return &checkpoints{
		store:    cfg.Checkpoints,
		interval: cfg.CheckpointInterval,
		keep:     cfg.CheckpointKeep,
		backend:  cfg.Backend,
		appID:    cfg.AppID,
		dir:      filepath.Join(cfg.StateDir, cfg.AppID, "checkpoints"),
		log:      cfg.Logger,
		fail:     cfg.Failpoints,
		ctx:      ctx,
		cancel:   cancel,
		tasks:    make(map[TaskID]*taskCheckpoints),

		prefetched: make(map[TaskID]*prefetch),
	}
}

// close waits for the uploads in flight, up to shutdownUploadWait.
func (c *checkpoints) close() {
	done := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(shutdownUploadWait):
		c.log.Warn("checkpoint uploads still running at shutdown; cancelling them (the store keeps the previous checkpoints)", "waited", shutdownUploadWait)
		c.cancel()
		<-done
	}
	c.cancel()
}

// task returns id's state, creating it (and removing what a previous
// process left in its working directory) at the first call.
func (c *checkpoints) task(id TaskID) *taskCheckpoints {
	c.mu.Lock()
	defer c.mu.Unlock()
	tc := c.tasks[id]
	if tc == nil {
		tc = &taskCheckpoints{
			up:   checkpoint.NewUploader(c.store, checkpoint.TaskPrefix(c.appID, id.String()), id.String(), c.keep),
			last: time.Now(),
		}
		if c.fail != nil {
			tc.up.BeforeManifest = func() { c.fail.Hit(failpoint.CheckpointBeforeManifest) }
			tc.up.AfterManifest = func() { c.fail.Hit(failpoint.CheckpointAfterManifest) }
		}
		c.tasks[id] = tc
		// No upload of this task is in flight in this process yet: what
		// is there is a crashed process's leftovers.
		os.RemoveAll(filepath.Join(c.dir, id.String()))
	}
	return tc
}

// due reports whether t's periodic checkpoint is due.
func (c *checkpoints) due(t *task, now time.Time) bool {
	if c.interval <= 0 || len(t.sub.storeNames) == 0 {
		return false
	}
	tc := c.task(t.id)
	c.mu.Lock()
	defer c.mu.Unlock()
	return tc.done == nil && now.Sub(tc.last) >= c.interval
}

// take checkpoints t unless an upload of it is in flight or its state has
// not moved since the last upload; wait first waits for the one in flight
// (the final checkpoint at shutdown). It runs on t's worker goroutine,
// between transactions, so the database holds exactly t.committed.
func (c *checkpoints) take(t *task, wait bool) {
	if len(t.sub.storeNames) == 0 {
		return // a stateless task's database holds nothing to restore
	}
	cp, ok := t.db.(state.Checkpointer)
	if !ok {
		c.mu.Lock()
		if !c.unsupported {
			c.unsupported = true
			c.log.Warn("the state backend cannot checkpoint its databases; no remote checkpoints are taken", "backend", fmt.Sprintf("%T", c.backend))
		}
		c.mu.Unlock()
		return
	}
	tc := c.task(t.id)
	c.mu.Lock()
	done := tc.done
	c.mu.Unlock()
	if done != nil {
		if !wait {
			return
		}
		<-done
	}
	c.mu.Lock()
	tc.last = time.Now()
	// An empty database restores as fast from the changelog, and its
	// state has not moved since the last upload if the offsets have not.
	if isEmpty(t.committed) || checkpoint.Equal(tc.uploaded, t.committed) {
		c.mu.Unlock()
		return
	}
	tc.n++
	dir := filepath.Join(c.dir, t.id.String(), strconv.Itoa(tc.n))
	c.mu.Unlock()

	start := time.Now()
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		t.log.Warn("checkpoint not taken", "err", err)
		return
	}
	if err := cp.Checkpoint(dir); err != nil {
		t.log.Warn("checkpoint not taken", "err", err)
		os.RemoveAll(dir)
		return
	}
	took := time.Since(start)
	want := t.committed.Clone()
	c.mu.Lock()
	tc.done = make(chan struct{})
	c.mu.Unlock()
	c.wg.Add(1)
	go c.upload(t.id, tc, dir, want, t.log, took)
}

// upload verifies the checkpoint in dir by opening it, reads the offsets
// it reflects from it, uploads it and removes dir.
func (c *checkpoints) upload(id TaskID, tc *taskCheckpoints, dir string, want state.Offsets, log *slog.Logger, took time.Duration) {
	defer c.wg.Done()
	var offsets state.Offsets
	var st checkpoint.UploadStats
	err := func() error {
		// A backend that can, prepares the copy (see
		// state.CheckpointPreparer) and reads its offsets from it.
		offsets = want
		if r, ok := c.backend.(state.CheckpointPreparer); ok {
			var err error
			if offsets, err = r.PrepareCheckpoint(dir); err != nil {
				return fmt.Errorf("open the checkpoint: %w", err)
			}
		}
		if !checkpoint.Equal(offsets, want) {
			// Checkpoint and Apply are not concurrent, so this is a bug.
			return fmt.Errorf("the checkpoint holds offsets %v, the task had committed %v", offsets, want)
		}
		var err error
		st, err = tc.up.Upload(c.ctx, dir, offsets)
		return err
	}()
	if rerr := os.RemoveAll(dir); rerr != nil {
		log.Warn("remove local checkpoint", "dir", dir, "err", rerr)
	}
	c.mu.Lock()
	if st.Written || st.Skipped {
		tc.uploaded = offsets
	}
	close(tc.done)
	tc.done = nil
	c.mu.Unlock()
	switch {
	case err != nil && st.Written:
		log.Warn("checkpoint uploaded; old checkpoints not collected", "seq", st.Seq, "err", err)
	case err != nil:
		log.Warn("checkpoint upload failed; the next one retries", "err", err)
		return
	case st.Skipped:
		log.Debug("checkpoint unchanged since the newest in the store; not uploaded")
		return
	}
	log.Info("checkpoint uploaded", "seq", st.Seq, "files", st.Files, "bytes", st.Bytes,
		"new_files", st.Uploaded, "new_bytes", st.UploadedBytes,
		"deleted_checkpoints", st.DeletedManifests, "deleted_files", st.Deleted,
		"checkpoint_took", took.Round(time.Millisecond), "upload_took", st.Took.Round(time.Millisecond))
}
