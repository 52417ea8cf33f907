package main

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/ledger/pipeline"
	"github.com/eddy-streams/eddy/internal/harness/chaos/diskfault"
	"github.com/eddy-streams/eddy/internal/harness/demo"
	"github.com/eddy-streams/eddy/state/pebble"
)

// The harness's environment reaches the example's config only through the
// options cmd/eddy hands it: the faulted disk's backend with
// EDDY_CHAOS_DISK, IgnoreStateOffsets with EDDY_IGNORE_STATE_OFFSETS=1, and
// nothing without them.
func TestLedgerOptions(t *testing.T) {
	apply := func() (eddy.Config, func()) {
		cfg := eddy.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		release := pipeline.Adjust(&cfg, ledgerOptions())
		return cfg, release
	}

	t.Setenv(diskfault.EnvVar, "")
	t.Setenv(demo.IgnoreStateOffsetsEnv, "")
	cfg, release := apply()
	release()
	if cfg.Backend != nil || cfg.IgnoreStateOffsets {
		t.Fatalf("without the harness's variables: Backend %v, IgnoreStateOffsets %v; want the defaults", cfg.Backend, cfg.IgnoreStateOffsets)
	}

	t.Setenv(diskfault.EnvVar, filepath.Join(t.TempDir(), "disk"))
	t.Setenv(demo.IgnoreStateOffsetsEnv, "1")
	cfg, release = apply()
	defer release()
	if _, ok := cfg.Backend.(*pebble.Backend); !ok {
		t.Errorf("with %s: Backend %T, want the faulted Pebble backend", diskfault.EnvVar, cfg.Backend)
	}
	if !cfg.IgnoreStateOffsets {
		t.Errorf("with %s=1: IgnoreStateOffsets not set", demo.IgnoreStateOffsetsEnv)
	}
}
