// Command eddy is the eddy binary: the embedded broker, the demo, and the
// operator tools. It only parses flags and calls packages.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand of the binary.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string) error
}

func commands() []command {
	return []command{
		{"broker", "run the embedded Kafka-protocol broker until SIGINT/SIGTERM", runBroker},
		{"demo", "run the exactly-once ledger and windowed totals under SIGKILLs and verify their output", runDemo},
		{"bench", "measure the ledger or windowed totals (exactly-once vs at-least-once vs the broker's raw rate) and failover times", runBench},
		{"ledger", "run the ledger example (flags of examples/ledger)", runLedger},
		{"windowed", "run the windowed-totals example (flags of examples/windowed)", runWindowed},
		{"lag", "print an application's consumer lag per partition, with each partition's owner", runLag},
		{"partitions", "check which partitioner (murmur2 or CRC32) wrote a topic's keys (check --topic T)", runPartitions},
		{"acls", "print (or create) the ACLs an application needs on a cluster with authorization on", runACLs},
		{"chaos", "inject faults (kills, zombies, broker crashes and errors, disk and network faults) into the examples and verify exactly-once", runChaos},
		{"inspect", "print what a state directory holds: tasks, stores, keys, sizes, offsets", runInspect},
		{"sink", "write a topic into a database exactly once (eddy sink postgres --topic T --dsn DSN --table TABLE --key COL)", runSink},
		{"nexmark", "write the Nexmark events of a run as files for other engines (eddy nexmark generate --events N --format jsonl|csv --out DIR)", runNexmarkCommand},
		{"query", "query an app's state stores over its HTTP API (--http HOST:PORT --store S --key K)", runQuery},
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: eddy <command> [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(os.Stderr, "\nRun 'eddy <command> -h' for the flags of a command.")
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	name := os.Args[1]
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := c.run(ctx, os.Args[2:])
		stop()
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "eddy %s: %v\n", name, err)
			os.Exit(1)
		}
		return
	}
	fmt.Fprintf(os.Stderr, "eddy: unknown command %q\n\n", name)
	usage()
	os.Exit(2)
}
