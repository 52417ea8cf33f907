// Package testutil holds small helpers that several packages' tests share.
package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// LogBuffer is a log sink that an app's goroutines write to while a test
// reads it.
type LogBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// BuildEddy builds the eddy binary into a new temporary directory (named
// from prefix) for tests that run it as child processes, and returns its
// path and a cleanup that removes the directory.
func BuildEddy(prefix string) (bin string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Join(dir, "eddy")
	build := exec.Command("go", "build", "-o", bin, "github.com/eddy-streams/eddy/cmd/eddy")
	if out, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build eddy: %w\n%s", err, out)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// MainWithEddy is a TestMain for packages whose tests run the eddy binary:
// it builds it once (see BuildEddy), stores its path in *bin, runs the
// tests, removes the binary and exits with their status.
func MainWithEddy(m *testing.M, prefix string, bin *string) {
	path, cleanup, err := BuildEddy(prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*bin = path
	code := m.Run()
	cleanup()
	os.Exit(code)
}
