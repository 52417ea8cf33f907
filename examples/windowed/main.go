// Command windowed is the windowed-totals example: per account and tumbling
// event-time window, one final record with the count and sum of the
// account's payments, once the window closed. See package pipeline.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/eddy-streams/eddy/examples/windowed/pipeline"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := pipeline.Main(ctx, os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "windowed:", err)
		os.Exit(1)
	}
}
