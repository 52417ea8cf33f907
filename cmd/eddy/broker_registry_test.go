package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/testutil"
	"github.com/twmb/franz-go/pkg/sr"
)

// registryLine is the lifecycle line of --schema-registry; its URL is what
// clients are given.
var registryLine = regexp.MustCompile(`^eddy broker: schema registry on (https?://[^,]+), data dir (.+), (.+)$`)

// startBrokerWithRegistry runs `eddy broker --schema-registry` as a child
// process and returns the registry's URL once the broker's listening line
// (the one scripts wait for) is printed.
func startBrokerWithRegistry(t *testing.T, ctx context.Context, bin, dir string, extra ...string) (*exec.Cmd, string) {
	t.Helper()
	args := append([]string{"broker", "--addr", "127.0.0.1:0", "--data-dir", dir, "--log-level", "none", "--schema-registry", "127.0.0.1:0"}, extra...)
	cmd := exec.CommandContext(ctx, bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	var url string
	for sc.Scan() {
		line := sc.Text()
		if m := registryLine.FindStringSubmatch(line); m != nil {
			url = m[1]
			if m[2] != filepath.Join(dir, "schema-registry") {
				t.Errorf("registry data dir %q, want %q", m[2], filepath.Join(dir, "schema-registry"))
			}
		}
		if strings.HasPrefix(line, "eddy broker: listening on ") {
			if url == "" {
				t.Fatalf("listening line before the registry line")
			}
			go io.Copy(io.Discard, out)
			return cmd, url
		}
	}
	t.Fatalf("eddy broker ended before listening: %v", sc.Err())
	return nil, ""
}

// TestBrokerSchemaRegistryRestart registers schemas with `eddy broker
// --schema-registry`, SIGKILLs it (no clean stop: what was acknowledged
// must already be on disk), restarts it on the same data dir and reads
// back the same ids, versions and levels.
func TestBrokerSchemaRegistryRestart(t *testing.T) {
	bin, cleanup, err := testutil.BuildEddy("eddy-registry-test")
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	v1 := sr.Schema{Schema: `{"type":"record","name":"Payment","fields":[{"name":"cents","type":"long"}]}`}
	v2 := sr.Schema{Schema: `{"type":"record","name":"Payment","fields":[{"name":"cents","type":"long"},{"name":"memo","type":"string","default":""}]}`}

	cmd, url := startBrokerWithRegistry(t, ctx, bin, dir)
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []sr.Schema{v1, v2} {
		got, err := cl.CreateSchema(ctx, "payments-value", s)
		if err != nil || got.ID != i+1 || got.Version != i+1 {
			t.Fatalf("CreateSchema %d = %+v, %v", i+1, got, err)
		}
	}
	if res := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatFull}, "payments-value"); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	_, url = startBrokerWithRegistry(t, ctx, bin, dir)
	cl, err = sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	versions, err := cl.SubjectVersions(ctx, "payments-value")
	if err != nil || len(versions) != 2 || versions[0] != 1 || versions[1] != 2 {
		t.Fatalf("versions after restart = %v, %v", versions, err)
	}
	s, err := cl.SchemaByID(ctx, 2)
	if err != nil || s.Schema != v2.Schema {
		t.Fatalf("schema 2 after restart = %+v, %v", s, err)
	}
	if res := cl.Compatibility(ctx, "payments-value"); res[0].Err != nil || res[0].Level != sr.CompatFull {
		t.Fatalf("level after restart = %+v", res[0])
	}
	// The same schema keeps its id; a new one gets the next.
	if got, err := cl.CreateSchema(ctx, "other-value", v1); err != nil || got.ID != 1 {
		t.Fatalf("v1 under another subject = %+v, %v", got, err)
	}
}

// TestBrokerSchemaRegistrySASLUsers: with --sasl-users-file the registry
// asks for the same users over HTTP basic auth.
func TestBrokerSchemaRegistrySASLUsers(t *testing.T) {
	dir := t.TempDir()
	users := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(users, []byte("app:s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithTimeout(t.Context(), time.Minute)
	defer stop()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := brokerMain(ctx, []string{"--addr", "127.0.0.1:0", "--data-dir", dir, "--log-level", "none",
			"--sasl-users-file", users, "--schema-registry", "127.0.0.1:0"}, pw, io.Discard)
		pw.Close()
		done <- err
	}()
	sc := bufio.NewScanner(pr)
	if !sc.Scan() {
		t.Fatalf("no output: %v", <-done)
	}
	m := registryLine.FindStringSubmatch(sc.Text())
	if m == nil || m[3] != "basic auth (1 users)" {
		t.Fatalf("first line %q, want the registry's with basic auth", sc.Text())
	}
	go io.Copy(io.Discard, pr)
	for pass, ok := range map[string]bool{"s3cret": true, "wrong": false} {
		cl, err := sr.NewClient(sr.URLs(m[1]), sr.BasicAuth("app", pass))
		if err != nil {
			t.Fatal(err)
		}
		_, err = cl.Subjects(ctx)
		var re *sr.ResponseError
		if ok && err != nil || !ok && (!errors.As(err, &re) || re.StatusCode != 401) {
			t.Errorf("password %q: %v", pass, err)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestBrokerSchemaRegistryFlagError(t *testing.T) {
	var stdout bytes.Buffer
	err := brokerMain(t.Context(), []string{"--data-dir", t.TempDir(), "--schema-registry", "8081"}, &stdout, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `--schema-registry "8081": want host:port`) {
		t.Fatalf("err = %v", err)
	}
	if stdout.Len() > 0 {
		t.Errorf("stdout = %q: nothing may start", stdout.String())
	}
}

// TestBrokerSchemaRegistryTLS: with --tls-cert the registry serves HTTPS
// with the broker's certificate; a client trusting its CA registers, and a
// plain-HTTP client is refused.
func TestBrokerSchemaRegistryTLS(t *testing.T) {
	certs, err := testutil.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithTimeout(t.Context(), time.Minute)
	defer stop()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := brokerMain(ctx, []string{"--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-level", "none",
			"--tls-cert", certs.ServerCert, "--tls-key", certs.ServerKey, "--schema-registry", "127.0.0.1:0"}, pw, io.Discard)
		pw.Close()
		done <- err
	}()
	sc := bufio.NewScanner(pr)
	if !sc.Scan() {
		t.Fatalf("no output: %v", <-done)
	}
	m := registryLine.FindStringSubmatch(sc.Text())
	if m == nil || !strings.HasPrefix(m[1], "https://") {
		t.Fatalf("first line %q, want the registry's on https", sc.Text())
	}
	go io.Copy(io.Discard, pr)
	pem, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cl, err := sr.NewClient(sr.URLs(m[1]), sr.DialTLSConfig(&tls.Config{RootCAs: pool}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateSchema(ctx, "s", sr.Schema{Schema: `"string"`}); err != nil {
		t.Fatalf("over TLS: %v", err)
	}
	plain, err := sr.NewClient(sr.URLs("http://" + strings.TrimPrefix(m[1], "https://")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Subjects(ctx); err == nil {
		t.Error("plain HTTP to the TLS registry succeeded")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
