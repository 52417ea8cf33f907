package kafkaclient

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
)

// DefaultBrokerTimeout is how long WatchBrokers' callers wait by default
// for a first broker, as eddy.Config.BrokerTimeout does.
const DefaultBrokerTimeout = kafka.StartupWait

// WatchBrokers runs fn with a context and a client option (add it to the
// options of every client fn creates) that watch whether those clients
// reach any of brokers. Until one connects, failed attempts are logged to
// log as warnings naming brokers and the dial error (at once, then every
// 30 s); if none connected within timeout, the context ends and
// WatchBrokers returns an error naming brokers and the last dial error,
// whatever fn returned. It is what eddy.App does with Config.BrokerTimeout,
// for the clients an application makes itself (creating its topics).
//
// Without it, a client that cannot reach a broker retries quietly; the
// admin calls of this package give up after two minutes.
func WatchBrokers(ctx context.Context, brokers []string, timeout time.Duration, log *slog.Logger, fn func(ctx context.Context, watch kgo.Opt) error) error {
	reach := kafka.NewReach(brokers, timeout, log)
	ctx, stop := reach.Watch(ctx)
	defer stop()
	err := fn(ctx, reach.Opt())
	if rerr := reach.Err(); rerr != nil {
		return fmt.Errorf("eddy: %w", rerr)
	}
	return err
}
