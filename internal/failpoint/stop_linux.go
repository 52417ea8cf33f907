package failpoint

import (
	"os"
	"runtime"
	"syscall"
)

// stopSelf stops the process and returns once it is continued. The signal
// goes to this thread (tgkill), which acts on it before the call returns:
// sent to the process (kill), it may wake another thread to stop them
// all while this one runs on for a moment, past the failpoint.
func stopSelf() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = syscall.Tgkill(os.Getpid(), syscall.Gettid(), syscall.SIGSTOP)
}
