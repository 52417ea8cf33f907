package pipeline

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/eddy-streams/eddy"
	ledger "github.com/eddy-streams/eddy/examples/ledger/pipeline"
	"github.com/eddy-streams/eddy/kafkaclient"
)

// Defaults of the command line, named so that the demo and the tests agree
// with it.
const (
	DefaultWindow = 10 * time.Second
	DefaultGrace  = 2 * time.Second
)

// A ConfigOption adjusts the app's config after the flags; see the
// ledger's.
type ConfigOption = ledger.ConfigOption

// Main parses the windowed example's flags and runs it until ctx is
// cancelled. Every flag problem is reported at once, each naming the flag
// and what to pass instead. The options, if any, adjust the app's config
// after the flags.
func Main(ctx context.Context, args []string, stderr io.Writer, opts ...ConfigOption) error {
	fs := flag.NewFlagSet("windowed", flag.ContinueOnError)
	// The flag package prints parse errors itself; the caller prints ours,
	// so silence it and print the usage only when asked for.
	fs.SetOutput(io.Discard)
	brokers := fs.String("brokers", "127.0.0.1:9092", "comma-separated Kafka bootstrap servers")
	input := fs.String("input", "payments", "input topic (key = account id, value = payment in --format, with ts = the record timestamp; the totals are JSON)")
	output := fs.String("output", "totals", "output topic (one final total per account and window)")
	stateDir := fs.String("state-dir", "", "directory of the task databases (required)")
	appID := fs.String("app-id", "windowed", "application id: consumer group and topic prefix")
	window := fs.Duration("window", DefaultWindow, "size of the tumbling windows (whole milliseconds)")
	grace := fs.Duration("grace", DefaultGrace, "how long after its end a window still accepts payments (whole milliseconds)")
	lateTopic := fs.String("late-topic", "", "topic that receives the payments dropped as late (default: none, they are only counted)")
	commitInterval := fs.Duration("commit-interval", 100*time.Millisecond, "how often the transaction commits")
	partitions := fs.Int("partitions", 4, "partitions of the input topic when the example creates it")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	logFormat := fs.String("log-format", "text", "log format: text (key=value) or json (one object per line)")
	brokerTimeout := fs.Duration("broker-timeout", eddy.DefaultBrokerTimeout, "give up when no broker of --brokers answered within this long (unreachable brokers are logged meanwhile)")
	formatFlags := ledger.AddFormatFlags(fs)
	security := kafkaclient.AddSecurityFlags(fs)
	httpFlags := ledger.AddHTTPFlags(fs, "127.0.0.1:8081")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "usage: windowed --state-dir DIR [flags]\n\nflags:")
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return err
		}
		return fmt.Errorf("%w (see -h for the flags)", err)
	}
	var problems []error
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Errorf("unexpected argument %q: every option is a flag, see -h", fs.Arg(0)))
	}
	if *stateDir == "" {
		problems = append(problems, errors.New("--state-dir is required: pass --state-dir DIR, the directory that keeps the windows' state"))
	}
	if *window < time.Millisecond || *window%time.Millisecond != 0 {
		problems = append(problems, fmt.Errorf("--window %v: pass a whole number of milliseconds, at least 1ms, e.g. 10s", *window))
	}
	if *grace < 0 || *grace%time.Millisecond != 0 {
		problems = append(problems, fmt.Errorf("--grace %v: pass zero or a whole number of milliseconds, e.g. 2s", *grace))
	}
	if *commitInterval <= 0 {
		problems = append(problems, fmt.Errorf("--commit-interval %v: pass a positive duration, e.g. 100ms", *commitInterval))
	}
	if *partitions < 1 {
		problems = append(problems, fmt.Errorf("--partitions %d: pass at least 1", *partitions))
	}
	if *brokerTimeout <= 0 {
		problems = append(problems, fmt.Errorf("--broker-timeout %v: pass a positive duration, e.g. 2m", *brokerTimeout))
	}
	for _, t := range []struct{ flag, topic string }{{"--input", *input}, {"--output", *output}} {
		if t.topic == "" {
			problems = append(problems, fmt.Errorf("%s is empty: pass a topic name", t.flag))
		}
	}
	if *output == *input || (*lateTopic != "" && (*lateTopic == *input || *lateTopic == *output)) {
		problems = append(problems, fmt.Errorf("--input %q, --output %q and --late-topic %q: pass three different topics", *input, *output, *lateTopic))
	}
	log, logErr := ledger.NewLogger(stderr, *logLevel, *logFormat)
	if logErr != nil {
		problems = append(problems, logErr)
	}
	kafkaOpts, secErr := security.ClientOpts()
	if secErr != nil {
		problems = append(problems, secErr)
	}
	if err := errors.Join(problems...); err != nil {
		return err
	}
	format, reg, releaseRegistry, err := formatFlags.Parse(ctx, log, *brokerTimeout)
	if err != nil {
		return err
	}
	defer releaseRegistry()
	web, err := httpFlags.Open()
	if err != nil {
		return err
	}
	defer web.Close() // a no-op once served; closes it on an early return
	seeds := strings.Split(*brokers, ",")
	outputs := []string{*output}
	if *lateTopic != "" {
		outputs = append(outputs, *lateTopic)
	}
	if err := ledger.CreateTopics(ctx, seeds, kafkaOpts, *brokerTimeout, log, *input, int32(*partitions), outputs...); err != nil {
		return err
	}
	o := Options{Input: *input, Output: *output, LateTopic: *lateTopic, Window: *window, Grace: *grace}
	if o.Payments, err = ledger.PaymentCodec(format, reg, *input); err != nil {
		return err
	}
	if *lateTopic != "" {
		if o.LatePayments, err = ledger.PaymentCodec(format, reg, *lateTopic); err != nil {
			return fmt.Errorf("--late-topic: %w", err)
		}
	}
	topo := Topology(o)
	cfg := eddy.Config{
		AppID:          *appID,
		Brokers:        seeds,
		StateDir:       *stateDir,
		CommitInterval: *commitInterval,
		BrokerTimeout:  *brokerTimeout,
		Logger:         log,
		KafkaOptions:   kafkaOpts,
		Endpoint:       web.Endpoint,
		HTTPToken:      web.Token,
		HTTPPeerTLS:    web.PeerTLS,
	}
	ledger.SetErrorPolicies(&cfg)
	defer ledger.Adjust(&cfg, opts)()
	app, err := eddy.New(topo, cfg)
	if err != nil {
		return err
	}
	return ledger.RunApp(ctx, app, web.Listener)
}
