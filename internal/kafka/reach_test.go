package kafka

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/testutil"
)

// TestReachGivesUp: with no broker, the Reach warns naming the address
// and the dial error, then ends Watch's context with an error that wraps
// ErrUnreachable and names them; CreateTopics, which would wait
// StartupWait for an unwatched client, stops with it.
func TestReachGivesUp(t *testing.T) {
	var log testutil.LogBuffer
	r := NewReach([]string{"127.0.0.1:1"}, time.Second, slog.New(slog.NewTextHandler(&log, nil)))
	ctx, stop := r.Watch(testContext(t))
	defer stop()
	cl := newTestClient(t, "127.0.0.1:1", r.Opt())
	if err := CreateTopics(ctx, cl, TopicSpec{Name: "t"}); err == nil {
		t.Fatal("CreateTopics succeeded without a broker")
	}
	<-ctx.Done()
	err := context.Cause(ctx)
	if !errors.Is(err, ErrUnreachable) || !errors.Is(r.Err(), ErrUnreachable) ||
		!strings.Contains(err.Error(), "127.0.0.1:1") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("cause %v, Err %v; want ErrUnreachable naming 127.0.0.1:1 and the dial error", err, r.Err())
	}
	if l := log.String(); !strings.Contains(l, "cannot reach a Kafka broker yet") || !strings.Contains(l, "addr=127.0.0.1:1") ||
		!strings.Contains(l, "connection refused") {
		t.Errorf("no warning naming the address and the dial error; log:\n%s", l)
	}
}

// TestReachReached: once a client connected, the Reach is silent and its
// timeout passing ends nothing.
func TestReachReached(t *testing.T) {
	b := startTestBroker(t, BrokerConfig{Addr: "127.0.0.1:0"})
	var log testutil.LogBuffer
	r := NewReach([]string{b.Addr()}, 200*time.Millisecond, slog.New(slog.NewTextHandler(&log, nil)))
	ctx, stop := r.Watch(testContext(t))
	defer stop()
	cl := newTestClient(t, b.Addr(), r.Opt())
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if !r.Reached() {
		t.Fatal("Reached() = false after a successful ping")
	}
	time.Sleep(time.Until(r.deadline().Add(100 * time.Millisecond))) // past the timeout
	if ctx.Err() != nil || r.Err() != nil {
		t.Fatalf("context ended (%v) or Err %v after the broker was reached", context.Cause(ctx), r.Err())
	}
	if l := log.String(); l != "" {
		t.Errorf("logged after a successful connection:\n%s", l)
	}
}
