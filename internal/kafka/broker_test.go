package kafka

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// hangGuard is how long a test may wait for anything; it is not a
// timing threshold, only what turns a hang into a failure.
const hangGuard = 30 * time.Second

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

func startTestBroker(t *testing.T, cfg BrokerConfig) *Broker {
	t.Helper()
	b, err := StartBroker(cfg)
	if err != nil {
		t.Fatalf("StartBroker: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

func newTestClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produce writes values as records of a single-partition topic and waits
// for their acknowledgement.
func produce(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, values ...string) {
	t.Helper()
	for _, v := range values {
		r := &kgo.Record{Topic: topic, Key: []byte(v), Value: []byte(v)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %q to %s: %v", v, topic, err)
		}
	}
}

// readUntil consumes a single-partition topic from the start, with the
// given isolation level, up to and including the record whose value is
// last, and returns the values in offset order. Tests end their topics
// with a non-transactional last record: reading up to it is how they
// know every earlier transaction was decided and read, without waiting
// for a quiet period.
func readUntil(ctx context.Context, t *testing.T, addr, topic string, iso kgo.IsolationLevel, last string) []string {
	t.Helper()
	cl := newTestClient(t, addr,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso),
	)
	defer cl.Close()
	var got []string
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s: %v; read so far: %q", topic, err, got)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("reading %s partition %d: %v", e.Topic, e.Partition, e.Err)
		}
		for _, r := range fs.Records() {
			got = append(got, string(r.Value))
			if string(r.Value) == last {
				return got
			}
		}
	}
}

func assertValues(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got  %q\n want %q", what, got, want)
	}
}

// TestBrokerCleanRestartKeepsEverything stops a broker cleanly and starts
// another on the same data dir and address: records and their
// transaction outcomes, group offsets, topic configs and transactional
// producer state must all come back.
func TestBrokerCleanRestartKeepsEverything(t *testing.T) {
	ctx := testContext(t)
	dir := t.TempDir()
	b := startTestBroker(t, BrokerConfig{DataDir: dir, SyncWrites: true})
	addr := b.Addr()

	admin := newTestClient(t, addr)
	if err := CreateTopics(ctx, admin,
		TopicSpec{Name: "events", Partitions: 1},
		TopicSpec{Name: "table", Partitions: 2, Compacted: true},
	); err != nil {
		t.Fatal(err)
	}

	txn := newTestClient(t, addr, kgo.TransactionalID("restart-tx"))
	runTxn := func(commit kgo.TransactionEndTry, values ...string) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produce(ctx, t, txn, "events", values...)
		if err := txn.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("EndTransaction(%v): %v", commit, err)
		}
	}
	runTxn(kgo.TryCommit, "c1", "c2", "c3")
	runTxn(kgo.TryAbort, "a1", "a2")
	pid, epoch, err := txn.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	txn.Close()

	idem := newTestClient(t, addr) // idempotent by default
	produce(ctx, t, idem, "events", "i1", "i2", "end")
	idem.Close()

	adm := kadm.NewClient(admin)
	offsets := make(kadm.Offsets)
	offsets.Add(kadm.Offset{Topic: "events", Partition: 0, At: 3, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "restart-group", offsets); err != nil {
		t.Fatalf("commit group offsets: %v", err)
	}
	admin.Close()

	b.Close()
	b = startTestBroker(t, BrokerConfig{Addr: addr, DataDir: dir, SyncWrites: true})
	if b.Addr() != addr {
		t.Fatalf("restarted broker listens on %s, want %s", b.Addr(), addr)
	}

	assertValues(t, "read_committed after restart",
		readUntil(ctx, t, addr, "events", kgo.ReadCommitted(), "end"),
		[]string{"c1", "c2", "c3", "i1", "i2", "end"})
	assertValues(t, "read_uncommitted after restart",
		readUntil(ctx, t, addr, "events", kgo.ReadUncommitted(), "end"),
		[]string{"c1", "c2", "c3", "a1", "a2", "i1", "i2", "end"})

	cl := newTestClient(t, addr)
	adm = kadm.NewClient(cl)
	fetched, err := adm.FetchOffsets(ctx, "restart-group")
	if err != nil {
		t.Fatalf("fetch group offsets: %v", err)
	}
	if o, ok := fetched.Lookup("events", 0); !ok || o.Err != nil || o.At != 3 {
		t.Fatalf("group offset of events/0 after restart = %+v (found %v), want 3", o, ok)
	}

	cfgs, err := adm.DescribeTopicConfigs(ctx, "table")
	if err != nil {
		t.Fatal(err)
	}
	if got := topicConfig(t, cfgs, "table", "cleanup.policy"); got != "compact" {
		t.Fatalf("cleanup.policy of table after restart = %q, want compact", got)
	}
	counts, err := Partitions(ctx, cl, "events", "table")
	if err != nil {
		t.Fatal(err)
	}
	if counts["events"] != 1 || counts["table"] != 2 {
		t.Fatalf("partitions after restart = %v, want events:1 table:2", counts)
	}

	// The same transactional id resumes: same producer id, a newer epoch
	// (which is what fences the pre-restart instance), and commits.
	txn = newTestClient(t, addr, kgo.TransactionalID("restart-tx"))
	pid2, epoch2, err := txn.ProducerID(ctx)
	if err != nil {
		t.Fatalf("init producer id after restart: %v", err)
	}
	if pid2 != pid || epoch2 <= epoch {
		t.Fatalf("after restart producer id/epoch = %d/%d, want %d/>%d", pid2, epoch2, pid, epoch)
	}
	runTxn(kgo.TryCommit, "c4")
	produce(ctx, t, newTestClient(t, addr), "events", "end2")
	assertValues(t, "read_committed after a post-restart transaction",
		readUntil(ctx, t, addr, "events", kgo.ReadCommitted(), "end2"),
		[]string{"c1", "c2", "c3", "i1", "i2", "end", "c4", "end2"})
}

func topicConfig(t *testing.T, cfgs kadm.ResourceConfigs, topic, key string) string {
	t.Helper()
	rc, err := cfgs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("configs of %s: %v %v", topic, err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == key && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}

// Environment of the zombie producer child process.
const (
	zombieAddrEnv  = "EDDY_KAFKA_TEST_ZOMBIE_ADDR"
	zombieTopicEnv = "EDDY_KAFKA_TEST_ZOMBIE_TOPIC"
	zombieTxIDEnv  = "EDDY_KAFKA_TEST_ZOMBIE_TXID"
)

var zombieValues = []string{"A-0", "A-1", "A-2", "A-3", "A-4"}

// TestHelperProcessZombieProducer is not a test: it is the producer that
// TestBrokerFencesKilledProducer re-executes the test binary as, so that
// the producer dies by SIGKILL, with its connections torn down by the
// kernel and no chance to end its transaction.
func TestHelperProcessZombieProducer(t *testing.T) {
	addr := os.Getenv(zombieAddrEnv)
	if addr == "" {
		t.Skip("helper process of TestBrokerFencesKilledProducer")
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	die := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID(os.Getenv(zombieTxIDEnv)))
	if err != nil {
		die(err)
	}
	if err := cl.BeginTransaction(); err != nil {
		die(err)
	}
	for _, v := range zombieValues {
		r := &kgo.Record{Topic: os.Getenv(zombieTopicEnv), Value: []byte(v)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			die(err)
		}
	}
	fmt.Println("READY")
	// Block until killed. Reading stdin, which the parent holds open,
	// instead of blocking forever means a parent that dies first does
	// not leave us behind.
	io.Copy(io.Discard, os.Stdin)
	os.Exit(1)
}

// startZombie runs the zombie producer child and returns once its
// transaction's records are acknowledged, with the child still alive.
func startZombie(ctx context.Context, t *testing.T, addr, topic, txid string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcessZombieProducer$")
	cmd.Env = append(os.Environ(), zombieAddrEnv+"="+addr, zombieTopicEnv+"="+topic, zombieTxIDEnv+"="+txid)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if sc.Text() == "READY" {
			return cmd
		}
	}
	cmd.Wait()
	t.Fatalf("zombie producer exited before READY: %v\nstderr:\n%s", sc.Err(), stderr.String())
	return nil
}

// TestBrokerFencesKilledProducer is the regression test DESIGN §6 asks
// for: older kfake snapshots committed a SIGKILLed producer's open
// transaction together with the next commit of its successor (same
// transactional id). The successor's init must abort the dead
// producer's records, with or without a broker restart in between.
func TestBrokerFencesKilledProducer(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			ctx := testContext(t)
			dir := t.TempDir()
			b := startTestBroker(t, BrokerConfig{DataDir: dir, SyncWrites: true})
			addr := b.Addr()
			const topic, txid = "ledger", "fenced-tx"
			if err := CreateTopics(ctx, newTestClient(t, addr), TopicSpec{Name: topic, Partitions: 1}); err != nil {
				t.Fatal(err)
			}

			zombie := startZombie(ctx, t, addr, topic, txid)
			if err := zombie.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			zombie.Wait()

			if restart {
				b.Close()
				startTestBroker(t, BrokerConfig{Addr: addr, DataDir: dir, SyncWrites: true})
			}

			succ := newTestClient(t, addr, kgo.TransactionalID(txid))
			if err := succ.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			produce(ctx, t, succ, topic, "B-0", "B-1", "B-2")
			if err := succ.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatalf("successor commit: %v", err)
			}
			produce(ctx, t, newTestClient(t, addr), topic, "end")

			assertValues(t, "read_committed",
				readUntil(ctx, t, addr, topic, kgo.ReadCommitted(), "end"),
				[]string{"B-0", "B-1", "B-2", "end"})
			// The zombie's records did reach the log; they are aborted,
			// not missing, or the test would prove nothing.
			all := readUntil(ctx, t, addr, topic, kgo.ReadUncommitted(), "end")
			for _, v := range zombieValues {
				if !slices.Contains(all, v) {
					t.Fatalf("read_uncommitted %q lacks the zombie's %q", all, v)
				}
			}
		})
	}
}

// TestBrokerSessionTimeoutBounds checks the classic-group session timeouts
// the broker accepts: from 1s (tests) to 5 min (Kafka's maximum).
func TestBrokerSessionTimeoutBounds(t *testing.T) {
	ctx := testContext(t)
	b := startTestBroker(t, BrokerConfig{})
	cl := newTestClient(t, b.Addr())
	for _, tc := range []struct {
		timeout time.Duration
		ok      bool
	}{
		{999 * time.Millisecond, false},
		{time.Second, true},
		{5 * time.Minute, true},
		{5*time.Minute + time.Millisecond, false},
	} {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group = fmt.Sprintf("session-%d", tc.timeout.Milliseconds())
		req.SessionTimeoutMillis = int32(tc.timeout.Milliseconds())
		req.RebalanceTimeoutMillis = 10000
		req.ProtocolType = "consumer"
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = "range"
		req.Protocols = append(req.Protocols, p)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("join with session timeout %v: %v", tc.timeout, err)
		}
		invalid := errors.Is(kerr.ErrorForCode(resp.ErrorCode), kerr.InvalidSessionTimeout)
		if invalid == tc.ok {
			t.Errorf("join with session timeout %v: error %v, want accepted=%v", tc.timeout, kerr.ErrorForCode(resp.ErrorCode), tc.ok)
		}
	}
}

// TestBrokerTransactionTimeoutMax checks that producers may ask for
// transaction timeouts up to Kafka's default maximum of 15 minutes, and no
// more.
func TestBrokerTransactionTimeoutMax(t *testing.T) {
	ctx := testContext(t)
	b := startTestBroker(t, BrokerConfig{})
	for _, tc := range []struct {
		timeout time.Duration
		ok      bool
	}{
		{15 * time.Minute, true},
		{15*time.Minute + time.Second, false},
	} {
		cl := newTestClient(t, b.Addr(), kgo.TransactionalID(fmt.Sprintf("tx-%v", tc.timeout)), kgo.TransactionTimeout(tc.timeout))
		_, _, err := cl.ProducerID(ctx)
		if tc.ok && err != nil {
			t.Errorf("transaction timeout %v: %v", tc.timeout, err)
		}
		if !tc.ok && !errors.Is(err, kerr.InvalidTransactionTimeout) {
			t.Errorf("transaction timeout %v: err %v, want %v", tc.timeout, err, kerr.InvalidTransactionTimeout)
		}
		cl.Close()
	}
}

// TestBrokerAutoCreatesTopics checks Kafka's default of creating a topic on
// first use, with the configured partition count.
func TestBrokerAutoCreatesTopics(t *testing.T) {
	for _, tc := range []struct {
		cfg  int32
		want int32
	}{{0, 4}, {7, 7}} {
		t.Run(fmt.Sprint(tc.cfg), func(t *testing.T) {
			ctx := testContext(t)
			b := startTestBroker(t, BrokerConfig{DefaultPartitions: tc.cfg})
			cl := newTestClient(t, b.Addr(), kgo.AllowAutoTopicCreation())
			produce(ctx, t, cl, "auto", "x")
			counts, err := Partitions(ctx, cl, "auto")
			if err != nil {
				t.Fatal(err)
			}
			if counts["auto"] != tc.want {
				t.Fatalf("auto-created topic has %d partitions, want %d", counts["auto"], tc.want)
			}
		})
	}
}

func TestStartBrokerErrors(t *testing.T) {
	if _, err := StartBroker(BrokerConfig{DefaultPartitions: -1}); err == nil || !strings.Contains(err.Error(), "DefaultPartitions") {
		t.Errorf("negative DefaultPartitions: err %v, want one naming DefaultPartitions", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = StartBroker(BrokerConfig{Addr: ln.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Errorf("address in use: err %v, want one naming %s", err, ln.Addr())
	}
}

func TestBrokerInMemoryCloseTwice(t *testing.T) {
	b, err := StartBroker(BrokerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.Addr(), "127.0.0.1:") || strings.HasSuffix(b.Addr(), ":0") {
		t.Errorf("Addr() = %q, want a resolved loopback port", b.Addr())
	}
	if b.Cluster() == nil {
		t.Error("Cluster() = nil")
	}
	b.Close()
	b.Close()
}

// recordingHandler keeps the records it is given.
type recordingHandler struct {
	level   slog.Level
	records *[]slog.Record
}

func (h recordingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h recordingHandler) Handle(_ context.Context, r slog.Record) error {
	*h.records = append(*h.records, r)
	return nil
}
func (h recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordingHandler) WithGroup(string) slog.Handler      { return h }

func TestSlogAdapter(t *testing.T) {
	var recs []slog.Record
	a := slogAdapter{slog.New(recordingHandler{slog.LevelInfo, &recs})}
	a.Logf(kfake.LogLevelWarn, "txn %s timed out after %dms", "x", 40)
	a.Logf(kfake.LogLevelDebug, "filtered")
	a.Logf(kfake.LogLevelNone, "never")
	a.Logf(kfake.LogLevelError, "broken")
	if len(recs) != 2 {
		t.Fatalf("got %d records, want 2", len(recs))
	}
	if recs[0].Level != slog.LevelWarn || recs[0].Message != "txn x timed out after 40ms" {
		t.Errorf("first record = %v %q", recs[0].Level, recs[0].Message)
	}
	if recs[1].Level != slog.LevelError {
		t.Errorf("second record level = %v, want ERROR", recs[1].Level)
	}
	slogAdapter{}.Logf(kfake.LogLevelError, "nil logger discards")
}
