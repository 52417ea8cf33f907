package main

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/eddy-streams/eddy/internal/harness/chaos"
	"github.com/eddy-streams/eddy/internal/kafka"
)

// serveFaultAPI serves `eddy broker --fault-api`: the HTTP endpoint through
// which `eddy chaos` makes the broker answer errors (kfake's Fault) while
// it can still SIGKILL it. It returns once the address is open.
func serveFaultAPI(ctx context.Context, addr string, b *kafka.Broker, stderr io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--fault-api %s: %w; give a free loopback host:port", addr, err)
	}
	go func() {
		if err := chaos.ServeFaultAPI(ctx, ln, b.Cluster()); err != nil {
			fmt.Fprintln(stderr, "eddy broker:", err)
		}
	}()
	return nil
}
