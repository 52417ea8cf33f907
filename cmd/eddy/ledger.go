package main

import (
	"context"
	"os"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/ledger/pipeline"
	"github.com/eddy-streams/eddy/internal/harness/chaos/diskfault"
	"github.com/eddy-streams/eddy/internal/harness/demo"
)

// runLedger runs the ledger example (the demo's child process); it takes
// the flags of examples/ledger, and the harness's adjustments from the
// environment (see ledgerOptions).
func runLedger(ctx context.Context, args []string) error {
	return pipeline.Main(ctx, args, os.Stderr, ledgerOptions()...)
}

// ledgerOptions are harnessOptions and, with demo.IgnoreStateOffsetsEnv
// set to 1 (only the broker-kill stress run sets it, to measure what the
// offsets in the changelog protect against), Config.IgnoreStateOffsets.
func ledgerOptions() []pipeline.ConfigOption {
	opts := harnessOptions()
	if os.Getenv(demo.IgnoreStateOffsetsEnv) == "1" {
		opts = append(opts, func(cfg *eddy.Config) func() {
			cfg.IgnoreStateOffsets = true
			return nil
		})
	}
	return opts
}

// harnessOptions are what eddy's harness changes in the examples it runs
// as child processes (eddy ledger, eddy windowed). It says so through the
// environment, so that the examples themselves know nothing of it: with
// diskfault.EnvVar set (eddy chaos), the app's state lives on a disk that
// the chaos harness slows down or fails.
func harnessOptions() []pipeline.ConfigOption {
	return []pipeline.ConfigOption{func(cfg *eddy.Config) func() {
		backend, release := diskfault.Backend(cfg.Logger)
		if backend != nil {
			cfg.Backend = backend
		}
		return release
	}}
}
