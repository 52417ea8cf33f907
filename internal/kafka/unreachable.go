package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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

// ErrSecurityMismatch wraps the error of a broker that accepts connections
// and closes them at once, again and again: it wants TLS or SASL the
// client does not speak (or the client speaks TLS to a plaintext broker).
var ErrSecurityMismatch = errors.New("kafka: the broker closes every connection at once; check the client's TLS and SASL settings and credentials (--tls-ca, --sasl-mechanism, --sasl-user and EDDY_SASL_PASSWORD) against the broker's")

// securityMismatchTries is how many connections in a row, accepted and
// then closed (EOF), whileUnreachable sees before it gives up: one can be a
// broker stopping (a stopped broker refuses connections instead), several
// in a row are a client the broker does not accept. Real Kafka answers a
// wrong SASL password with an error; the embedded broker closes the
// connection, so this is how eddy reports it in a few seconds rather than
// waiting StartupWait.
const securityMismatchTries = 5

// whileUnreachable runs fn (which should start with a kgo.Client.Ping:
// franz-go retries a request over connections closed at once for as long
// as its context allows, a ping returns the first EOF) until it returns an error other than an
// unreachable broker, ctx ends, or StartupWait passes; or, for a client
// watched by a Reach that has not seen a broker yet, the Reach's timeout
// (counted from its start). A broker that keeps
// closing connections at once (kgo.ErrFirstReadEOF, io.EOF) is not waited
// for: the error is ErrSecurityMismatch, with franz-go's guess of the cause
// when it has one.
func whileUnreachable(ctx context.Context, cl *kgo.Client, fn func() error) error {
	deadline := time.Now().Add(StartupWait)
	if r := reachOf(cl); r != nil && !r.Reached() {
		deadline = r.deadline()
	}
	backoff := 100 * time.Millisecond
	closedAtOnce := 0
	for {
		err := fn()
		if tlsRefused(err) {
			return fmt.Errorf("%w: %w", ErrSecurityMismatch, err)
		}
		var firstRead *kgo.ErrFirstReadEOF
		if errors.As(err, &firstRead) || errors.Is(err, io.EOF) {
			if closedAtOnce++; closedAtOnce >= securityMismatchTries {
				return fmt.Errorf("%w: %w", ErrSecurityMismatch, err)
			}
		} else {
			closedAtOnce = 0
		}
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

// tlsRefused reports whether err is a TLS handshake that one side refused:
// the broker rejected the client's certificate (or its lack of one), or
// the client could not verify the broker's. Retrying cannot fix either.
func tlsRefused(err error) bool {
	var alert tls.AlertError
	var verify *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	return errors.As(err, &alert) || errors.As(err, &verify) ||
		errors.As(err, &unknownAuthority) || errors.As(err, &hostname) ||
		err != nil && strings.Contains(err.Error(), "remote error: tls:")
}
