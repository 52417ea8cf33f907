// Package diskfault makes an app's state disk slow or failing, for chaos
// testing only: when the environment variable EDDY_CHAOS_DISK names a
// control file, the app's Pebble databases live on Pebble's errorfs over
// the OS file system, and the file's content (re-read every 100 ms) says
// what the disk does now. It is off unless that variable is set: `eddy
// chaos` sets it for the `eddy ledger` and `eddy windowed` processes it
// starts, whose commands (cmd/eddy) hand the example this package's
// Backend through a config option; the examples know nothing of it.
//
// Control file content, one line:
//
//	off (or empty, or missing)  the disk works
//	latency 20ms                every write, sync and create waits 20ms
//	eio 0.05                    each write, sync or create fails with EIO with probability 0.05
//	enospc 0.05                 the same with ENOSPC (disk full)
//
// A disk error must make the app fail (and be restarted) or rebuild, never
// commit state the disk did not hold.
package diskfault

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/pebble"
)

// EnvVar names the control file; unset, disks are never faulted.
const EnvVar = "EDDY_CHAOS_DISK"

// Mode is what the disk does.
type Mode struct {
	Kind    string        // "", "latency", "eio" or "enospc"
	Latency time.Duration // for "latency"
	P       float64       // for "eio" and "enospc": probability per write
}

func (m Mode) String() string {
	switch m.Kind {
	case "":
		return "off"
	case "latency":
		return "latency " + m.Latency.String()
	default:
		return fmt.Sprintf("%s %g", m.Kind, m.P)
	}
}

// ParseMode parses a control file's content.
func ParseMode(s string) (Mode, error) {
	f := strings.Fields(s)
	if len(f) == 0 || f[0] == "off" {
		return Mode{}, nil
	}
	if len(f) != 2 {
		return Mode{}, fmt.Errorf("diskfault: %q: want off, latency DURATION, eio P or enospc P", s)
	}
	switch f[0] {
	case "latency":
		d, err := time.ParseDuration(f[1])
		if err != nil || d < 0 {
			return Mode{}, fmt.Errorf("diskfault: latency %q: want a duration such as 20ms", f[1])
		}
		return Mode{Kind: "latency", Latency: d}, nil
	case "eio", "enospc":
		p, err := strconv.ParseFloat(f[1], 64)
		if err != nil || p < 0 || p > 1 {
			return Mode{}, fmt.Errorf("diskfault: %s %q: want a probability from 0 to 1", f[0], f[1])
		}
		return Mode{Kind: f[0], P: p}, nil
	}
	return Mode{}, fmt.Errorf("diskfault: %q: want off, latency DURATION, eio P or enospc P", s)
}

// Injector is the errorfs injector driven by a control file.
type Injector struct {
	path     string
	log      *slog.Logger
	mode     atomic.Pointer[Mode]
	injected atomic.Int64
	stop     chan struct{}
}

// FromEnv returns a file system faulted as EnvVar's control file says, and
// a function that stops watching the file; nil, nil when the variable is
// unset.
func FromEnv(log *slog.Logger) (vfs.FS, func()) {
	path := os.Getenv(EnvVar)
	if path == "" {
		return nil, nil
	}
	inj := &Injector{path: path, log: log, stop: make(chan struct{})}
	inj.mode.Store(&Mode{})
	inj.poll()
	go inj.watch()
	log.Warn("chaos: the state disk is faulted as a control file says; never run this outside chaos tests", "env", EnvVar, "file", path)
	return errorfs.Wrap(vfs.Default, inj), func() { close(inj.stop) }
}

func (inj *Injector) watch() {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-inj.stop:
			return
		case <-t.C:
			inj.poll()
		}
	}
}

func (inj *Injector) poll() {
	b, err := os.ReadFile(inj.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return
	}
	m, err := ParseMode(string(b))
	if err != nil {
		inj.log.Error("chaos: bad disk fault control file", "file", inj.path, "err", err)
		return
	}
	if old := inj.mode.Load(); *old != m {
		inj.mode.Store(&m)
		inj.log.Warn("chaos: disk fault mode", "mode", m.String(), "errors_injected_so_far", inj.injected.Load())
	}
}

// String implements errorfs.Injector.
func (inj *Injector) String() string { return "chaos disk " + inj.mode.Load().String() }

// MaybeError implements errorfs.Injector: it delays or fails write
// operations as the current mode says. Reads are left alone: Pebble treats
// a failed read of a table as corruption, which is a different fault.
func (inj *Injector) MaybeError(op errorfs.Op) error {
	m := inj.mode.Load()
	if m.Kind == "" || op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
		return nil
	}
	switch m.Kind {
	case "latency":
		time.Sleep(m.Latency)
		return nil
	case "eio", "enospc":
		if rand.Float64() >= m.P {
			return nil
		}
		errno := syscall.EIO
		if m.Kind == "enospc" {
			errno = syscall.ENOSPC
		}
		if n := inj.injected.Add(1); n <= 3 || n%100 == 0 {
			inj.log.Warn("chaos: injected disk error", "op", op.Kind, "path", op.Path, "err", errno, "count", n)
		}
		return &os.PathError{Op: "chaos " + m.Kind, Path: op.Path, Err: errno}
	}
	return nil
}

// Backend returns the Pebble state backend on the faulted file system when
// EnvVar is set, nil otherwise (the app's default backend), and a function
// to call once the app stopped.
func Backend(log *slog.Logger) (state.Backend, func()) {
	fs, stop := FromEnv(log)
	if fs == nil {
		return nil, func() {}
	}
	b := pebble.New(pebble.Options{Logger: log, FS: fs})
	return b, func() { b.Close(); stop() }
}
