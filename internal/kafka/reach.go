package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrUnreachable is wrapped by the error of a Reach whose timeout passed
// before any client it watches reached a broker.
var ErrUnreachable = errors.New("kafka: no broker reachable")

// reachWarnEvery is how often a Reach repeats its warning while no broker
// has been reached.
const reachWarnEvery = 30 * time.Second

// Reach watches the clients it is hooked into (Opt) for their first
// connection to a broker. Until one connects, every failed connection
// attempt may log a warning naming the seed brokers and the dial error
// (at once, then at most every 30 s), and Watch ends its context with
// ErrUnreachable once the timeout passes. After the first connection it
// is silent: a broker lost later is retried as any Kafka client retries.
//
// Without it a client that cannot reach a broker says nothing: franz-go
// retries the dial quietly until the request's own deadline, and an app
// whose workers start new sessions retries forever.
//
// It is a franz-go HookBrokerConnect (called once per connection
// attempt, after the dial and the connection's ApiVersions and SASL
// exchange, with their error), shared by any number of clients.
type Reach struct {
	brokers string
	timeout time.Duration
	log     *slog.Logger
	start   time.Time
	reached chan struct{}

	mu      sync.Mutex
	ok      bool
	lastErr error
	warned  time.Time
	failed  error
}

// NewReach returns a Reach for clients of brokers (the seed addresses it
// names in its warnings and error) whose clock starts now. timeout is
// how long Watch waits for a first connection; log receives the warnings.
func NewReach(brokers []string, timeout time.Duration, log *slog.Logger) *Reach {
	return &Reach{
		brokers: strings.Join(brokers, ","),
		timeout: timeout,
		log:     log,
		start:   time.Now(),
		reached: make(chan struct{}),
	}
}

// Opt hooks r into a client.
func (r *Reach) Opt() kgo.Opt { return kgo.WithHooks(r) }

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (r *Reach) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ok {
		return
	}
	if err == nil {
		r.ok = true
		close(r.reached)
		return
	}
	r.lastErr = err
	now := time.Now()
	if !r.warned.IsZero() && now.Sub(r.warned) < reachWarnEvery {
		return
	}
	r.warned = now
	r.log.Warn("cannot reach a Kafka broker yet; retrying",
		"brokers", r.brokers, "addr", net.JoinHostPort(meta.Host, fmt.Sprint(meta.Port)), "err", err,
		"waiting", time.Since(r.start).Round(time.Second), "gives_up_after", r.timeout)
}

// Reached reports whether a client has connected to a broker.
func (r *Reach) Reached() bool {
	select {
	case <-r.reached:
		return true
	default:
		return false
	}
}

// Watch returns a context derived from ctx that ends, with Err as its
// cause, when the timeout passes (counted from NewReach) before any client
// reached a broker. Call the cancel function when done with it.
func (r *Reach) Watch(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		timer := time.NewTimer(time.Until(r.deadline()))
		defer timer.Stop()
		select {
		case <-r.reached:
		case <-ctx.Done():
		case <-timer.C:
			if err := r.giveUp(); err != nil {
				cancel(err)
			}
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// giveUp records and returns the error of a Reach whose timeout passed,
// unless a client connected meanwhile.
func (r *Reach) giveUp() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ok {
		return nil
	}
	cause := r.lastErr
	if cause == nil {
		cause = errors.New("no connection attempt finished")
	}
	r.failed = fmt.Errorf("%w at %s within %v: %w", ErrUnreachable, r.brokers, r.timeout, cause)
	r.log.Error("giving up: no Kafka broker reached", "brokers", r.brokers, "after", r.timeout, "err", cause)
	return r.failed
}

// Err returns the error with which Watch ended its context (wrapping
// ErrUnreachable and the last dial error, naming the brokers), or nil.
func (r *Reach) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *Reach) deadline() time.Time { return r.start.Add(r.timeout) }

// reachOf returns the Reach hooked into cl, if any.
func reachOf(cl *kgo.Client) *Reach {
	hooks, _ := cl.OptValue(kgo.WithHooks).([]kgo.Hook)
	for _, h := range hooks {
		if r, ok := h.(*Reach); ok {
			return r
		}
	}
	return nil
}
