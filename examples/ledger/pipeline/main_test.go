package pipeline

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestMainFlagErrors: a bad flag is named, with the fix, before anything
// connects.
func TestMainFlagErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no state dir", nil, "--state-dir is required"},
		{"zero workers", []string{"--state-dir", dir, "--workers", "0"}, "--workers 0: must be at least 1"},
		{"negative standbys", []string{"--state-dir", dir, "--standby-replicas", "-1"}, "--standby-replicas -1: must be 0 (none) or more"},
		{"standbys not a number", []string{"--state-dir", dir, "--standby-replicas", "one"}, `invalid value "one" for flag -standby-replicas`},
		{"zero partitions", []string{"--state-dir", dir, "--partitions", "0"}, "--partitions 0"},
		{"bad guarantee", []string{"--state-dir", dir, "--guarantee", "maybe"}, "use exactly-once or at-least-once"},
		{"bad log level", []string{"--state-dir", dir, "--log-level", "loud"}, `--log-level "loud"`},
		{"bad log format", []string{"--state-dir", dir, "--log-format", "xml"}, `--log-format "xml"`},
		{"http tls without http", []string{"--state-dir", dir, "--http-tls-cert", "c.pem", "--http-tls-key", "k.pem"}, "need --http"},
		{"http cert without key", []string{"--state-dir", dir, "--http", "127.0.0.1:1", "--http-tls-cert", "c.pem"}, "pass both"},
		{"busy http address", []string{"--state-dir", dir, "--http", "256.0.0.1:1"}, "--http 256.0.0.1:1"},
		{"relative checkpoint URL", []string{"--state-dir", dir, "--checkpoint-url", "checkpoints/"}, "file:///absolute/path or s3://bucket/prefix"},
		{"file URL with a host", []string{"--state-dir", dir, "--checkpoint-url", "file://relative/dir"}, "file:///relative/dir"},
		{"negative checkpoint interval", []string{"--state-dir", dir, "--checkpoint-interval", "-1s"}, "--checkpoint-interval -1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			// An unreachable broker: had validation passed, Main would
			// wait for it until the context ends.
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			err := Main(ctx, append([]string{"--brokers", "127.0.0.1:1"}, tc.args...), &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
