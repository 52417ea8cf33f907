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
		{"zero broker timeout", []string{"--state-dir", dir, "--broker-timeout", "0s"}, "--broker-timeout 0s"},
		{"unknown format", []string{"--state-dir", dir, "--format", "xml"}, `--format: unknown format "xml": use json, avro or protobuf`},
		{"avro without registry", []string{"--state-dir", dir, "--format", "avro"}, "--format avro needs --schema-registry URL"},
		{"registry with json", []string{"--state-dir", dir, "--schema-registry", "http://127.0.0.1:1"}, "JSON needs no registry"},
		{"registry not a URL", []string{"--state-dir", dir, "--format", "protobuf", "--schema-registry", "127.0.0.1:8081"}, "want an http:// or https:// URL"},
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

// TestMainUnreachableBroker: with --broker-timeout, Main warns that the
// broker cannot be reached and then fails naming it.
func TestMainUnreachableBroker(t *testing.T) {
	var stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a hang guard
	defer cancel()
	err := Main(ctx, []string{"--brokers", "127.0.0.1:1", "--state-dir", t.TempDir(), "--broker-timeout", "1s"}, &stderr)
	if ctx.Err() != nil {
		t.Fatalf("Main did not give up before the hang guard; stderr:\n%s", stderr.String())
	}
	if err == nil || !strings.Contains(err.Error(), "no broker reachable at 127.0.0.1:1") {
		t.Errorf("Main = %v; want an error naming 127.0.0.1:1", err)
	}
	if !strings.Contains(stderr.String(), "cannot reach a Kafka broker yet") || !strings.Contains(stderr.String(), "addr=127.0.0.1:1") {
		t.Errorf("no warning naming 127.0.0.1:1; stderr:\n%s", stderr.String())
	}
}
