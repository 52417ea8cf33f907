package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/harness/verify"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/internal/testutil"
)

// Bad flags are reported together, each naming the flag and the fix,
// before anything connects.
func TestMainFlagErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no state dir", nil, []string{"--state-dir is required", "pass --state-dir DIR"}},
		{"unknown flag", []string{"--state-dir", dir, "--windw", "1s"}, []string{"-windw", "see -h"}},
		{"bad duration", []string{"--state-dir", dir, "--window", "ten"}, []string{"-window", "see -h"}},
		{"zero window", []string{"--state-dir", dir, "--window", "0s"}, []string{"--window 0s", "at least 1ms"}},
		{"sub-millisecond window", []string{"--state-dir", dir, "--window", "1500us"}, []string{"--window 1.5ms", "whole number of milliseconds"}},
		{"negative grace", []string{"--state-dir", dir, "--grace", "-1s"}, []string{"--grace -1s", "zero or a whole number"}},
		{"same topics", []string{"--state-dir", dir, "--output", "payments"}, []string{"three different topics"}},
		{"several", []string{"--window", "0s", "--grace", "-1s", "--log-level", "loud", "--log-format", "xml", "--partitions", "0", "--commit-interval", "0s", "extra"},
			[]string{"--state-dir is required", "--window 0s", "--grace -1s", `--log-level "loud"`, `--log-format "xml"`, "--partitions 0", "--commit-interval 0s", `unexpected argument "extra"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			// An unreachable broker: had validation passed, Main would
			// wait for it until the context ends.
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			err := Main(ctx, append([]string{"--brokers", "127.0.0.1:1"}, tc.args...), &stderr)
			if err == nil {
				t.Fatal("Main accepted bad flags")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	var stderr bytes.Buffer
	if err := Main(t.Context(), []string{"-h"}, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, f := range []string{"-brokers", "-input", "-output", "-state-dir", "-app-id", "-window", "-grace", "-late-topic", "-commit-interval", "-log-level", "-log-format", "-http"} {
		if !strings.Contains(stderr.String(), f) {
			t.Errorf("usage lacks %s", f)
		}
	}
}

func produce(t *testing.T, addr string, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("payments"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func payment(id, account string, amount, ts int64) *kgo.Record {
	return &kgo.Record{Key: []byte(account), Value: paymentJSON(id, account, amount, ts), Timestamp: time.UnixMilli(ts)}
}

// waitFor reads topic until it holds n committed records.
func waitFor(t *testing.T, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		recs, err := verify.ReadAll(t.Context(), []string{addr}, topic)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) >= n {
			return recs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d records after 60s, want %d", topic, len(recs), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestMainAgainstBroker runs the command against the embedded broker: it
// creates its topics, emits each closed window once (not the open ones),
// sends late and malformed payments where they belong, and after a clean
// restart neither emits a window again nor forgets one that is still open.
func TestMainAgainstBroker(t *testing.T) {
	b, err := kafka.StartBroker(kafka.BrokerConfig{Addr: "127.0.0.1:0", DefaultPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	dir := t.TempDir()
	run := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		var log testutil.LogBuffer
		go func() {
			done <- Main(ctx, []string{"--brokers", b.Addr(), "--state-dir", dir, "--partitions", "1",
				"--window", "1s", "--grace", "500ms", "--late-topic", "late"}, &log)
		}()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("windowed: %v\n%s", err, log.String())
			}
		}
	}
	stop := run()
	const t0 = 1_700_000_000_000 // a multiple of 1s: windows start at t0 + k s
	produce(t, b.Addr(),
		payment("p1", "a", 5, t0+100), payment("p2", "b", 7, t0+900), payment("p3", "a", 1, t0+1200),
		payment("p4", "a", 2, t0+800), // out of order, within grace
		&kgo.Record{Key: []byte("a"), Value: []byte("{oops"), Timestamp: time.UnixMilli(t0 + 1300)},
		payment("p5", "b", 3, t0+1500), // closes [t0, t0+1s)
		payment("p6", "a", 9, t0+300),  // late
	)
	waitFor(t, b.Addr(), "totals", 2)
	stop()
	// After a clean stop the open window [t0+1s, t0+2s) and the emitted
	// watermark are in the state: the restart must close the window with
	// what it had, and emit nothing twice.
	stop = run()
	defer stop()
	produce(t, b.Addr(), payment("p7", "a", 4, t0+1999), payment("p8", "c", 1, t0+2500))
	waitFor(t, b.Addr(), "totals", 4)
	time.Sleep(500 * time.Millisecond) // room for a wrong extra record to show up
	got, err := verify.ReadAll(t.Context(), []string{b.Addr()}, "totals")
	if err != nil {
		t.Fatal(err)
	}
	payments, err := verify.ReadAll(t.Context(), []string{b.Addr()}, "payments")
	if err != nil {
		t.Fatal(err)
	}
	late, err := verify.ReadAll(t.Context(), []string{b.Addr()}, "late")
	if err != nil {
		t.Fatal(err)
	}
	rep := verify.Windowed(payments, time.Second, 500*time.Millisecond).Compare(got)
	rep.CheckLate(late)
	t.Log(rep)
	// Hand-computed: [t0,t0+1s) a: p1+p4 = 2 payments, 7; b: p2, 7.
	// [t0+1s,t0+2s) a: p3+p7 = 2, 5; b: p5, 3; closed by p8 at t0+2.5s.
	if !rep.OK() || rep.Expected != 4 || rep.Outputs != 4 || rep.Late != 1 || rep.LateOutputs != 1 {
		t.Fatalf("%v\n%q", rep, rep.Examples)
	}
	want := map[string]Total{
		"a@0": {"a", t0, t0 + 1000, 2, 7}, "b@0": {"b", t0, t0 + 1000, 1, 7},
		"a@1": {"a", t0 + 1000, t0 + 2000, 2, 5}, "b@1": {"b", t0 + 1000, t0 + 2000, 1, 3},
	}
	for _, r := range got {
		var v Total
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatal(err)
		}
		k := fmt.Sprintf("%s@%d", r.Key, (v.Start-t0)/1000)
		if want[k] != v {
			t.Errorf("%s: got %+v, want %+v", k, v, want[k])
		}
	}
	// A payment keyed c for account a is a process error, which Main
	// dead-letters too. (Produced after the reference was computed: the
	// verifier knows only the decode rules.)
	mismatch := payment("p9", "a", 1, t0+2600)
	mismatch.Key = []byte("c")
	produce(t, b.Addr(), mismatch)
	dlq := waitFor(t, b.Addr(), eddy.DeadLetterTopic("payments"), 2)
	if len(dlq) != 2 || string(dlq[0].Value) != "{oops" || string(dlq[1].Key) != "c" || header(dlq[1], eddy.HeaderDLQStage) != "process" {
		t.Errorf("dead letters %v, want the malformed payment, then p9 (stage process)", dlq)
	}
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
