package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestBrokerFlagErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want []string // substrings of the error
	}{
		{"bad value", []string{"--data-dir", dir, "--partitions", "x"}, []string{"-partitions", "eddy broker -h"}},
		{"unknown flag", []string{"--data-dir", dir, "--partition", "3"}, []string{"-partition", "eddy broker -h"}},
		{"bad bool", []string{"--data-dir", dir, "--sync-writes=maybe"}, []string{"-sync-writes", "eddy broker -h"}},
		{"no data dir", []string{"--addr", "127.0.0.1:0"}, []string{"--data-dir is required", "pass --data-dir DIR"}},
		{"zero partitions", []string{"--data-dir", dir, "--partitions", "0"}, []string{"--partitions is 0", "from 1"}},
		{"bad log level", []string{"--data-dir", dir, "--log-level", "loud"}, []string{`--log-level "loud"`, "debug, info, warn or error", "also takes none"}},
		{"bad log format", []string{"--data-dir", dir, "--log-format", "xml"}, []string{`--log-format "xml"`, "text or json"}},
		{"stray argument", []string{"--data-dir", dir, "now"}, []string{`unexpected argument "now"`}},
		// Every validation problem at once, not one per attempt.
		{"several", []string{"--partitions", "-1", "--log-level", "x"}, []string{"--data-dir is required", "--partitions is -1", "--log-level"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := brokerMain(t.Context(), tc.args, &stdout, &stderr)
			if err == nil {
				t.Fatal("brokerMain succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout = %q, want nothing: the broker must not have started", stdout.String())
			}
		})
	}
}

func TestBrokerHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := brokerMain(t.Context(), []string{"-h"}, &stdout, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, f := range []string{"-addr", "-data-dir", "-sync-writes", "-partitions", "-log-level", "-log-format"} {
		if !strings.Contains(stderr.String(), f) {
			t.Errorf("usage lacks %s:\n%s", f, stderr.String())
		}
	}
}

// TestBrokerCancelledContext starts and stops at once: the data dir is
// created 0700 and initialised, and both lifecycle lines are printed.
func TestBrokerCancelledContext(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "data")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var stdout, stderr bytes.Buffer
	if err := brokerMain(ctx, []string{"--addr", "127.0.0.1:0", "--data-dir", dir, "--log-level", "none"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "eddy broker: listening on 127.0.0.1:") ||
		!strings.HasSuffix(lines[0], ", data dir "+dir+", plaintext, no authentication") || lines[1] != "eddy broker: stopped" {
		t.Fatalf("stdout = %q", stdout.String())
	}
	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o700 {
		t.Errorf("data dir mode = %v, want 0700", perm)
	}
	if _, err := os.Stat(filepath.Join(dir, "meta.json")); err != nil {
		t.Errorf("data dir not initialised: %v", err)
	}
}

// TestBrokerServesUntilCancelled runs the subcommand as a user would:
// produce while it runs, stop it, start it again and read the record back.
func TestBrokerServesUntilCancelled(t *testing.T) {
	hang, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()

	run := func(addr string, work func(addr string)) string {
		t.Helper()
		ctx, stop := context.WithCancel(hang)
		defer stop()
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() {
			err := brokerMain(ctx, []string{"--addr", addr, "--data-dir", dir, "--log-level", "warn"}, pw, io.Discard)
			pw.Close()
			done <- err
		}()
		sc := bufio.NewScanner(pr)
		if !sc.Scan() {
			t.Fatalf("no listening line: %v", <-done)
		}
		line := sc.Text()
		addr, _, _ = strings.Cut(strings.TrimPrefix(line, "eddy broker: listening on "), ",")
		work(addr)
		stop()
		if !sc.Scan() || sc.Text() != "eddy broker: stopped" {
			t.Fatalf("after cancel: %q", sc.Text())
		}
		io.Copy(io.Discard, pr)
		if err := <-done; err != nil {
			t.Fatalf("brokerMain: %v", err)
		}
		return addr
	}

	client := func(addr string, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	addr := run("127.0.0.1:0", func(addr string) {
		cl := client(addr, kgo.AllowAutoTopicCreation())
		defer cl.Close()
		if err := cl.ProduceSync(hang, &kgo.Record{Topic: "greetings", Value: []byte("hello")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	})
	run(addr, func(addr string) {
		cl := client(addr, kgo.ConsumeTopics("greetings"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		defer cl.Close()
		for {
			fs := cl.PollFetches(hang)
			if err := hang.Err(); err != nil {
				t.Fatalf("record not read back after restart: %v", err)
			}
			if fs.NumRecords() > 0 {
				if v := string(fs.Records()[0].Value); v != "hello" {
					t.Fatalf("read back %q, want hello", v)
				}
				return
			}
		}
	})
}
