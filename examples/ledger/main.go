// Command ledger is the exactly-once ledger example: for every payment on
// the input topic it writes the account's running sequence number and
// balance to the output topic. See package pipeline.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/eddy-streams/eddy/examples/ledger/pipeline"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := pipeline.Main(ctx, os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "ledger:", err)
		os.Exit(1)
	}
}
