package eddy

import (
	"testing"

	"github.com/eddy-streams/eddy/internal/runtime"
)

// TestStatusConstants: the public state names are the runtime's, which
// Status copies through unchanged.
func TestStatusConstants(t *testing.T) {
	for _, c := range [][2]string{
		{InstanceStarting, runtime.InstanceStarting}, {InstanceRunning, runtime.InstanceRunning}, {InstanceStopped, runtime.InstanceStopped},
		{TaskRestoring, runtime.TaskRestoring}, {TaskRunning, runtime.TaskRunning}, {TaskClosing, runtime.TaskClosing}, {TaskStandby, runtime.TaskStandby},
	} {
		if c[0] != c[1] {
			t.Errorf("eddy's %q is the runtime's %q", c[0], c[1])
		}
	}
	if DefaultMaxRecordBytes != runtime.DefaultMaxRecordBytes {
		t.Errorf("DefaultMaxRecordBytes %d, the runtime's %d", DefaultMaxRecordBytes, runtime.DefaultMaxRecordBytes)
	}
}
