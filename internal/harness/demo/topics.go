package demo

import (
	"context"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func topicExists(ctx context.Context, cl *kgo.Client, topic string) (bool, error) {
	td, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		return false, err
	}
	d, ok := td[topic]
	return ok && d.Err == nil && len(d.Partitions) > 0, nil
}
