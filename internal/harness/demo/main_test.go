package demo

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/testutil"
)

// eddyBin is the eddy binary the crash tests run as broker and ledger
// processes, built once by TestMain.
var eddyBin string

// TestMain builds eddyBin. The tests run processes for half a minute to a
// minute and a half each; those that own their broker and spend their
// time waiting on the group (session timeouts, rebalances: the zombie,
// scale-out and failover tests) or that split into independent runs (a
// failpoint each, a format each) call t.Parallel, so that go test runs
// them two at a time on CI's two cores (-parallel defaults to GOMAXPROCS)
// and the package stays within CI's time. None has a timing threshold:
// under load a run only takes longer.
func TestMain(m *testing.M) { testutil.MainWithEddy(m, "eddy-test-bin-", &eddyBin) }

// brokerProc is `eddy broker` running as a child process.
type brokerProc struct {
	t     *testing.T
	addr  string
	dir   string
	args  []string // extra flags (TLS, SASL)
	log   *os.File
	child *Child
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startBrokerProc(t *testing.T, args ...string) *brokerProc {
	t.Helper()
	dir := t.TempDir()
	log, err := os.Create(filepath.Join(dir, "broker.log"))
	if err != nil {
		t.Fatal(err)
	}
	b := &brokerProc{t: t, addr: freeAddr(t), dir: filepath.Join(dir, "data"), args: args, log: log}
	b.start()
	t.Cleanup(func() {
		if b.child != nil {
			b.child.Kill()
		}
		log.Close()
	})
	return b
}

func (b *brokerProc) start() {
	b.t.Helper()
	ready := make(chan time.Time, 1)
	argv := append([]string{eddyBin, "broker", "--addr", b.addr, "--data-dir", b.dir, "--log-level", "warn"}, b.args...)
	c, err := StartChild(argv, b.log, "listening on", ready)
	if err != nil {
		b.t.Fatal(err)
	}
	select {
	case <-ready:
	case <-c.Done():
		b.t.Fatalf("broker exited: %v (log %s)", c.Err(), b.log.Name())
	case <-time.After(30 * time.Second):
		b.t.Fatalf("broker not ready within 30s (log %s)", b.log.Name())
	}
	b.child = c
}

// restart stops the broker with SIGTERM (a clean stop) and starts it again
// on the same address and data directory.
func (b *brokerProc) restart() error {
	if err := b.child.Stop(30 * time.Second); err != nil {
		return fmt.Errorf("stop broker: %w", err)
	}
	b.start()
	return nil
}

// testWriter sends progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}
