package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// onAssigned runs for partitions newly assigned to this member. A task we
// still hold for one of them is stale: franz-go's transact session does not
// call our revoke callback for a second revoke before the next End, so its
// partitions went to another member and came back while we kept the old
// state. It is closed here and reopened from the changelog in adjustOffsets.
// The open transaction may hold the stale task's work, on partitions whose
// consumer positions moved on: revokePending makes the loop abort it, which
// rewinds the consumer to the committed offsets.
func (w *worker) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := w.plan.tasksOf(assigned)
	if len(ids) > 0 {
		// Marks when the group handed the tasks over, before their
		// restore: failover measurements read it.
		w.log.Info("tasks newly assigned", "tasks", fmt.Sprint(ids))
	}
	for _, id := range ids {
		if t := w.tasks[id]; t != nil {
			t.log.Info("closing a stale task: its partitions were revoked and assigned again")
			if err := w.closeTask(t); err != nil {
				w.log.Warn("close task", "task", t.id.String(), "err", err)
			}
			delete(w.tasks, id)
			w.revokePending = true
		}
	}
	w.board.pending(ids)
}

// onRevoked closes the tasks that revoked or lost partitions belong to
// (the balancer moves tasks whole, so that is all of their partitions).
// The open transaction will abort, so their uncommitted work is dropped
// with it; revokePending makes the loop end it at once.
func (w *worker) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if len(revoked) == 0 {
		// A cooperative rebalance ends with an empty revoke on every
		// member; the session does not abort for it, nor do we.
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.revokePending = true
	ids := w.plan.tasksOf(revoked)
	for _, id := range ids {
		if t := w.tasks[id]; t != nil {
			if err := w.closeTask(t); err != nil {
				w.log.Warn("close task", "task", t.id.String(), "err", err)
			}
			delete(w.tasks, id)
			t.log.Info("task revoked")
		}
	}
	w.board.drop(ids)
}

// onLost is onRevoked for partitions the member lost (its session expired,
// it was fenced): even an empty loss ends the open transaction, as the
// session's End would.
func (w *worker) onLost(ctx context.Context, cl *kgo.Client, lost map[string][]int32) {
	w.mu.Lock()
	w.revokePending = true
	w.mu.Unlock()
	w.onRevoked(ctx, cl, lost)
}

// adjustOffsets opens and restores the tasks of newly assigned partitions,
// then starts each partition from the later of the group's committed
// offset and the offset its task's state reflects (docs/design.md §6). franz-go
// calls it after the group's stable offset fetch, which waits for the
// previous owner's pending transaction: restoring here rather than in
// onAssigned means the changelog already holds every transaction whose
// offsets the fetch returned.
func (w *worker) adjustOffsets(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	parts := make(map[string][]int32, len(offsets))
	for topic, ps := range offsets {
		for p := range ps {
			parts[topic] = append(parts[topic], p)
		}
	}
	w.mu.Lock()
	gen, fatal := w.sessionGen, w.fatal
	var need []TaskID
	for _, id := range w.plan.tasksOf(parts) {
		if w.tasks[id] == nil {
			need = append(need, id)
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
	start := time.Now()
	if w.ckpt != nil {
		// The downloads of the tasks' checkpoints overlap; the restores
		// below then take them one after another.
		defer w.ckpt.prefetch(ctx, w, need)()
	}
	var opened []*task
	closeOpened := func() {
		for _, t := range opened {
			if err := w.closeTask(t); err != nil {
				w.log.Warn("close task", "task", t.id.String(), "err", err)
			}
		}
	}
	if len(need) > 0 {
		w.standbys.pause()
		defer w.standbys.resume()
	}
	for _, id := range need {
		// The task's directory may hold this process's standby of the
		// task: acquiring stops it and hands its database over to
		// openTask, whose restore then replays only what the standby
		// had not applied. task.close releases it.
		w.standbys.acquire(id)
		t, err := w.openTask(ctx, id)
		if err != nil {
			w.standbys.release(id)
			closeOpened()
			if ctx.Err() != nil {
				// A revoke or shutdown: franz-go fetches these partitions
				// again with the next assignment.
				return offsets, fmt.Errorf("eddy: restore interrupted: %w", err)
			}
			w.mu.Lock()
			w.fatal = err
			w.mu.Unlock()
			return offsets, nil
		}
		opened = append(opened, t)
	}

	w.probeInputs(ctx, opened, groupOffsets(offsets))
	if w.cfg.Bounded {
		if err := w.listBounds(ctx, opened); err != nil {
			closeOpened()
			if ctx.Err() != nil {
				return offsets, fmt.Errorf("eddy: restore interrupted: %w", err)
			}
			w.mu.Lock()
			w.fatal = err // the session ends; the next one lists again
			w.mu.Unlock()
			return offsets, nil
		}
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sessionGen != gen {
		closeOpened() // the session ended while we restored
		return offsets, errors.New("eddy: session ended during restore")
	}
	for _, t := range opened {
		w.tasks[t.id] = t
		w.queries.add(t)
		t.assignedAt = time.Now()
		t.status.streamTime.Store(t.committed.StreamTime)
		w.board.set(t.status, TaskRunning)
		t.log.Info("task assigned", "input_offsets", fmt.Sprint(t.committed.Input))
	}
	if len(opened) > 0 {
		// The restores' wall time: with checkpoints their downloads
		// overlap, so the tasks' own durations do not add up to it.
		w.log.Info("tasks opened", "tasks", len(opened), "took", time.Since(start).Round(time.Millisecond))
	}
	for topic, ps := range offsets {
		for p, off := range ps {
			id, _ := w.plan.taskOf(topic, p)
			t := w.tasks[id]
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

// balancers are the group protocols the worker offers: the task balancer,
// and, when every sub-topology reads one topic (a task is one partition),
// franz-go's cooperative-sticky too. That second choice lets a group of
// the version before the task balancer, which offered only
// cooperative-sticky, be upgraded one instance at a time: the group keeps
// the protocol all members support until the last old one has left, and
// then switches to the first choice. With a multi-source sub-topology
// cooperative-sticky would split tasks, so it is not offered; such a
// topology never ran on the older version anyway.
func (w *worker) balancers() []kgo.GroupBalancer {
	tb := newTaskBalancer(w.plan)
	tb.process, tb.member, tb.replicas = w.cfg.InstanceID, w.memberID, w.cfg.StandbyReplicas
	tb.probe = w.scheduleProbe
	tb.endpoint = w.cfg.Endpoint
	if w.queries != nil {
		tb.routes = w.queries
	}
	tb.onAssign = w.board.assign
	if w.standbys != nil {
		tb.host = w.standbys
	}
	bs := []kgo.GroupBalancer{tb}
	for _, s := range w.plan.subs {
		if len(s.Sources) != 1 {
			return bs
		}
	}
	return append(bs, kgo.CooperativeStickyBalancer())
}
