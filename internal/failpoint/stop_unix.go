//go:build unix && !linux

package failpoint

import (
	"os"
	"syscall"
)

// stopSelf stops the process and returns once it is continued. Without
// Linux's tgkill the signal goes to the process, whose stop may take this
// thread a moment after the call returns.
func stopSelf() { _ = syscall.Kill(os.Getpid(), syscall.SIGSTOP) }
