package main

import (
	"context"
	"os"

	"github.com/eddy-streams/eddy/examples/ledger/pipeline"
)

// runLedger runs the ledger example (the demo's child process); it takes
// the flags of examples/ledger.
func runLedger(ctx context.Context, args []string) error {
	return pipeline.Main(ctx, args, os.Stderr)
}
