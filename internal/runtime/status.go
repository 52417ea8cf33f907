package runtime

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eddy-streams/eddy/state"
)

// Task states, as Status reports them.
const (
	// TaskRestoring: assigned to this instance, its state not yet caught
	// up with its changelog (or its restore not yet begun). It processes
	// nothing until it runs.
	TaskRestoring = "restoring"
	// TaskRunning: restored, processing its partitions.
	TaskRunning = "running"
	// TaskClosing: revoked or shutting down, its database closing.
	TaskClosing = "closing"
	// TaskStandby: a warm copy of a task that runs on another instance.
	TaskStandby = "standby"
)

// Instance states, as Status reports them.
const (
	InstanceStarting = "starting" // creating topics, loading global stores, joining
	InstanceRunning  = "running"
	InstanceStopped  = "stopped"
)

// InstanceStatus is a snapshot of a running instance, for operators (the
// /v1/status endpoint and the web UI) and readiness probes.
type InstanceStatus struct {
	AppID      string `json:"app_id"`
	InstanceID string `json:"instance_id"`
	// State is InstanceStarting, InstanceRunning or InstanceStopped.
	State string `json:"state"`
	// Ready is true when every worker has joined its group and every task
	// assigned to this instance is restored and running; NotReady then
	// says why not, and Restoring lists the tasks still restoring.
	Ready     bool           `json:"ready"`
	NotReady  string         `json:"not_ready,omitempty"`
	Restoring []string       `json:"restoring,omitempty"`
	Started   time.Time      `json:"started,omitzero"`
	Workers   []WorkerStatus `json:"workers"`
	// Tasks are the active tasks of every worker, then the standbys, in
	// task order.
	Tasks []TaskStatus `json:"tasks"`
	// StateBytes is the disk space of the app's state directory on this
	// instance (active tasks, standbys and directories kept for later).
	StateBytes int64 `json:"state_bytes"`
}

// WorkerStatus is one worker (group member) of the instance.
type WorkerStatus struct {
	Index  int    `json:"index"`
	Member string `json:"member"`
	// Joined is set once the member received an assignment in its current
	// session.
	Joined bool `json:"joined"`
	Tasks  int  `json:"tasks"`
}

// TaskStatus is one task of the instance: active (restoring, running,
// closing) or a standby.
type TaskStatus struct {
	Task TaskID `json:"-"`
	ID   string `json:"id"`
	// Worker is the index of the worker that runs the task, -1 for a
	// standby (the instance's standbys are shared by its workers).
	Worker int    `json:"worker"`
	State  string `json:"state"`
	// Since is when the task entered State.
	Since  time.Time     `json:"since,omitzero"`
	Stores []StoreStatus `json:"stores"`
	// StateBytes is the disk space of the task's database (all its stores:
	// one database per task holds them).
	StateBytes int64 `json:"state_bytes"`
	// StreamTime is the committed stream time (ms since the epoch), absent
	// before the task saw a timestamp.
	StreamTime *int64 `json:"stream_time_ms,omitempty"`
	// Restore is where the restore stands while the task restores (nil
	// before the restore measured anything).
	Restore *RestoreStatus `json:"restore,omitempty"`
	// StandbyLag is a standby's distance, in changelog offsets, behind the
	// changelogs' last stable offsets at its last catch-up (absent before
	// the first).
	StandbyLag *int64 `json:"standby_lag,omitempty"`
	// IdleForced counts the times, since the task opened here, that it
	// stopped waiting for an empty input partition and processed its
	// other inputs without it (docs/design.md §5.2; the metric
	// eddy_task_idle_forced_total).
	IdleForced int64 `json:"idle_forced,omitempty"`
}

// StoreStatus is a store of a task.
type StoreStatus struct {
	Name      string `json:"name"`
	Changelog string `json:"changelog"`
}

// RestoreStatus is RestoreProgress in JSON-friendly units.
type RestoreStatus struct {
	Offsets        int64   `json:"offsets"`
	OffsetsDone    int64   `json:"offsets_done"`
	Records        int64   `json:"records"`
	Bytes          int64   `json:"bytes"`
	Percent        float64 `json:"percent"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	ETASeconds     float64 `json:"eta_seconds"`
}

func restoreStatus(p RestoreProgress) *RestoreStatus {
	return &RestoreStatus{
		Offsets: p.Offsets, OffsetsDone: p.OffsetsDone, Records: p.Records, Bytes: p.Bytes,
		Percent: p.Percent(), ElapsedSeconds: p.Elapsed.Seconds(), ETASeconds: p.ETA().Seconds(),
	}
}

// workerBoard is what a worker publishes of itself for Status: its
// membership and its tasks' states. The worker updates it when tasks are
// assigned, restored, installed and closed, and a restore at most once a
// second; nothing on the per-record path touches it. The committed stream
// time is an atomic in each entry, stored once per commit. Status readers
// take only mu, never the worker's own lock, so a slow commit does not
// hold a status request up.
type workerBoard struct {
	index  int
	member string

	mu       sync.Mutex
	joined   bool
	assigned []TaskID
	tasks    map[TaskID]*boardTask
}

// boardTask is a task's entry on its worker's board.
type boardTask struct {
	state   string
	since   time.Time
	opened  bool // a task object holds the entry (see open)
	restore *RestoreProgress
	// streamTime is the committed stream time.
	streamTime atomic.Int64
	// idleForced counts the times the task went on without an empty
	// input partition it was waiting for (docs/design.md §5.2).
	idleForced atomic.Int64
}

func newWorkerBoard(index int, member string) *workerBoard {
	return &workerBoard{index: index, member: member, tasks: make(map[TaskID]*boardTask)}
}

func newBoardTask(st string) *boardTask {
	bt := &boardTask{state: st, since: time.Now()}
	bt.streamTime.Store(state.NoStreamTime)
	return bt
}

// assign records the member's assignment (the group's sync): the member
// has joined, and tasks of the assignment that are not open yet are
// restoring from now on. Entries of tasks that are not open and no longer
// assigned are dropped.
func (b *workerBoard) assign(ids []TaskID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.joined = true
	b.assigned = slices.Clone(ids)
	for id, bt := range b.tasks {
		if !bt.opened && !slices.Contains(ids, id) {
			delete(b.tasks, id)
		}
	}
	for _, id := range ids {
		if b.tasks[id] == nil {
			b.tasks[id] = newBoardTask(TaskRestoring)
		}
	}
}

// pending marks newly assigned tasks as restoring (for a group protocol
// whose assignment the board does not see, the member has joined too).
func (b *workerBoard) pending(ids []TaskID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.joined = true
	for _, id := range ids {
		if b.tasks[id] == nil {
			b.tasks[id] = newBoardTask(TaskRestoring)
		}
	}
}

// drop forgets revoked tasks: they leave the assignment, and the entries
// of those not open (revoked before their restore began) go.
func (b *workerBoard) drop(ids []TaskID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.assigned = slices.DeleteFunc(b.assigned, func(id TaskID) bool { return slices.Contains(ids, id) })
	for _, id := range ids {
		if bt := b.tasks[id]; bt != nil && !bt.opened {
			delete(b.tasks, id)
		}
	}
}

// open returns the entry of a task being opened (restoring).
func (b *workerBoard) open(id TaskID) *boardTask {
	b.mu.Lock()
	defer b.mu.Unlock()
	bt := b.tasks[id]
	if bt == nil || bt.opened {
		bt = newBoardTask(TaskRestoring)
		b.tasks[id] = bt
	}
	bt.opened = true
	return bt
}

// set moves bt to state st (dropping its restore progress when it runs).
func (b *workerBoard) set(bt *boardTask, st string) {
	if bt == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if bt.state != st {
		bt.state, bt.since = st, time.Now()
	}
	if st == TaskRunning {
		bt.restore = nil
	}
}

// progress records a restore's progress.
func (b *workerBoard) progress(bt *boardTask, p RestoreProgress) {
	if bt == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	bt.restore = &p
}

// closed removes bt, if it is still id's entry.
func (b *workerBoard) closed(id TaskID, bt *boardTask) {
	if bt == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tasks[id] == bt {
		delete(b.tasks, id)
	}
}

// reset forgets the session: the member is no longer in the group.
func (b *workerBoard) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.joined, b.assigned = false, nil
	clear(b.tasks)
}

// Status returns a snapshot of the instance. It is safe to call at any
// time, from any goroutine: it reads the workers' boards and the standbys'
// list (never a worker's own lock), and the task directories' sizes on
// disk.
func (in *Instance) Status() InstanceStatus { return in.status(true) }

// Ready reports whether every worker has joined its group and every task
// assigned to the instance is restored and running; if not, why not and
// which tasks are still restoring. It is Status without the disk sizes,
// for readiness probes.
func (in *Instance) Ready() (ready bool, reason string, restoring []string) {
	s := in.status(false)
	return s.Ready, s.NotReady, s.Restoring
}

func (in *Instance) status(sizes bool) InstanceStatus {
	s := InstanceStatus{AppID: in.cfg.AppID, InstanceID: in.cfg.InstanceID, Workers: []WorkerStatus{}, Tasks: []TaskStatus{}}
	switch in.phase.Load() {
	case phaseRunning:
		s.State = InstanceRunning
	case phaseStopped:
		s.State = InstanceStopped
	default:
		s.State = InstanceStarting
	}
	if st := in.started.Load(); st != nil {
		s.Started = *st
	}
	appDir := filepath.Join(in.cfg.StateDir, in.cfg.AppID)
	var restoring, waiting []string
	for _, b := range in.boards {
		b.mu.Lock()
		ws := WorkerStatus{Index: b.index, Member: b.member, Joined: b.joined, Tasks: len(b.tasks)}
		if !b.joined {
			waiting = append(waiting, b.member)
		}
		for id, bt := range b.tasks {
			ts := TaskStatus{Task: id, ID: id.String(), Worker: b.index, State: bt.state, Since: bt.since, Stores: in.storesOf(id)}
			ts.IdleForced = bt.idleForced.Load()
			if st := bt.streamTime.Load(); st != state.NoStreamTime && bt.state != TaskRestoring {
				ts.StreamTime = &st
			}
			if bt.restore != nil && bt.state == TaskRestoring {
				ts.Restore = restoreStatus(*bt.restore)
			}
			if bt.state == TaskRestoring {
				restoring = append(restoring, id.String())
			}
			s.Tasks = append(s.Tasks, ts)
		}
		// A task of the assignment the worker has not heard of yet (its
		// callbacks run after the sync) is not running either.
		for _, id := range b.assigned {
			if b.tasks[id] == nil {
				restoring = append(restoring, id.String())
			}
		}
		b.mu.Unlock()
		s.Workers = append(s.Workers, ws)
	}
	if sb := in.sb.Load(); sb != nil {
		s.Tasks = append(s.Tasks, sb.status(in)...)
	}
	slices.SortStableFunc(s.Tasks, func(a, b TaskStatus) int {
		if (a.Worker < 0) != (b.Worker < 0) {
			if a.Worker < 0 {
				return 1
			}
			return -1
		}
		return compareTaskIDs(a.Task, b.Task)
	})
	if sizes {
		for i := range s.Tasks {
			s.Tasks[i].StateBytes = dirSize(filepath.Join(appDir, s.Tasks[i].ID))
		}
		s.StateBytes = dirSize(appDir)
	}
	slices.Sort(restoring)
	restoring = slices.Compact(restoring)
	s.Restoring = restoring
	switch {
	case s.State == InstanceStarting:
		s.NotReady = "starting: creating topics and loading global stores"
	case s.State == InstanceStopped:
		s.NotReady = "stopped"
	case len(waiting) > 0:
		s.NotReady = "waiting for the group to assign tasks to " + strings.Join(waiting, ", ")
	case len(restoring) > 0:
		s.NotReady = fmt.Sprintf("%d task(s) not running yet: %s", len(restoring), strings.Join(restoring, ", "))
	default:
		s.Ready = true
	}
	return s
}

// storesOf lists the stores of task id with their changelogs.
func (in *Instance) storesOf(id TaskID) []StoreStatus {
	if id.Subtopology < 0 || id.Subtopology >= len(in.plan.subs) {
		return nil
	}
	sub := &in.plan.subs[id.Subtopology]
	out := make([]StoreStatus, len(sub.storeNames))
	for i, name := range sub.storeNames {
		out[i] = StoreStatus{Name: name, Changelog: sub.changelogs[i]}
	}
	return out
}

// status lists the standby tasks.
func (s *standbys) status(in *Instance) []TaskStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]TaskStatus, 0, len(s.tasks))
	for id, st := range s.tasks {
		ts := TaskStatus{Task: id, ID: id.String(), Worker: -1, State: TaskStandby, Since: st.opened, Stores: in.storesOf(id)}
		if lag := st.lag.Load(); lag >= 0 {
			ts.StandbyLag = &lag
		}
		out = append(out, ts)
	}
	return out
}

// dirSize is the size of the files under dir (0 if it does not exist).
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file removed while we walk (a compaction): skip it
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
