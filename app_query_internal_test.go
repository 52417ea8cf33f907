package eddy

import (
	"errors"
	"fmt"
	"testing"

	"github.com/eddy-streams/eddy/httpapi"
	"github.com/eddy-streams/eddy/internal/runtime"
	"github.com/eddy-streams/eddy/state"
)

// TestHTTPErrClassifies: the HTTP routes tell a transient failure (503,
// retry) from a corrupt database (500, no retry) by httpErr's mapping.
func TestHTTPErrClassifies(t *testing.T) {
	corrupt := fmt.Errorf("eddy: task 0_1: state/pebble: get /data/app/0_1: %w: checksum mismatch", state.ErrCorrupt)
	if err := httpErr(corrupt); !errors.Is(err, httpapi.ErrCorrupt) || errors.Is(err, httpapi.ErrUnavailable) {
		t.Errorf("a corrupt read: %v; want httpapi.ErrCorrupt and not ErrUnavailable", err)
	}
	restoring := &NotLocalError{Store: "s", Task: taskIDOf(runtime.TaskID{Partition: 1})}
	if err := httpErr(restoring); !errors.Is(err, httpapi.ErrUnavailable) || errors.Is(err, httpapi.ErrCorrupt) {
		t.Errorf("a task restoring here: %v; want httpapi.ErrUnavailable", err)
	}
}
