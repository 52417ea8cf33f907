package eddy

import (
	"github.com/eddy-streams/eddy/internal/runtime"
)

// Status is a snapshot of a running app's instance: its workers, its tasks
// (restoring with their progress, running, closing, standby) with their
// stores, sizes on disk and stream times, and whether it is ready.
type Status = runtime.InstanceStatus

// TaskStatus is one task in a Status.
type TaskStatus = runtime.TaskStatus

// Task states of a TaskStatus.
const (
	TaskRestoring = runtime.TaskRestoring
	TaskRunning   = runtime.TaskRunning
	TaskClosing   = runtime.TaskClosing
	TaskStandby   = runtime.TaskStandby
)

// Status returns a snapshot of the app's instance. It is safe to call at
// any time from any goroutine, and costs the running tasks nothing but a
// short lock of each worker's status board (never the per-record path).
// Before Run it reports the app as starting, not ready.
func (a *App) Status() Status {
	if in := a.inst.Load(); in != nil {
		return in.Status()
	}
	return Status{
		AppID: a.cfg.AppID, InstanceID: a.cfg.InstanceID, State: runtime.InstanceStarting,
		NotReady: "not started: App.Run has not been called", Workers: []runtime.WorkerStatus{}, Tasks: []TaskStatus{},
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
