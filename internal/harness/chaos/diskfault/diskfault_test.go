package diskfault

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{
		"":             {},
		"off\n":        {},
		"latency 20ms": {Kind: "latency", Latency: 20 * time.Millisecond},
		"eio 0.5":      {Kind: "eio", P: 0.5},
		"enospc 1\n":   {Kind: "enospc", P: 1},
	} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"latency", "latency soon", "eio 2", "enospc -1", "melt 1"} {
		if _, err := ParseMode(bad); err == nil {
			t.Errorf("ParseMode(%q) accepted", bad)
		}
	}
}

// TestFromEnvFaultsWrites: with the variable set, writes fail as the
// control file says, and work again once it says off; reads are untouched.
func TestFromEnvFaultsWrites(t *testing.T) {
	dir := t.TempDir()
	ctl := filepath.Join(dir, "ctl")
	if err := os.WriteFile(ctl, []byte("enospc 1"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvVar, ctl)
	fs, stop := FromEnv(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if fs == nil {
		t.Fatal("FromEnv returned no file system with the variable set")
	}
	defer stop()
	_, err := fs.Create(filepath.Join(dir, "f"), vfs.WriteCategoryUnspecified)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("create on a full disk: %v; want ENOSPC", err)
	}
	if _, err := fs.Stat(dir); err != nil {
		t.Fatalf("a read failed: %v", err)
	}
	if err := os.WriteFile(ctl, []byte("off"), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		f, err := fs.Create(filepath.Join(dir, "f"), vfs.WriteCategoryUnspecified)
		if err == nil {
			f.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes still fail after the control file said off: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestFromEnvUnset(t *testing.T) {
	t.Setenv(EnvVar, "")
	if fs, _ := FromEnv(slog.Default()); fs != nil {
		t.Fatal("a faulted file system without the variable")
	}
	if b, _ := Backend(slog.Default()); b != nil {
		t.Fatal("a backend without the variable")
	}
}
