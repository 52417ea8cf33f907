package pipeline

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/internal/testutil"
)

func startBroker(t testing.TB) *kafka.Broker {
	t.Helper()
	b, err := kafka.StartBroker(kafka.BrokerConfig{Addr: "127.0.0.1:0", DefaultPartitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func produce(t *testing.T, addr, topic string, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range recs {
		r.Topic = topic
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// consume reads n records of topic with read_committed.
func consume(t *testing.T, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		f := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records from %s: %v", len(out), n, topic, err)
		}
		out = append(out, f.Records()...)
	}
	return out
}

func payment(id, account string, amount int64) *kgo.Record {
	v, _ := json.Marshal(Payment{ID: id, Account: account, Amount: amount})
	return &kgo.Record{Key: []byte(account), Value: v}
}

func runLedger(t *testing.T, addr, dir string, log io.Writer, flags ...string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Main(ctx, append([]string{"--brokers", addr, "--state-dir", dir, "--log-level", "info"}, flags...), log)
	}()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ledger: %v", err)
		}
	}
}

func TestLedgerBalancesAndDeadLetters(t *testing.T) {
	b := startBroker(t)
	dir := t.TempDir()
	stop := runLedger(t, b.Addr(), dir, io.Discard)
	produce(t, b.Addr(), "payments",
		payment("p1", "a", 10), payment("p2", "b", 5), payment("p3", "a", -3),
		&kgo.Record{Key: []byte("a"), Value: []byte("{not json")},
		&kgo.Record{Key: []byte("a"), Value: []byte(`{"id":"p9","account":"a"}`)},
		&kgo.Record{Key: []byte("b"), Value: []byte(`{"id":"p8","account":"a","amount":2}`)},
		payment("p4", "a", 1))
	got := map[string]Balance{}
	for _, r := range consume(t, b.Addr(), "balances", 4) {
		var bal Balance
		if err := json.Unmarshal(r.Value, &bal); err != nil {
			t.Fatal(err)
		}
		got[bal.ID] = bal
	}
	want := map[string]Balance{
		"p1": {"p1", "a", 10, 1, 10},
		"p2": {"p2", "b", 5, 1, 5},
		"p3": {"p3", "a", -3, 2, 7},
		"p4": {"p4", "a", 1, 3, 8},
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: got %+v, want %+v", id, got[id], w)
		}
	}
	// Two malformed payments (stage decode) and one keyed b for account a
	// (stage process, which Main dead-letters too).
	dlq := consume(t, b.Addr(), eddy.DeadLetterTopic("payments"), 3)
	var stages []string
	for _, r := range dlq {
		var reason, stage string
		for _, h := range r.Headers {
			switch h.Key {
			case eddy.HeaderDLQError:
				reason = string(h.Value)
			case eddy.HeaderDLQStage:
				stage = string(h.Value)
			}
		}
		if reason == "" {
			t.Errorf("dead letter %q has no error header", r.Value)
		}
		stages = append(stages, stage)
		t.Logf("dead letter %q: %s: %s", r.Value, stage, reason)
	}
	slices.Sort(stages) // the partitions of keys a and b come in any order
	if want := []string{"decode", "decode", "process"}; !slices.Equal(stages, want) {
		t.Errorf("dead letters' stages %q, want %q", stages, want)
	}
	stop()

	// A restart after a clean stop continues the balances from the local
	// state: it replays nothing from the changelog and processes nothing twice.
	var log testutil.LogBuffer
	stop = runLedger(t, b.Addr(), dir, &log)
	defer stop()
	produce(t, b.Addr(), "payments", payment("p5", "a", 100))
	recs := consume(t, b.Addr(), "balances", 5)
	var last Balance
	for _, r := range recs {
		var bal Balance
		_ = json.Unmarshal(r.Value, &bal)
		if bal.ID == "p5" {
			last = bal
		}
	}
	if want := (Balance{"p5", "a", 100, 4, 108}); last != want {
		t.Fatalf("after restart: got %+v, want %+v (records: %d)", last, want, len(recs))
	}
	if len(recs) != 5 {
		t.Fatalf("got %d balance records, want 5", len(recs))
	}
	if strings.Contains(log.String(), "restoring state from changelog") {
		t.Fatalf("a restart after a clean stop replayed the changelog:\n%s", log.String())
	}
	if !strings.Contains(log.String(), "task assigned") {
		t.Fatalf("the restarted ledger logged no task assignment:\n%s", log.String())
	}
}

// TestLedgerCheckpointFlags: with --checkpoint-url the ledger checkpoints
// its tasks at a clean stop, and a ledger on an empty state directory
// restores from those checkpoints and continues the balances.
func TestLedgerCheckpointFlags(t *testing.T) {
	b := startBroker(t)
	store := t.TempDir()
	flags := []string{"--checkpoint-url", "file://" + filepath.ToSlash(store), "--checkpoint-interval", "0"}
	dir := t.TempDir()
	stop := runLedger(t, b.Addr(), dir, io.Discard, flags...)
	produce(t, b.Addr(), "payments", payment("p1", "a", 10), payment("p2", "a", 5))
	consume(t, b.Addr(), "balances", 2)
	stop()
	// Both payments are of one account: one task has state, and only
	// its database is worth a checkpoint.
	manifests, _ := filepath.Glob(filepath.Join(store, "ledger", "*", "manifests", "*.json"))
	if len(manifests) != 1 {
		t.Fatalf("checkpoints after a clean stop: %v; want one, of the task with state", manifests)
	}

	// The machine loses its disk. (The same directory, so the same
	// instance id: a new one would wait for the old member's session to
	// expire.)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	var log testutil.LogBuffer
	stop = runLedger(t, b.Addr(), dir, &log, flags...)
	defer stop()
	produce(t, b.Addr(), "payments", payment("p3", "a", 1))
	var last Balance
	for _, r := range consume(t, b.Addr(), "balances", 3) {
		var bal Balance
		_ = json.Unmarshal(r.Value, &bal)
		if bal.ID == "p3" {
			last = bal
		}
	}
	if want := (Balance{"p3", "a", 1, 3, 16}); last != want {
		t.Fatalf("after a restore from the checkpoint: got %+v, want %+v", last, want)
	}
	if !strings.Contains(log.String(), "source=checkpoint") || strings.Contains(log.String(), "not usable") {
		t.Fatalf("the new ledger did not restore from the checkpoint, or found one not usable:\n%s", log.String())
	}
}
