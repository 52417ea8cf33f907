package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrUnknownTopic is returned (wrapped, with the topic names) by
// Partitions when a topic does not exist.
var ErrUnknownTopic = errors.New("kafka: unknown topic")

// cleanupPolicy is the topic config that TopicSpec.Compacted sets.
const cleanupPolicy = "cleanup.policy"

// TopicSpec describes a topic for CreateTopics.
type TopicSpec struct {
	// Name is the topic name; required.
	Name string

	// Partitions is the partition count. 0 uses the broker's default
	// (num.partitions; the embedded broker's DefaultPartitions).
	Partitions int32

	// Compacted sets cleanup.policy=compact, as changelog topics need:
	// the latest record per key is kept forever instead of expiring.
	Compacted bool

	// Configs are further topic configs (e.g. "min.compaction.lag.ms").
	// A cleanup.policy here must agree with Compacted.
	Configs map[string]string
}

// validate returns every problem with the spec, so a caller fixes them
// all in one round.
func (s TopicSpec) validate() error {
	var errs []error
	if s.Name == "" {
		errs = append(errs, errors.New("kafka: topic spec with an empty name"))
	}
	if s.Partitions < 0 {
		errs = append(errs, fmt.Errorf("kafka: topic %q: partitions is %d, want 0 (broker default) or more", s.Name, s.Partitions))
	}
	if v, ok := s.Configs[cleanupPolicy]; ok && s.Compacted && !strings.Contains(v, "compact") {
		errs = append(errs, fmt.Errorf("kafka: topic %q: Compacted conflicts with %s=%s", s.Name, cleanupPolicy, v))
	}
	return errors.Join(errs...)
}

func (s TopicSpec) configs() map[string]*string {
	cfgs := make(map[string]*string, len(s.Configs)+1)
	for k, v := range s.Configs {
		cfgs[k] = kadm.StringPtr(v)
	}
	if _, ok := cfgs[cleanupPolicy]; s.Compacted && !ok {
		cfgs[cleanupPolicy] = kadm.StringPtr("compact")
	}
	return cfgs
}

// CreateTopics creates the topics that do not exist yet; existing ones
// are left alone (not an error), whatever their partition count or
// configs, also when the client may not create topics but sees them. An unreachable broker is waited for (StartupWait). Creating instead of listing first makes this safe against
// other instances of the application creating the same topics at the same
// time. Replication uses the broker's default. Every failed topic is
// reported, not only the first.
func CreateTopics(ctx context.Context, cl *kgo.Client, specs ...TopicSpec) error {
	var errs []error
	for _, s := range specs {
		if err := s.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}

	adm := kadm.NewClient(cl)
	for _, s := range specs {
		partitions := s.Partitions
		if partitions == 0 {
			partitions = -1 // the broker's default, Kafka 2.4+
		}
		var resps kadm.CreateTopicResponses
		err := whileUnreachable(ctx, cl, func() (err error) {
			if err := cl.Ping(ctx); err != nil {
				return err
			}
			resps, err = adm.CreateTopics(ctx, partitions, -1, s.configs(), s.Name)
			return err
		})
		if err != nil {
			// The request itself failed (connection, context): later
			// topics would fail the same way.
			return fmt.Errorf("kafka: create topic %q: %w", s.Name, err)
		}
		r, ok := resps[s.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("kafka: create topic %q: missing from the broker's response", s.Name))
			continue
		}
		if errors.Is(r.Err, kerr.TopicAuthorizationFailed) {
			// Kafka checks the CREATE permission before it looks for
			// the topic: an app allowed only to describe and write a
			// topic an operator created is told "not authorized", not
			// "exists". It exists if we can see it.
			if _, err := Partitions(ctx, cl, s.Name); err == nil {
				continue
			}
		}
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			msg := ""
			if r.ErrMessage != "" {
				msg = " (" + r.ErrMessage + ")"
			}
			errs = append(errs, fmt.Errorf("kafka: create topic %q: %w%s", s.Name, r.Err, msg))
		}
	}
	return errors.Join(errs...)
}

// Partitions returns the partition count of each topic. Missing topics
// are an error wrapping ErrUnknownTopic that names all of them. An
// unreachable broker is waited for (StartupWait).
//
// It asks the broker directly rather than through kadm's metadata cache:
// that cache keeps a topic's "unknown" answer for a few seconds, so a
// check, CreateTopics, check sequence would report a topic it has just
// created as missing. The request also never auto-creates a topic.
func Partitions(ctx context.Context, cl *kgo.Client, topics ...string) (map[string]int32, error) {
	counts := make(map[string]int32, len(topics))
	if len(topics) == 0 {
		// An empty topic list in a metadata request means every topic.
		return counts, nil
	}
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	var resp *kmsg.MetadataResponse
	err := whileUnreachable(ctx, cl, func() (err error) {
		if err := cl.Ping(ctx); err != nil {
			return err
		}
		resp, err = req.RequestWith(ctx, cl)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("kafka: metadata for %s: %w", strings.Join(topics, ", "), err)
	}

	var errs []error
	failed := make(map[string]bool)
	for _, rt := range resp.Topics {
		if rt.Topic == nil {
			continue
		}
		if rt.ErrorCode != 0 {
			err := kerr.ErrorForCode(rt.ErrorCode)
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				continue // reported below with the other missing topics
			}
			failed[*rt.Topic] = true
			errs = append(errs, fmt.Errorf("kafka: metadata for topic %q: %w", *rt.Topic, err))
			continue
		}
		counts[*rt.Topic] = int32(len(rt.Partitions))
	}
	var missing []string
	for _, t := range topics {
		if _, ok := counts[t]; !ok && !failed[t] && !slices.Contains(missing, t) {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("%w: %s", ErrUnknownTopic, strings.Join(missing, ", ")))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return counts, nil
}
