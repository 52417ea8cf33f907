// Package apprun runs eddy apps against the embedded broker for tests of
// packages other than eddy's own (whose helpers_test.go a test of another
// package cannot import): the serdes' run tests.
package apprun

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/harness/verify"
	"github.com/eddy-streams/eddy/internal/kafka"
)

// HangGuard bounds every wait of the run tests: a guard against a hang,
// never an assertion about speed.
const HangGuard = 60 * time.Second

// StartBroker starts an in-memory embedded broker for one test.
func StartBroker(t testing.TB) string {
	t.Helper()
	b, err := kafka.StartBroker(kafka.BrokerConfig{Addr: "127.0.0.1:0", DefaultPartitions: 4})
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(b.Close)
	return b.Addr()
}

// Client is a plain client of the broker at addr.
func Client(t testing.TB, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return cl
}

// CreateTopics creates each topic with the given partition count.
func CreateTopics(t testing.TB, addr string, partitions int32, topics ...string) {
	t.Helper()
	cl := Client(t, addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), HangGuard)
	defer cancel()
	var specs []kafka.TopicSpec
	for _, name := range topics {
		specs = append(specs, kafka.TopicSpec{Name: name, Partitions: partitions})
	}
	if err := kafka.CreateTopics(ctx, cl, specs...); err != nil {
		t.Fatalf("create topics %v: %v", topics, err)
	}
}

// Produce writes recs to topic synchronously, in order.
func Produce(t *testing.T, addr, topic string, recs ...*kgo.Record) {
	t.Helper()
	cl := Client(t, addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), HangGuard)
	defer cancel()
	for _, r := range recs {
		r.Topic = topic
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// Config is the Config of one test app: its own id and state directory,
// its warnings in the test log.
func Config(t *testing.T, addr, appID string) eddy.Config {
	return eddy.Config{
		AppID:    appID,
		Brokers:  []string{addr},
		StateDir: t.TempDir(),
		Logger:   slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

// testLog writes an app's log lines to the test log: run's cleanup waits
// for Run to return, so none comes after the test completed.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// Running is an eddy.Run in a goroutine.
type Running struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error // set before done is closed
}

// Run starts eddy.Run in a goroutine; the test's cleanup stops it.
func Run(t *testing.T, topo *eddy.Topology, cfg eddy.Config) *Running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = eddy.Run(ctx, topo, cfg)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(HangGuard):
			t.Errorf("eddy.Run did not return within %v of its context's cancellation", HangGuard)
		}
	})
	return r
}

// Stop cancels the app and returns Run's result.
func (r *Running) Stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	return r.Wait(t)
}

// Wait waits for Run to return by itself and returns its result.
func (r *Running) Wait(t *testing.T) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(HangGuard):
		t.Fatalf("eddy.Run did not return within %v", HangGuard)
		return nil
	}
}

// WaitRecords polls topic until it holds at least n committed records. It
// fails the test at once if app (which may be nil) stopped, and after the
// hang guard.
func WaitRecords(t *testing.T, addr, topic string, n int, app *Running) {
	t.Helper()
	deadline := time.Now().Add(HangGuard)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		recs, err := verify.ReadAll(ctx, []string{addr}, topic)
		cancel()
		if err == nil && len(recs) >= n {
			return
		}
		if app != nil {
			select {
			case <-app.done:
				t.Fatalf("eddy.Run returned (err: %v) while %s held %d of %d records", app.err, topic, len(recs), n)
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d records after %v, want %d (last read error: %v)", topic, len(recs), HangGuard, n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ReadAll reads every committed record of topic (read_committed).
func ReadAll(t *testing.T, addr, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), HangGuard)
	defer cancel()
	recs, err := verify.ReadAll(ctx, []string{addr}, topic)
	if err != nil {
		t.Fatalf("read %s: %v", topic, err)
	}
	return recs
}

// Header returns the value of r's header key ("" if none).
func Header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
