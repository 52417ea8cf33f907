package eddy_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/testutil/apprun"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/failpoint"
	"github.com/eddy-streams/eddy/internal/harness/verify"
	"github.com/eddy-streams/eddy/serde"
)

// hangGuard bounds every wait of these tests: it is a guard against a hang,
// never an assertion about speed.
const hangGuard = apprun.HangGuard

// startBroker starts an in-memory embedded broker for one test.
func startBroker(t *testing.T) string { return apprun.StartBroker(t) }

func client(t *testing.T, addr string) *kgo.Client { return apprun.Client(t, addr) }

// createTopics creates each topic with the given partition count.
func createTopics(t *testing.T, addr string, partitions int32, topics ...string) {
	apprun.CreateTopics(t, addr, partitions, topics...)
}

// produce writes recs to topic synchronously and returns them with their
// partitions and offsets filled in.
func produce(t *testing.T, addr, topic string, recs ...*kgo.Record) []*kgo.Record {
	t.Helper()
	cl := client(t, addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for _, r := range recs {
		r.Topic = topic
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	return recs
}

// rec is a record with raw key and value bytes.
func rec(key, value []byte) *kgo.Record { return &kgo.Record{Key: key, Value: value} }

// srec is a record with a string key and value.
func srec(key, value string) *kgo.Record { return rec([]byte(key), []byte(value)) }

// i64 encodes v as serde.Int64 does.
func i64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// running is an eddy.Run in a goroutine.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error // set before done is closed
}

// testLogger sends the app's warnings and errors to the test log, until the
// test ends.
func testLogger(t *testing.T) *slog.Logger {
	w := &testLogWriter{t: t}
	t.Cleanup(w.close)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testLogWriter struct {
	mu     sync.Mutex
	t      *testing.T
	closed bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testLogWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

var unsafeTopicChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// appID derives an application id from the test name.
func appID(t *testing.T) string {
	return strings.ToLower(unsafeTopicChars.ReplaceAllString(t.Name(), "-"))
}

// config returns a Config for a test: its own app id and state directory.
func config(t *testing.T, addr string) eddy.Config {
	return eddy.Config{
		AppID:    appID(t),
		Brokers:  []string{addr},
		StateDir: t.TempDir(),
		Logger:   testLogger(t),
	}
}

// run starts eddy.Run in a goroutine; the test's cleanup stops it.
func run(t *testing.T, topo *eddy.Topology, cfg eddy.Config) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = eddy.Run(ctx, topo, cfg)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(hangGuard):
			t.Errorf("eddy.Run did not return within %v of its context's cancellation", hangGuard)
		}
	})
	return r
}

// stop cancels the app and returns Run's result.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	return r.wait(t)
}

// wait waits for Run to return by itself.
func (r *running) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(hangGuard):
		t.Fatalf("eddy.Run did not return within %v", hangGuard)
		return nil
	}
}

// exited reports whether Run returned, and its error; nil runs nothing.
func (r *running) exited() (bool, error) {
	if r == nil { // an app run as a process
		return false, nil
	}
	select {
	case <-r.done:
		return true, r.err
	default:
		return false, nil
	}
}

// waitRecords polls topic until it holds at least n committed records and
// returns them (partition by partition, in offset order). It fails the test
// at once if app (which may be nil) stopped, and after the hang guard.
func waitRecords(t *testing.T, addr, topic string, n int, app *running) []*kgo.Record {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	var (
		recs    []*kgo.Record
		lastErr error
	)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		got, err := verify.ReadAll(ctx, []string{addr}, topic)
		cancel()
		if err == nil {
			recs = got
			if len(recs) >= n {
				return recs
			}
		}
		lastErr = err
		if app != nil {
			if done, err := app.exited(); done {
				t.Fatalf("eddy.Run returned (err: %v) while %s held %d of %d records", err, topic, len(recs), n)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d records after %v, want %d (last read error: %v)", topic, len(recs), hangGuard, n, lastErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kv is a decoded record, comparable.
type kv[K comparable, V comparable] struct {
	Key   K
	Value V
}

func (p kv[K, V]) String() string { return fmt.Sprintf("%v=%v", p.Key, p.Value) }

// decode decodes records with the serdes.
func decode[K, V comparable](t *testing.T, recs []*kgo.Record, keys serde.Serde[K], values serde.Serde[V]) []kv[K, V] {
	t.Helper()
	out := make([]kv[K, V], 0, len(recs))
	for _, r := range recs {
		k, err := keys.Deserialize(r.Key)
		if err != nil {
			t.Fatalf("%s/%d@%d: key %q: %v", r.Topic, r.Partition, r.Offset, r.Key, err)
		}
		v, err := values.Deserialize(r.Value)
		if err != nil {
			t.Fatalf("%s/%d@%d: value %q: %v", r.Topic, r.Partition, r.Offset, r.Value, err)
		}
		out = append(out, kv[K, V]{k, v})
	}
	return out
}

// byKey groups values by key, keeping their order.
func byKey[K, V comparable](kvs []kv[K, V]) map[K][]V {
	m := make(map[K][]V)
	for _, p := range kvs {
		m[p.Key] = append(m[p.Key], p.Value)
	}
	return m
}

// changelogTopic is the changelog topic of a store, as documented on
// eddy.NewKeyValueStoreSpec.
func changelogTopic(appID, store string) string { return appID + "-" + store + "-changelog" }

// changelogState reads a store's changelog and returns, per raw key, the
// newest value (nil for a tombstone), skipping the runtime's own offsets
// records (key "\x00eddy.offsets" with an "eddy.offsets" header).
func changelogState(t *testing.T, addr, topic string) map[string][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	recs, err := verify.ReadAll(ctx, []string{addr}, topic)
	if err != nil {
		t.Fatalf("read changelog %s: %v", topic, err)
	}
	out := make(map[string][]byte)
	for _, r := range recs {
		if isOffsetsRecord(r) {
			continue
		}
		out[string(r.Key)] = r.Value
	}
	return out
}

func isOffsetsRecord(r *kgo.Record) bool {
	for _, h := range r.Headers {
		if h.Key == "eddy.offsets" {
			return true
		}
	}
	return false
}

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// errLacks returns the substrings of want that err's message lacks.
func errLacks(err error, want ...string) []string {
	var missing []string
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			missing = append(missing, w)
		}
	}
	return missing
}

var errUnknownCommand = errors.New("unknown command")

// waitConsumed waits until group has committed n records of topic (the
// sum of its committed offsets, from offset 0).
func waitConsumed(t *testing.T, addr, group, topic string, n int, app *running) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for deadline := time.Now().Add(hangGuard); ; {
		sum := consumed(t, cl, group, topic)
		if sum >= int64(n) {
			return
		}
		if done, err := app.exited(); done {
			t.Fatalf("the app stopped before consuming %s: %v", topic, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records of %s consumed after %v", sum, n, topic, hangGuard)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// consumed is the sum of group's committed offsets on topic's partitions
// (0 when they cannot be fetched).
func consumed(t *testing.T, cl *kgo.Client, group, topic string) int64 {
	var sum int64
	if offs, err := kadm.NewClient(cl).FetchOffsets(t.Context(), group); err == nil {
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Topic == topic && o.Err == nil {
				sum += o.At
			}
		})
	}
	return sum
}

// The environment of a process test's child app (childApp), set by
// runKilledThenLive.
const (
	childBrokers = "EDDY_TEST_CHILD_BROKERS"
	childState   = "EDDY_TEST_CHILD_STATE"
)

// childApp is the body of a process test's child, a test that runs this
// test binary's app in its own process until a failpoint SIGKILLs it (or
// the parent test kills the last, unarmed run). Run alone it skips.
func childApp(t *testing.T, appID string, topo func() *eddy.Topology, commitRecords int) {
	addr := os.Getenv(childBrokers)
	if addr == "" {
		t.Skip("the child process of a process test (runKilledThenLive)")
	}
	err := eddy.Run(context.Background(), topo(), eddy.Config{
		AppID: appID, Brokers: []string{addr}, StateDir: os.Getenv(childState), InstanceID: "child",
		// Many transactions, so that the failpoints hit mid-stream.
		CommitRecords: commitRecords,
	})
	t.Fatalf("eddy.Run returned: %v", err)
}

// runKilledThenLive runs the test named child of this test binary (a
// childApp) against the broker at addr: once for each failpoint arm in
// kills, each run ending by that arm's SIGKILL, then once unarmed, left
// running for the test (its cleanup kills it, and shows its output if the
// test failed). Every run uses the same state directory.
func runKilledThenLive(t *testing.T, child string, kills []string, addr string) {
	t.Helper()
	runKilledThenLiveWith(t, child, kills, addr, nil)
}

// runKilledThenLiveWith is runKilledThenLive with during, if not nil,
// called with each run's index while that run goes on (to restart the
// broker under it, say): a killed run's SIGKILL is awaited after during
// returns; the live run is len(kills).
func runKilledThenLiveWith(t *testing.T, child string, kills []string, addr string, during func(run int)) {
	t.Helper()
	state := t.TempDir()
	command := func(kill string) (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.count=1", "-test.timeout=5m")
		cmd.Env = append(os.Environ(), childBrokers+"="+addr, childState+"="+state, failpoint.Env+"="+kill)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		return cmd, &out
	}
	for i, kill := range kills {
		cmd, out := command(kill)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if during != nil {
			during(i)
		}
		started := time.Now()
		err := cmd.Wait()
		t.Logf("run %d, armed with %s, killed after %v", i, kill, time.Since(started).Round(time.Millisecond))
		if !killed(err) {
			t.Fatalf("the app armed with %s ended with %v, not by its SIGKILL; its output:\n%s", kill, err, out)
		}
	}
	cmd, out := command("")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if during != nil {
		during(len(kills))
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("the last run's output:\n%s", out)
		}
	})
}

// killed reports whether err is a process's end by SIGKILL.
func killed(err error) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}
