package kafka

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// PartitionLag is how far a consumer group is behind on one partition.
type PartitionLag struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed is the group's committed offset: the next record it will
	// process; -1 when the group has committed none (it starts at the
	// partition's first record).
	Committed int64 `json:"committed"`
	// End is the last stable offset: the end of what a read_committed
	// consumer can read. For a topic written in transactions it stops at
	// the first record of the oldest open transaction, and it counts
	// commit markers (one offset each) like records, as Kafka's tools do.
	End int64 `json:"end"`
	// Lag is End minus Committed (minus the log start when nothing is
	// committed), never negative.
	Lag int64 `json:"lag"`
	// Member is who owns the partition now: the member's instance id
	// (static membership) or member id; empty when no member has it.
	Member string `json:"member,omitempty"`
}

// GroupLag returns the lag of group on every partition it has committed
// offsets for or that a member is assigned, ordered by topic and partition.
// It returns an error naming the group when the group has neither.
func GroupLag(ctx context.Context, cl *kgo.Client, group string) ([]PartitionLag, error) {
	adm := kadm.NewClient(cl)
	noGroup := fmt.Errorf("kafka: group %s has no committed offsets and no members: is it the app's --app-id, and has the app run?", group)
	committed, err := adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return nil, noGroup
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: group %s: fetch offsets: %w", group, err)
	}
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("kafka: group %s: describe: %w", group, err)
	}
	owners := map[string]map[int32]string{}
	for _, m := range described[group].Members {
		a, ok := m.Assigned.AsConsumer()
		if !ok {
			continue
		}
		name := m.MemberID
		if m.InstanceID != nil {
			name = *m.InstanceID
		}
		for _, t := range a.Topics {
			if owners[t.Topic] == nil {
				owners[t.Topic] = map[int32]string{}
			}
			for _, p := range t.Partitions {
				owners[t.Topic][p] = name
			}
		}
	}
	topics := map[string]bool{}
	for t := range committed {
		topics[t] = true
	}
	for t := range owners {
		topics[t] = true
	}
	if len(topics) == 0 {
		return nil, noGroup
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	ends, err := adm.ListCommittedOffsets(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("kafka: group %s: list end offsets: %w", group, err)
	}
	starts, err := adm.ListStartOffsets(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("kafka: group %s: list start offsets: %w", group, err)
	}
	var lags []PartitionLag
	var errs []error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, fmt.Errorf("%s/%d: %w", o.Topic, o.Partition, o.Err))
			return
		}
		l := PartitionLag{Topic: o.Topic, Partition: o.Partition, Committed: -1, End: o.Offset, Member: owners[o.Topic][o.Partition]}
		from := int64(0)
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok && s.Err == nil {
			from = s.Offset
		}
		if c, ok := committed.Lookup(o.Topic, o.Partition); ok && c.Err == nil && c.At >= 0 {
			l.Committed, from = c.At, c.At
		}
		l.Lag = max(l.End-from, 0)
		lags = append(lags, l)
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("kafka: group %s: end offsets: %v", group, errs)
	}
	sort.Slice(lags, func(i, j int) bool {
		if lags[i].Topic != lags[j].Topic {
			return lags[i].Topic < lags[j].Topic
		}
		return lags[i].Partition < lags[j].Partition
	})
	return lags, nil
}
