// Package versitygw runs a local S3-compatible server, the Versity S3
// Gateway serving a directory, as a child process, for the tests and the
// restore benchmark of S3 checkpoints: a real S3 implementation, not a mock
// (issue 4). Install it with
//
//	go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
package versitygw

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/eddy-streams/eddy/checkpoint"
)

// InstallCommand installs the server binary this package runs.
const InstallCommand = "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// ErrNotInstalled means the versitygw binary is neither on PATH nor in
// $(go env GOPATH)/bin.
var ErrNotInstalled = errors.New("versitygw: binary not found on PATH or in $(go env GOPATH)/bin; install it with: " + InstallCommand)

// Server is a running gateway.
type Server struct {
	Endpoint  string // http://127.0.0.1:port
	AccessKey string
	SecretKey string
	Region    string

	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan struct{}
	once   sync.Once
}

// Binary returns the path of the versitygw binary.
func Binary() (string, error) {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			gopath = strings.TrimSpace(string(out))
		}
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "bin", "versitygw")
		if info, err := os.Stat(p); err == nil && !info.IsDir() {
			return p, nil
		}
	}
	return "", ErrNotInstalled
}

// Start runs a gateway that serves dir (its subdirectories are buckets) on
// a free local port and waits until it answers.
func Start(dir string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("versitygw: %w", err)
	}
	var lastErr error
	// The port is free when we pick it; another process may take it before
	// the gateway binds it, so try a few.
	for attempt := 0; attempt < 3; attempt++ {
		s, err := start(bin, dir)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func start(bin, dir string) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("versitygw: pick a port: %w", err)
	}
	addr := l.Addr().String()
	l.Close()
	s := &Server{
		Endpoint:  "http://" + addr,
		AccessKey: "eddy-test-access",
		SecretKey: "eddy-test-secret-key",
		Region:    "us-east-1",
		stderr:    &bytes.Buffer{},
		done:      make(chan struct{}),
	}
	s.cmd = exec.Command(bin, "--access", s.AccessKey, "--secret", s.SecretKey, "--region", s.Region,
		"--port", addr, "--quiet", "posix", dir)
	s.cmd.Stdout = s.stderr
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("versitygw: start %s: %w", bin, err)
	}
	go func() {
		s.cmd.Wait()
		close(s.done)
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		// Any HTTP answer (403 without credentials) means it serves.
		resp, err := http.Get(s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("versitygw: exited at start: %s", s.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Close()
			return nil, fmt.Errorf("versitygw: not answering on %s after 15s: %s", addr, s.stderr.String())
		}
	}
}

// Close stops the gateway (its files stay in the served directory).
func (s *Server) Close() {
	s.once.Do(func() {
		if s.cmd.Process != nil {
			s.cmd.Process.Kill()
		}
		<-s.done
	})
}

// CreateBucket creates a bucket.
func (s *Server) CreateBucket(ctx context.Context, bucket string) error {
	cl, err := minio.New(strings.TrimPrefix(s.Endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), Region: s.Region,
	})
	if err != nil {
		return err
	}
	if err := cl.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: s.Region}); err != nil {
		return fmt.Errorf("versitygw: create bucket %s: %w", bucket, err)
	}
	return nil
}

// Options returns the options of a store in bucket under prefix.
func (s *Server) Options(bucket, prefix string) checkpoint.S3Options {
	return checkpoint.S3Options{Bucket: bucket, Prefix: prefix, Endpoint: s.Endpoint,
		AccessKey: s.AccessKey, SecretKey: s.SecretKey, Region: s.Region}
}

// Env sets the AWS_* variables that checkpoint.Open reads, for the test's
// duration.
func (s *Server) Env(t testing.TB) {
	t.Setenv("AWS_ENDPOINT_URL", s.Endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", s.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s.SecretKey)
	t.Setenv("AWS_REGION", s.Region)
}

// ForTest starts a gateway on a temporary directory with bucket created,
// stopped when the test ends. Without the binary the test is skipped, with
// the command that installs it (CI installs it: .ci/run).
func ForTest(t testing.TB, bucket string) *Server {
	t.Helper()
	if _, err := Binary(); err != nil {
		t.Skipf("S3 tests need a real S3 server: %v", err)
	}
	s, err := Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.CreateBucket(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	return s
}
