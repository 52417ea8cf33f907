// Package pgtest starts throwaway PostgreSQL clusters for tests: Debian's
// server binaries, really started, never mocked.
//
// Each Start makes its own cluster (initdb into a fresh directory, a free
// port, its socket in that directory) so that a test may stop it, kill it
// (pg_ctl stop -m immediate) and start it again without disturbing another
// test. initdb runs with --no-sync (its files need not survive a machine
// crash) but the server keeps fsync on, its default, so the figures a
// benchmark measures on it are those of a durable database.
//
// initdb and the server refuse to run as root; tests run as root here and
// in CI, so then they run as the postgres user that Debian's package
// creates, and the cluster's directory is given to that user.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// RequireEnv names the variable that turns "PostgreSQL is not installed"
// from a skip into a failure: CI sets it, so that the PostgreSQL tests
// cannot silently not run there.
const RequireEnv = "EDDY_REQUIRE_POSTGRES"

// Cluster is one running (or stopped) PostgreSQL cluster.
type Cluster struct {
	bin  string // directory of initdb, pg_ctl, postgres
	dir  string // root of the cluster: data/, the socket, the log
	port int
	cred *syscall.Credential // nil when not root
	// settings are server settings ("name=value") after the defaults.
	settings []string
}

// Start initdb's a cluster in a new temporary directory, starts it and
// registers its stop (immediate) and removal with t.Cleanup. It skips t
// when PostgreSQL is not installed, unless RequireEnv is set. settings
// ("name=value") are server settings after the defaults, which they
// override (e.g. "max_prepared_transactions=0").
func Start(t testing.TB, settings ...string) *Cluster {
	t.Helper()
	bin, err := FindBin()
	if err != nil {
		if os.Getenv(RequireEnv) != "" {
			t.Fatalf("%v (%s is set)", err, RequireEnv)
		}
		t.Skip(err)
	}
	c, err := New(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Remove)
	c.settings = settings
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// FindBin returns the newest /usr/lib/postgresql/<version>/bin that holds
// initdb, pg_ctl and postgres.
func FindBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		ok := true
		for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
			if _, err := os.Stat(filepath.Join(d, name)); err != nil {
				ok = false
			}
		}
		if ok {
			return d, nil
		}
	}
	return "", fmt.Errorf("pgtest: PostgreSQL is not installed (no /usr/lib/postgresql/*/bin with initdb, pg_ctl and postgres; apt-get install postgresql)")
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// New initdb's a cluster in a new temporary directory without starting it.
// The caller must call Remove.
func New(bin string) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "eddy-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: running as root needs the postgres user (Debian's postgresql package creates it): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		// MkdirTemp's parent (/tmp or TMPDIR) must let postgres in: it
		// usually does; say so clearly when it does not.
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if out, err := c.command("initdb", "-D", c.dataDir(), "-U", "postgres", "--auth=trust",
		"--no-sync", "-E", "UTF8", "--locale=C").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	return c, nil
}

func (c *Cluster) dataDir() string { return filepath.Join(c.dir, "data") }

// LogPath is the server's log file, worth printing when a test fails.
func (c *Cluster) LogPath() string { return filepath.Join(c.dir, "server.log") }

// Port is the TCP port the cluster listens on (on 127.0.0.1), fixed at
// its first Start so that a restarted cluster keeps its DSN.
func (c *Cluster) Port() int { return c.port }

// DSN is a connection string for the cluster's postgres database as the
// postgres superuser, over TCP.
func (c *Cluster) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// command runs a PostgreSQL binary as the postgres user when root.
func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd
}

// Start starts the server (a new one or one stopped before) and waits
// until it accepts connections.
func (c *Cluster) Start() error {
	if c.port == 0 {
		p, err := freePort()
		if err != nil {
			return err
		}
		c.port = p
	}
	args := []string{
		"-p", strconv.Itoa(c.port),
		"-k", c.dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_prepared_transactions=64",
		"-c", "max_connections=100",
	}
	for _, s := range c.settings {
		args = append(args, "-c", s)
	}
	opts := strings.Join(args, " ")
	// -w waits for the server to accept connections (pg_ctl's default
	// timeout is 60s).
	out, err := c.command("pg_ctl", "start", "-w", "-D", c.dataDir(), "-l", c.LogPath(), "-o", opts).CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(c.LogPath())
		return fmt.Errorf("pgtest: pg_ctl start: %w\n%s\nserver log:\n%s", err, out, log)
	}
	return nil
}

// Stop stops the server with pg_ctl's mode: "fast" (roll back open
// transactions, checkpoint), "immediate" (a crash: no checkpoint, the
// next Start recovers from the WAL) or "smart".
func (c *Cluster) Stop(mode string) error {
	out, err := c.command("pg_ctl", "stop", "-w", "-D", c.dataDir(), "-m", mode).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop -m %s: %w\n%s", mode, err, out)
	}
	return nil
}

// Kill stops the server as a crash would (pg_ctl stop -m immediate):
// open transactions are lost, committed ones survive.
func (c *Cluster) Kill() error { return c.Stop("immediate") }

// Running reports whether the server's postmaster is up.
func (c *Cluster) Running() bool {
	return c.command("pg_ctl", "status", "-D", c.dataDir()).Run() == nil
}

// Remove stops the server if it runs (immediately: nothing is worth a
// checkpoint) and deletes the cluster's directory.
func (c *Cluster) Remove() {
	if c.Running() {
		_ = c.Kill()
	}
	os.RemoveAll(c.dir)
}

// WaitReady waits until a TCP connection to the port succeeds, for a test
// that restarts the server behind a client's back.
func (c *Cluster) WaitReady(ctx context.Context) error {
	for {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)), time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgtest: port %d: %w", c.port, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
