// Package verify reads topics back and checks a pipeline's output against
// its input, as a read_committed client sees them. The demo, the crash tests
// and the stress runs share it, so "exactly once" is measured one way.
package verify

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
)

// ReadAll returns every committed record of topic, partition by partition
// in offset order, up to the last stable offset at the time of the call:
// what a read_committed consumer reads (see kafka.ReadCommitted for why it
// does not simply consume with read_committed).
func ReadAll(ctx context.Context, seeds []string, topic string, opts ...kgo.Opt) ([]*kgo.Record, error) {
	admin, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("verify: client: %w", err)
	}
	defer admin.Close()
	ends, err := kadm.NewClient(admin).ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("verify: end offsets of %s: %w", topic, err)
	}
	spans := map[int32]kafka.Span{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			spans[o.Partition] = kafka.Span{From: 0, End: o.Offset}
		}
	})
	byPartition := map[int32][]*kgo.Record{}
	err = kafka.ReadCommitted(ctx, append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...),
		map[string]map[int32]kafka.Span{topic: spans},
		func(r *kgo.Record) error {
			byPartition[r.Partition] = append(byPartition[r.Partition], r)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("verify: read %s: %w", topic, err)
	}
	var out []*kgo.Record
	for p := int32(0); len(byPartition) > 0; p++ {
		out = append(out, byPartition[p]...)
		delete(byPartition, p)
	}
	return out, nil
}
