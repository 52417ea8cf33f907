// Package verify reads topics back and checks a pipeline's output against
// its input, as a read_committed client sees them. The demo, the crash tests
// and the stress runs share it, so "exactly once" is measured one way.
package verify

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadAll returns every committed record of topic, partition by partition
// in offset order, up to the last stable offset at the time of the call.
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
	want := map[int32]kgo.Offset{}
	stop := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = kgo.NewOffset().AtStart()
			stop[o.Partition] = o.Offset
		}
	})
	if len(want) == 0 {
		return nil, nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("verify: client: %w", err)
	}
	defer cl.Close()
	byPartition := map[int32][]*kgo.Record{}
	for len(stop) > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("verify: read %s: %w (partitions left: %v)", topic, err, stop)
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			ferr = fmt.Errorf("verify: fetch %s/%d: %w", t, p, err)
		})
		if ferr != nil {
			return nil, ferr
		}
		fetches.EachRecord(func(r *kgo.Record) {
			end, ok := stop[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if r.Offset+1 >= end {
				delete(stop, r.Partition)
			}
			if !r.Attrs.IsControl() {
				byPartition[r.Partition] = append(byPartition[r.Partition], r)
			}
		})
	}
	var out []*kgo.Record
	for p := int32(0); len(byPartition) > 0; p++ {
		out = append(out, byPartition[p]...)
		delete(byPartition, p)
	}
	return out, nil
}
