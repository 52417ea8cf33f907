package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/kafkaclient"
)

// runPartitions runs "eddy partitions check": which partitioner wrote a
// topic (docs/partitioners.md).
func runPartitions(ctx context.Context, args []string) error {
	return partitionsMain(ctx, args, os.Stdout, os.Stderr)
}

func partitionsMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(stderr, "usage: eddy partitions check --topic T [--brokers HOST:PORT,...] [--sample N] [--json]")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			return flag.ErrHelp
		}
		return errors.New("eddy partitions has one subcommand, check: eddy partitions check --topic T")
	}
	fs := flag.NewFlagSet("partitions check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("brokers", "127.0.0.1:9092", "comma-separated Kafka bootstrap servers")
	topic := fs.String("topic", "", "the topic to check (required)")
	sample := fs.Int64("sample", 10_000, "records to read from the start of each partition")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	security := kafkaclient.AddSecurityFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `usage: eddy partitions check --topic T [--brokers HOST:PORT,...] [--sample N] [--json]

Reads up to N records from the start of each partition of a topic and prints, per
partition, the share of its keyed records that murmur2 (Kafka's default: Java,
Kafka Streams, franz-go, eddy) and CRC32 (librdkafka's default: kcat,
confluent-kafka-go and -python) would put there, and a verdict: murmur2, crc32,
either (cannot tell), mixed (both wrote), unknown (neither explains some keys)
or "no keys". Topics that eddy joins must be written with one partitioner, the
app's Config.Partitioner (docs/partitioners.md). Exits non-zero only on errors.

flags:`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	var problems []error
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Errorf("unexpected argument %q: every option is a flag, see -h", fs.Arg(0)))
	}
	if *topic == "" {
		problems = append(problems, errors.New("--topic is required: the topic to check"))
	}
	if *sample < 1 {
		problems = append(problems, fmt.Errorf("--sample is %d: read at least 1 record per partition, e.g. 10000", *sample))
	}
	if err := errors.Join(problems...); err != nil {
		return err
	}
	opts, err := security.ClientOpts()
	if err != nil {
		return err
	}
	opts = append([]kgo.Opt{kgo.SeedBrokers(strings.Split(*brokers, ",")...)}, opts...)
	res, err := kafka.SamplePartitioner(ctx, opts, *topic, *sample)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return printPartitionCheck(stdout, res)
}

func printPartitionCheck(w io.Writer, res *kafka.TopicSample) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "PARTITION\tREAD\tKEYED\tMURMUR2\tCRC32\tVERDICT\t")
	for _, p := range res.Partitions {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\t\n", p.Partition, p.Records, p.Keyed, share(p.Murmur2, p.Keyed), share(p.CRC32, p.Keyed), p.Verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%s: %s\n", res.Topic, verdictAdvice(res.Verdict))
	return err
}

// share is n of keyed as a percentage, or "-" with no keyed record.
func share(n, keyed int64) string {
	if keyed == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(keyed))
}

func verdictAdvice(v kafka.Verdict) string {
	switch v {
	case kafka.VerdictMurmur2:
		return "murmur2 (Kafka's default partitioner): eddy's default, Config.Partitioner = eddy.Murmur2"
	case kafka.VerdictCRC32:
		return "crc32 (librdkafka's default partitioner, e.g. kcat): to join it, set partitioner=murmur2_random on its producers, or Config.Partitioner = eddy.CRC32 if every producer of the app's co-partitioned topics uses CRC32"
	case kafka.VerdictEither:
		return "either: every key sampled sits where both partitioners put it (one partition, or too few keys to tell)"
	case kafka.VerdictMixed:
		return "mixed: some records were written with murmur2, others with crc32; joins will miss keys until every producer uses one partitioner"
	case kafka.VerdictUnknown:
		return "unknown: some keys sit where neither murmur2 nor crc32 puts them (a custom partitioner, explicit partitions, or partitions added after they were written)"
	case kafka.VerdictNoKeys:
		return "no keys: no record with a key was read, nothing to judge"
	}
	return string(v)
}
