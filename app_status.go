package eddy

import (
	"fmt"
	"time"

	"github.com/eddy-streams/eddy/internal/runtime"
)

// Status is a snapshot of a running app's instance: its workers, its tasks
// (restoring with their progress, running, closing, standby) with their
// stores, sizes on disk and stream times, and whether it is ready. It is
// what GET /v1/status serves as JSON.
type Status struct {
	AppID      string `json:"app_id"`
	InstanceID string `json:"instance_id"`
	// State is InstanceStarting, InstanceRunning or InstanceStopped.
	State string `json:"state"`
	// Ready is true when every worker has joined its group and every task
	// assigned to this instance is restored and running; NotReady then
	// says why not, and Restoring lists the tasks still restoring.
	Ready     bool     `json:"ready"`
	NotReady  string   `json:"not_ready,omitempty"`
	Restoring []string `json:"restoring,omitempty"`
	// Started is when Run started the instance.
	Started time.Time      `json:"started,omitzero"`
	Workers []WorkerStatus `json:"workers"`
	// Tasks are the active tasks of every worker, then the standbys, in
	// task order.
	Tasks []TaskStatus `json:"tasks"`
	// StateBytes is the disk space of the app's state directory on this
	// instance (active tasks, standbys and directories kept for later).
	StateBytes int64 `json:"state_bytes"`
}

// Instance states of a Status.
const (
	InstanceStarting = "starting" // creating topics, loading global stores, joining
	InstanceRunning  = "running"
	InstanceStopped  = "stopped"
)

// WorkerStatus is one worker (group member) of the instance.
type WorkerStatus struct {
	Index  int    `json:"index"`
	Member string `json:"member"`
	// Joined is set once the member received an assignment in its current
	// session.
	Joined bool `json:"joined"`
	// Tasks is how many active tasks the worker runs.
	Tasks int `json:"tasks"`
}

// TaskStatus is one task of the instance: active (restoring, running,
// closing) or a standby.
type TaskStatus struct {
	Task TaskID `json:"-"`
	// ID is Task printed, "0_3".
	ID string `json:"id"`
	// Worker is the index of the worker that runs the task, -1 for a
	// standby (the instance's standbys are shared by its workers).
	Worker int `json:"worker"`
	// State is TaskRestoring, TaskRunning, TaskClosing or TaskStandby.
	State string `json:"state"`
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
	// other inputs without it, possibly out of timestamp order
	// (Config.MaxTaskIdle; the metric eddy_task_idle_forced_total).
	IdleForced int64 `json:"idle_forced,omitempty"`
}

// Task states of a TaskStatus.
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

// StoreStatus is a store of a task and its changelog topic.
type StoreStatus struct {
	Name      string `json:"name"`
	Changelog string `json:"changelog"`
}

// RestoreStatus is a RestoreProgress in JSON-friendly units.
type RestoreStatus struct {
	Offsets        int64   `json:"offsets"`
	OffsetsDone    int64   `json:"offsets_done"`
	Records        int64   `json:"records"`
	Bytes          int64   `json:"bytes"`
	Percent        float64 `json:"percent"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	ETASeconds     float64 `json:"eta_seconds"`
}

// TaskID names a task: partition Partition of the source topics of
// sub-topology Subtopology, printed as Kafka Streams does ("0_3").
type TaskID struct {
	Subtopology int
	Partition   int32
}

func (id TaskID) String() string { return fmt.Sprintf("%d_%d", id.Subtopology, id.Partition) }

func taskIDOf(id runtime.TaskID) TaskID {
	return TaskID{Subtopology: id.Subtopology, Partition: id.Partition}
}

// RestoreProgress is where a task's restore stands: Config.OnRestoreProgress
// receives one at the start, at most every second, and at the end (Done).
type RestoreProgress struct {
	Task TaskID
	// Source is what is replayed: "changelog".
	Source string
	// Offsets is how many changelog offsets the restore covers (records,
	// transaction markers and aborted records alike) and OffsetsDone how
	// many of them it has passed; Records and Bytes count what it applied.
	Offsets, OffsetsDone, Records, Bytes int64
	// Elapsed is the time since the restore started.
	Elapsed time.Duration
	// Done is set on the last report, when the task is restored.
	Done bool
}

// Percent is the share of the offsets passed, 0-100.
func (p RestoreProgress) Percent() float64 { return p.runtime().Percent() }

// ETA estimates the time left at the average rate so far (0 when unknown
// or done).
func (p RestoreProgress) ETA() time.Duration { return p.runtime().ETA() }

func (p RestoreProgress) runtime() runtime.RestoreProgress {
	return runtime.RestoreProgress{
		Task:   runtime.TaskID{Subtopology: p.Task.Subtopology, Partition: p.Task.Partition},
		Source: p.Source, Offsets: p.Offsets, OffsetsDone: p.OffsetsDone, Records: p.Records, Bytes: p.Bytes,
		Elapsed: p.Elapsed, Done: p.Done,
	}
}

func restoreProgressOf(p runtime.RestoreProgress) RestoreProgress {
	return RestoreProgress{
		Task: taskIDOf(p.Task), Source: p.Source, Offsets: p.Offsets, OffsetsDone: p.OffsetsDone,
		Records: p.Records, Bytes: p.Bytes, Elapsed: p.Elapsed, Done: p.Done,
	}
}

// statusOf converts the runtime's snapshot into the public one.
func statusOf(s runtime.InstanceStatus) Status {
	out := Status{
		AppID: s.AppID, InstanceID: s.InstanceID, State: s.State, Ready: s.Ready, NotReady: s.NotReady,
		Restoring: s.Restoring, Started: s.Started, StateBytes: s.StateBytes,
		Workers: make([]WorkerStatus, len(s.Workers)), Tasks: make([]TaskStatus, len(s.Tasks)),
	}
	for i, w := range s.Workers {
		out.Workers[i] = WorkerStatus(w)
	}
	for i, t := range s.Tasks {
		ts := TaskStatus{
			Task: taskIDOf(t.Task), ID: t.ID, Worker: t.Worker, State: t.State, Since: t.Since,
			Stores: make([]StoreStatus, len(t.Stores)), StateBytes: t.StateBytes, StreamTime: t.StreamTime,
			StandbyLag: t.StandbyLag, IdleForced: t.IdleForced,
		}
		for j, st := range t.Stores {
			ts.Stores[j] = StoreStatus(st)
		}
		if t.Restore != nil {
			r := RestoreStatus(*t.Restore)
			ts.Restore = &r
		}
		out.Tasks[i] = ts
	}
	return out
}

// Status returns a snapshot of the app's instance. It is safe to call at
// any time from any goroutine, and costs the running tasks nothing but a
// short lock of each worker's status board (never the per-record path).
// Before Run it reports the app as starting, not ready.
func (a *App) Status() Status {
	if in := a.inst.Load(); in != nil {
		return statusOf(in.Status())
	}
	return Status{
		AppID: a.cfg.AppID, InstanceID: a.cfg.InstanceID, State: InstanceStarting,
		NotReady: "not started: App.Run has not been called", Workers: []WorkerStatus{}, Tasks: []TaskStatus{},
	}
}

// Ready reports whether every task assigned to the app's instance is
// restored and running (and its workers have joined the group); if not,
// why not, and which tasks are still restoring. /readyz serves it.
func (a *App) Ready() (ready bool, reason string, restoring []string) {
	if in := a.inst.Load(); in != nil {
		return in.Ready()
	}
	return false, "not started: App.Run has not been called", nil
}

// Describe returns the shape of the app's topology, with the app's topic
// names (see Topology.Describe).
func (a *App) Describe() TopologyDescription { return a.desc }

// httpStatus adapts the App to the interfaces of package httpapi.
type httpStatus struct{ a *App }

func (h httpStatus) Status() any { return h.a.Status() }
func (h httpStatus) Ready() (bool, string, []string) {
	return h.a.Ready()
}
func (h httpStatus) Describe() any { return h.a.Describe() }
