package main

import (
	"context"
	"os"

	"github.com/eddy-streams/eddy/examples/windowed/pipeline"
)

// runWindowed runs the windowed-totals example (a child process of the
// demo); it takes the flags of examples/windowed, and the harness's
// adjustments from the environment (see harnessOptions).
func runWindowed(ctx context.Context, args []string) error {
	return pipeline.Main(ctx, args, os.Stderr, harnessOptions()...)
}
