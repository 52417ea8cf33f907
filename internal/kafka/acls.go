package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AppResources are the Kafka resources an eddy application uses.
type AppResources struct {
	// AppID is the application id: its consumer group, and the prefix
	// ("<app-id>-") of its internal topics (changelogs, repartition
	// topics) and of its transactional ids.
	AppID string
	// Inputs are the topics it reads (sources, global tables).
	Inputs []string
	// Outputs are the topics it writes (sinks, late-record topics).
	Outputs []string
	// DeadLetters are its dead-letter topics ("<input>.dlq").
	DeadLetters []string
	// CreateTopics lets it create its inputs and outputs when they are
	// missing, as the examples do; without it they must exist.
	CreateTopics bool
}

// ACLRule allows a set of operations on one resource, or on every
// resource whose name starts with Name when Prefixed.
type ACLRule struct {
	Resource   kmsg.ACLResourceType
	Name       string
	Prefixed   bool
	Operations []kmsg.ACLOperation
}

// AppACLs returns the ACLs an eddy application needs, and no more: read
// its inputs, write its outputs and dead-letter topics, everything on its
// own internal topics ("<app-id>-" prefixed: created, read and written by
// it alone), its group, and its transactional ids ("<app-id>-" prefixed).
// Kafka Streams documents the same set (its "Required ACL setting for
// secure Kafka clusters").
func AppACLs(r AppResources) []ACLRule {
	const (
		read     = kmsg.ACLOperationRead
		write    = kmsg.ACLOperationWrite
		describe = kmsg.ACLOperationDescribe
		create   = kmsg.ACLOperationCreate
		descCfg  = kmsg.ACLOperationDescribeConfigs
	)
	var rules []ACLRule
	topic := func(name string, ops ...kmsg.ACLOperation) {
		if r.CreateTopics {
			ops = append(ops, create)
		}
		rules = append(rules, ACLRule{Resource: kmsg.ACLResourceTypeTopic, Name: name, Operations: ops})
	}
	for _, t := range r.Inputs {
		topic(t, read, describe)
	}
	for _, t := range r.Outputs {
		topic(t, write, describe)
	}
	for _, t := range r.DeadLetters {
		rules = append(rules, ACLRule{Resource: kmsg.ACLResourceTypeTopic, Name: t, Operations: []kmsg.ACLOperation{write, describe, create}})
	}
	prefix := r.AppID + "-"
	rules = append(rules,
		ACLRule{Resource: kmsg.ACLResourceTypeTopic, Name: prefix, Prefixed: true, Operations: []kmsg.ACLOperation{read, write, describe, create, descCfg, kmsg.ACLOperationDelete}},
		ACLRule{Resource: kmsg.ACLResourceTypeGroup, Name: r.AppID, Operations: []kmsg.ACLOperation{read, describe}},
		ACLRule{Resource: kmsg.ACLResourceTypeTransactionalId, Name: prefix, Prefixed: true, Operations: []kmsg.ACLOperation{write, describe}},
	)
	return rules
}

// CreateACLs creates rules for principal ("User:NAME") with a client that
// may (a superuser), and returns every failure at once.
func CreateACLs(ctx context.Context, cl *kgo.Client, principal string, rules []ACLRule) error {
	adm := kadm.NewClient(cl)
	var errs []error
	for _, r := range rules {
		b := kadm.NewACLs().Allow(principal).AllowHosts("*").Operations(operations(r.Operations)...)
		switch r.Resource {
		case kmsg.ACLResourceTypeTopic:
			b = b.Topics(r.Name)
		case kmsg.ACLResourceTypeGroup:
			b = b.Groups(r.Name)
		case kmsg.ACLResourceTypeTransactionalId:
			b = b.TransactionalIDs(r.Name)
		case kmsg.ACLResourceTypeCluster:
			b = b.Clusters()
		}
		if r.Prefixed {
			b = b.ResourcePatternType(kadm.ACLPatternPrefixed)
		} else {
			b = b.ResourcePatternType(kadm.ACLPatternLiteral)
		}
		results, err := adm.CreateACLs(ctx, b)
		if err != nil {
			errs = append(errs, fmt.Errorf("kafka: create ACLs on %s: %w", r, err))
			continue
		}
		for _, res := range results {
			if res.Err != nil {
				errs = append(errs, fmt.Errorf("kafka: create ACL %s %s: %w", res.Operation, r, res.Err))
			}
		}
	}
	return errors.Join(errs...)
}

func operations(ops []kmsg.ACLOperation) []kadm.ACLOperation {
	out := make([]kadm.ACLOperation, len(ops))
	for i, o := range ops {
		out[i] = kadm.ACLOperation(o)
	}
	return out
}

// String describes the rule, e.g. "topic prefixed ledger- (READ, WRITE)".
func (r ACLRule) String() string {
	pattern := "literal"
	if r.Prefixed {
		pattern = "prefixed"
	}
	ops := make([]string, len(r.Operations))
	for i, o := range r.Operations {
		ops[i] = o.String()
	}
	return fmt.Sprintf("%s %s %s (%s)", strings.ToLower(r.Resource.String()), pattern, r.Name, strings.Join(ops, ", "))
}

// KafkaACLsCommand is the kafka-acls.sh command line that creates the
// rule for principal, for operators of a real cluster.
func (r ACLRule) KafkaACLsCommand(principal string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "kafka-acls.sh --bootstrap-server BROKER --add --allow-principal %s", principal)
	for _, o := range r.Operations {
		fmt.Fprintf(&b, " --operation %s", aclOperationName(o))
	}
	switch r.Resource {
	case kmsg.ACLResourceTypeTopic:
		fmt.Fprintf(&b, " --topic %s", r.Name)
	case kmsg.ACLResourceTypeGroup:
		fmt.Fprintf(&b, " --group %s", r.Name)
	case kmsg.ACLResourceTypeTransactionalId:
		fmt.Fprintf(&b, " --transactional-id %s", r.Name)
	case kmsg.ACLResourceTypeCluster:
		b.WriteString(" --cluster")
	}
	if r.Prefixed {
		b.WriteString(" --resource-pattern-type prefixed")
	}
	return b.String()
}

// aclOperationName is kafka-acls.sh's name of o ("DescribeConfigs").
func aclOperationName(o kmsg.ACLOperation) string {
	var b strings.Builder
	for _, part := range strings.Split(strings.ToLower(o.String()), "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}
