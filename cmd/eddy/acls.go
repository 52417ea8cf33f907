package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/kafkaclient"
)

// runACLs prints the ACLs an application needs, as kafka-acls.sh commands,
// or creates them (--apply) with an administrator's credentials.
func runACLs(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("acls", flag.ContinueOnError)
	appID := fs.String("app-id", "", "the application id (required)")
	user := fs.String("user", "", "the SASL user the application authenticates as (required)")
	inputs := fs.String("inputs", "", "comma-separated topics the application reads")
	outputs := fs.String("outputs", "", "comma-separated topics the application writes")
	noDLQ := fs.Bool("no-dlq", false, "the application dead-letters nothing (by default each input's <input>.dlq is allowed)")
	createTopics := fs.Bool("create-topics", false, "let the application create its inputs and outputs (the examples do when they are missing)")
	apply := fs.Bool("apply", false, "create the ACLs on --brokers instead of printing them; authenticate as a superuser with the security flags")
	brokers := fs.String("brokers", "127.0.0.1:9092", "with --apply: comma-separated Kafka bootstrap servers")
	brokerTimeout := fs.Duration("broker-timeout", kafkaclient.DefaultBrokerTimeout, "with --apply: give up when no broker of --brokers answered within this long (unreachable brokers are logged meanwhile)")
	security := kafkaclient.AddSecurityFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: eddy acls --app-id ID --user NAME --inputs T,... --outputs T,... [--apply --brokers ... --sasl-user ADMIN ...]\n\nThe ACLs an eddy application needs on a cluster with authorization on, and no more:\nread its inputs, write its outputs and dead-letter topics, its internal topics\n(<app-id>- prefixed), its group, its transactional ids (<app-id>- prefixed).\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	var problems []error
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Errorf("unexpected argument %q: every option is a flag, see -h", fs.Arg(0)))
	}
	if *appID == "" {
		problems = append(problems, errors.New("--app-id is required: the application id"))
	}
	if *user == "" {
		problems = append(problems, errors.New("--user is required: the SASL user the application runs as"))
	}
	if *inputs == "" {
		problems = append(problems, errors.New("--inputs is required: the topics the application reads"))
	}
	if *brokerTimeout <= 0 {
		problems = append(problems, fmt.Errorf("--broker-timeout %v: must be positive, e.g. 30s", *brokerTimeout))
	}
	if err := errors.Join(problems...); err != nil {
		return err
	}
	r := kafka.AppResources{AppID: *appID, Inputs: split(*inputs), Outputs: split(*outputs), CreateTopics: *createTopics}
	if !*noDLQ {
		for _, in := range r.Inputs {
			r.DeadLetters = append(r.DeadLetters, eddy.DeadLetterTopic(in))
		}
	}
	rules := kafka.AppACLs(r)
	principal := "User:" + *user
	if !*apply {
		for _, rule := range rules {
			fmt.Println(rule.KafkaACLsCommand(principal))
		}
		return nil
	}
	opts, err := security.ClientOpts()
	if err != nil {
		return err
	}
	err = kafkaclient.WatchBrokers(ctx, split(*brokers), *brokerTimeout, stderrLogger(), func(ctx context.Context, watch kgo.Opt) error {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(split(*brokers)...), watch}, opts...)...)
		if err != nil {
			return fmt.Errorf("--brokers %s: %w", *brokers, err)
		}
		defer cl.Close()
		return kafka.CreateACLs(ctx, cl, principal, rules)
	})
	if err != nil {
		return err
	}
	for _, rule := range rules {
		fmt.Fprintf(os.Stdout, "created: %s %s\n", principal, rule)
	}
	return nil
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
