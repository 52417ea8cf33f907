package chaos

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/eddy-streams/eddy/internal/harness/chaos/diskfault"
	"github.com/eddy-streams/eddy/internal/harness/demo"
)

// brokerProc is `eddy broker` as a child process: the harness SIGKILLs and
// SIGTERMs it, and injects errors into it through its fault API.
type brokerProc struct {
	bin, addr, advertise, faultAPI, dir string
	log                                 *os.File
	child                               *demo.Child
}

func (b *brokerProc) start() error {
	ready := make(chan time.Time, 1)
	argv := []string{b.bin, "broker", "--addr", b.addr, "--data-dir", b.dir, "--advertise", b.advertise,
		"--fault-api", b.faultAPI, "--log-level", "warn"}
	var err error
	// The fault API port may still be held a moment after a SIGKILL;
	// retry the start a few times.
	for try := 0; try < 20; try++ {
		var c *demo.Child
		if c, err = demo.StartChild(argv, b.log, "listening on", ready); err != nil {
			return err
		}
		select {
		case <-ready:
			b.child = c
			return nil
		case <-c.Done():
			err = fmt.Errorf("chaos: the broker exited at start: %v (see %s)", c.Err(), b.log.Name())
			time.Sleep(250 * time.Millisecond)
		case <-time.After(60 * time.Second):
			c.Kill()
			return fmt.Errorf("chaos: the broker was not ready within 60s (see %s)", b.log.Name())
		}
	}
	return err
}

// app is one example process (ledger or windowed) that the harness kills,
// freezes, starves of disk and restarts.
type app struct {
	name     string // "ledger-1", "windowed-1"
	kind     string // "ledger" or "windowed"
	argv     []string
	diskCtl  string // the EDDY_CHAOS_DISK control file
	logPath  string
	log      *os.File
	child    *demo.Child
	marks    chan time.Time
	stopped  bool // SIGSTOPped now
	stopping bool // being stopped on purpose (kill, end of run)
	exits    int  // exits nobody asked for
	// restartedAt is the last (re)start; waiting is set until the new
	// process committed its first transaction.
	restartedAt time.Time
}

func (a *app) start() error {
	os.Setenv(diskfault.EnvVar, a.diskCtl) // inherited by the child
	c, err := demo.StartChild(a.argv, a.log, demo.FirstCommitMarker, a.marks)
	os.Unsetenv(diskfault.EnvVar)
	if err != nil {
		return err
	}
	a.child, a.restartedAt = c, time.Now()
	return nil
}

// kill SIGKILLs the app and starts it again at once.
func (a *app) kill() error {
	a.child.Kill()
	fmt.Fprintf(a.log, "=== chaos: SIGKILL\n")
	return a.start()
}

// exited reports whether the app stopped on its own (not frozen, not by us).
func (a *app) exited() bool {
	select {
	case <-a.child.Done():
		return true
	default:
		return false
	}
}

func newApp(name, kind string, argv []string, dir string) (*app, error) {
	a := &app{name: name, kind: kind, argv: argv, diskCtl: filepath.Join(dir, name+".disk"),
		logPath: filepath.Join(dir, name+".log"), marks: make(chan time.Time, 64)}
	if err := os.WriteFile(a.diskCtl, []byte("off\n"), 0o600); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	var err error
	if a.log, err = os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	return a, a.start()
}

func (a *app) setDisk(mode string) error {
	return os.WriteFile(a.diskCtl, []byte(mode+"\n"), 0o600)
}

// freeAddr returns a free loopback address.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("chaos: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// sleepCtx sleeps d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
