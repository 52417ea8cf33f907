package protobuf_test

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

// The helpers of the run tests: they run apps as the root package's run
// tests do (helpers_test.go there, which a test of another package cannot
// import).

// hangGuard bounds every wait of the run tests: a guard against a hang,
// never an assertion about speed.
const hangGuard = 60 * time.Second

// startBroker starts an in-memory embedded broker for one test.
func startBroker(t *testing.T) string {
	t.Helper()
	b, err := kafka.StartBroker(kafka.BrokerConfig{Addr: "127.0.0.1:0", DefaultPartitions: 4})
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(b.Close)
	return b.Addr()
}

func kafkaClient(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return cl
}

// createTopics creates each topic with the given partition count.
func createTopics(t *testing.T, addr string, partitions int32, topics ...string) {
	t.Helper()
	cl := kafkaClient(t, addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	var specs []kafka.TopicSpec
	for _, name := range topics {
		specs = append(specs, kafka.TopicSpec{Name: name, Partitions: partitions})
	}
	if err := kafka.CreateTopics(ctx, cl, specs...); err != nil {
		t.Fatalf("create topics %v: %v", topics, err)
	}
}

// produce writes recs to topic synchronously, in order.
func produce(t *testing.T, addr, topic string, recs ...*kgo.Record) {
	t.Helper()
	cl := kafkaClient(t, addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for _, r := range recs {
		r.Topic = topic
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// appConfig is the Config of one test app: its own id and state directory,
// its warnings in the test log.
func appConfig(t *testing.T, addr, appID string) eddy.Config {
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

// running is an eddy.Run in a goroutine.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error // set before done is closed
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
	select {
	case <-r.done:
		return r.err
	case <-time.After(hangGuard):
		t.Fatalf("eddy.Run did not return within %v", hangGuard)
		return nil
	}
}

// waitRecords polls topic until it holds at least n committed records. It
// fails the test at once if app (which may be nil) stopped, and after the
// hang guard.
func waitRecords(t *testing.T, addr, topic string, n int, app *running) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
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
			t.Fatalf("%s holds %d records after %v, want %d (last read error: %v)", topic, len(recs), hangGuard, n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readAll reads every committed record of topic (read_committed).
func readAll(t *testing.T, addr, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	recs, err := verify.ReadAll(ctx, []string{addr}, topic)
	if err != nil {
		t.Fatalf("read %s: %v", topic, err)
	}
	return recs
}

func headerValue(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
