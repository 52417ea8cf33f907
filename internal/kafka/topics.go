package kafka

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListTopics returns the names of the cluster's topics (those the client
// may describe), sorted; a topic's error (a leader being elected) does not
// hide its name. An unreachable broker is waited for, as by
// Partitions: it is the first request of an app's start.
func ListTopics(ctx context.Context, cl *kgo.Client) ([]string, error) {
	req := kmsg.NewPtrMetadataRequest() // null topics: every topic
	var resp *kmsg.MetadataResponse
	err := whileUnreachable(ctx, cl, func() (err error) {
		if err := cl.Ping(ctx); err != nil {
			return err
		}
		resp, err = req.RequestWith(ctx, cl)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("kafka: list topics: %w", err)
	}
	var names []string
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		// Kafka leaves out the topics the client may not describe; a
		// broker that lists them with this error is followed.
		if errors.Is(kerr.ErrorForCode(t.ErrorCode), kerr.TopicAuthorizationFailed) {
			continue
		}
		names = append(names, *t.Topic)
	}
	sort.Strings(names)
	return names, nil
}
