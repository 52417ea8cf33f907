package eddy_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/testutil"
	"github.com/eddy-streams/eddy/serde"
)

// TestRunUnreachableBrokers: an app whose brokers cannot be reached (a
// refused port, a host name that does not resolve) logs a warning naming
// the address and the dial error, and Run returns an error naming the
// address once BrokerTimeout passed; with dead-letter topics to create
// (App.Run's own client) and without (the runtime's).
func TestRunUnreachableBrokers(t *testing.T) {
	for _, tc := range []struct {
		name, addr, dialErr string
		onDecode            eddy.ErrorPolicy
	}{
		{"refused, dead letters", "127.0.0.1:1", "connection refused", eddy.DeadLetter},
		{"refused, runtime", "127.0.0.1:1", "connection refused", eddy.Fail},
		{"unresolvable", "no-such-broker.invalid:9092", "no-such-broker.invalid", eddy.Fail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo := eddy.NewTopology()
			eddy.Count(eddy.GroupByKey(eddy.Source(topo, "in", serde.String(), serde.String()), serde.String()), "counts")
			var log testutil.LogBuffer
			cfg := eddy.Config{
				AppID:         "unreachable",
				Brokers:       []string{tc.addr},
				StateDir:      t.TempDir(),
				BrokerTimeout: 2 * time.Second,
				OnDecodeError: tc.onDecode,
				Logger:        slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn})),
			}
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			err := eddy.Run(ctx, topo, cfg)
			if ctx.Err() != nil {
				t.Fatalf("Run did not give up before the hang guard (%v); log:\n%s", hangGuard, log.String())
			}
			if !errors.Is(err, eddy.ErrBrokersUnreachable) || !strings.Contains(err.Error(), tc.addr) ||
				!strings.Contains(err.Error(), tc.dialErr) || !strings.HasPrefix(err.Error(), "eddy: ") {
				t.Errorf("Run = %v; want an eddy: error wrapping ErrBrokersUnreachable that names %s and the dial error (%s)", err, tc.addr, tc.dialErr)
			}
			var warning string
			for _, line := range strings.Split(log.String(), "\n") {
				if strings.Contains(line, "level=WARN") && strings.Contains(line, "cannot reach a Kafka broker") {
					warning = line
					break
				}
			}
			t.Logf("Run = %v\nwarning: %s", err, warning)
			if !strings.Contains(warning, tc.addr) || !strings.Contains(warning, tc.dialErr) {
				t.Errorf("no warning naming %s and the dial error (%s); log:\n%s", tc.addr, tc.dialErr, log.String())
			}
		})
	}
}

// TestNewRejectsNegativeBrokerTimeout: BrokerTimeout is a config error
// New reports, naming the field.
func TestNewRejectsNegativeBrokerTimeout(t *testing.T) {
	topo := eddy.NewTopology()
	eddy.To(eddy.Source(topo, "in", serde.String(), serde.String()), "out", serde.String(), serde.String())
	_, err := eddy.New(topo, eddy.Config{AppID: "app", Brokers: []string{"127.0.0.1:1"}, StateDir: t.TempDir(), BrokerTimeout: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "BrokerTimeout -1s") {
		t.Fatalf("New = %v; want the BrokerTimeout error", err)
	}
}
