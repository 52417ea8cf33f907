// Package demo runs the examples the way `eddy demo` shows them: an embedded
// broker, a payment generator, the ledger and the windowed totals as child
// processes that are killed and restarted, and a verification of every
// output. The crash tests use the same pieces against a broker process.
package demo

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// IgnoreStateOffsetsEnv, set to 1 in the environment of `eddy ledger`,
// makes the ledger resume from the group's committed offsets alone
// (eddy.Config.IgnoreStateOffsets), as Kafka Streams does: the broker-kill
// stress test compares it with eddy's offsets in the changelog. The
// example does not know it; cmd/eddy sets the config.
const IgnoreStateOffsetsEnv = "EDDY_IGNORE_STATE_OFFSETS"

// Child is a subprocess whose output lines go to a log file and, for lines
// that contain a watched marker, to a channel.
type Child struct {
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}
	err     error
}

// StartChild starts argv, appending its stdout and stderr to log. Each line
// containing marker is reported on marks (non-blocking).
func StartChild(argv []string, log io.Writer, marker string, marks chan<- time.Time) (*Child, error) {
	return StartChildEnv(argv, nil, log, marker, marks)
}

// StartChildEnv is StartChild with env ("KEY=value") added to this
// process's environment.
func StartChildEnv(argv, env []string, log io.Writer, marker string, marks chan<- time.Time) (*Child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("demo: start %s: %w", strings.Join(argv, " "), err)
	}
	c := &Child{cmd: cmd, started: time.Now(), done: make(chan struct{})}
	var copying sync.WaitGroup
	copying.Add(1)
	go func() {
		defer copying.Done()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(log, line)
			if marker != "" && marks != nil && strings.Contains(line, marker) {
				select {
				case marks <- time.Now():
				default:
				}
			}
		}
	}()
	go func() {
		c.err = cmd.Wait()
		pw.Close()
		copying.Wait()
		close(c.done)
	}()
	return c, nil
}

// Started is when the process was started.
func (c *Child) Started() time.Time { return c.started }

// Pid is the process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Kill sends SIGKILL and waits for the process to be gone.
func (c *Child) Kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// Signal sends sig to the process without waiting.
func (c *Child) Signal(sig os.Signal) error { return c.cmd.Process.Signal(sig) }

// Stop sends SIGTERM and waits up to timeout for a clean exit, then kills.
// It returns the exit error of a process that did not exit cleanly.
func (c *Child) Stop(timeout time.Duration) error {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		return c.err
	case <-time.After(timeout):
		c.Kill()
		return fmt.Errorf("demo: pid %d did not stop within %v after SIGTERM; killed", c.Pid(), timeout)
	}
}

// Done is closed when the process has exited.
func (c *Child) Done() <-chan struct{} { return c.done }

// Err is the exit error, once Done is closed.
func (c *Child) Err() error { return c.err }
