package kafkaclient

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
)

// CreateTopics creates each of topics that does not exist yet with
// partitions partitions (0: the broker's default). An existing topic is
// left alone whatever its partition count, also when the client may not
// create topics but can see it; replication is the broker's default. An
// unreachable broker is waited for (up to two minutes, as for a broker
// starting after the app). Every topic that failed is reported.
//
// Creating rather than listing first makes it safe against other
// instances of the application creating the same topics at the same time.
func CreateTopics(ctx context.Context, cl *kgo.Client, partitions int32, topics ...string) error {
	if partitions < 0 {
		return fmt.Errorf("eddy: create topics %q: %d partitions; pass 0 (the broker's default) or more", topics, partitions)
	}
	specs := make([]kafka.TopicSpec, len(topics))
	for i, t := range topics {
		specs[i] = kafka.TopicSpec{Name: t, Partitions: partitions}
	}
	if err := kafka.CreateTopics(ctx, cl, specs...); err != nil {
		return fmt.Errorf("eddy: %w", err)
	}
	return nil
}

// CreateTopicsLike creates each of topics that does not exist yet with
// the partition count of model, which must exist: the outputs of an app
// that keeps keys where they are, so that partition n of every topic holds
// the keys of partition n of model (what a join of them, or a reader of
// both, relies on). Existing topics are left alone, as in CreateTopics.
func CreateTopicsLike(ctx context.Context, cl *kgo.Client, model string, topics ...string) error {
	parts, err := kafka.Partitions(ctx, cl, model)
	if err != nil {
		return fmt.Errorf("eddy: create topics %q with the partition count of %s: %w", topics, model, err)
	}
	return CreateTopics(ctx, cl, parts[model], topics...)
}

// Partitions returns the partition count of each topic. Missing topics are
// one error that names all of them. An unreachable
// broker is waited for, as in CreateTopics.
func Partitions(ctx context.Context, cl *kgo.Client, topics ...string) (map[string]int32, error) {
	parts, err := kafka.Partitions(ctx, cl, topics...)
	if err != nil {
		return nil, fmt.Errorf("eddy: %w", err)
	}
	return parts, nil
}
