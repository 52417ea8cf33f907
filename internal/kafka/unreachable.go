package kafka

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"
)

// StartupWait bounds how long the admin calls an application makes at start
// (creating topics, reading partition counts) wait for an unreachable
// broker: a broker restarting, or started after the app, is not an error,
// as it is not for any Kafka client.
const StartupWait = 2 * time.Minute

// unreachable reports whether err means the broker could not be reached at
// all (as opposed to an answer the broker gave).
func unreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF)
}

// whileUnreachable runs fn until it returns an error other than an
// unreachable broker, ctx ends, or StartupWait passes.
func whileUnreachable(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(StartupWait)
	backoff := 100 * time.Millisecond
	for {
		err := fn()
		if err == nil || !unreachable(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}
