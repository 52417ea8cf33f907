package eddy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/internal/runtime"
)

// repartitionOrigin is a repartition topic of the topology and the
// operator whose stream it carries, for the startup check's advice.
type repartitionOrigin struct {
	topic string
	// name is the repartition's name (the topic without the app id and
	// "-repartition").
	name string
	// operator is the display name of the node whose records it carries.
	operator string
	// moves marks a name that depends on the operator's position
	// ("rekey-<n>", unnamed): adding an operator before it renames it.
	moves bool
}

// repartitionOrigins lists the topology's repartition topics for app appID
// with the operators they carry the records of, in declaration order.
func (t *Topology) repartitionOrigins(appID string) []repartitionOrigin {
	var out []repartitionOrigin
	for _, name := range t.repartitions {
		o := repartitionOrigin{topic: RepartitionTopic(appID, name), name: name}
		if n, ok := t.autoRepartitions[name]; ok {
			o.operator, o.moves = displayName(n), !n.named
		} else {
			for _, w := range t.nodes { // the repartition's writer, fed by the operator
				if t.writers[w] == repartitionPrefix+name && len(w.parents) > 0 {
					o.operator = displayName(w.parents[0])
					break
				}
			}
		}
		out = append(out, o)
	}
	return out
}

// orphanRepartition is a topic named like one of the app's repartition
// topics that the topology no longer has, and what its group left in it.
type orphanRepartition struct {
	topic string
	// committed reports whether the app's group ever committed an offset
	// on it: only then is it surely this app's (another app's id may
	// start with this one's).
	committed bool
	// unconsumed is how many records are past the group's commits (past
	// the log start where it committed none), over all partitions: the
	// records a read_committed consumer would get, not counting the
	// transaction markers that the offsets count (a drained topic written
	// in transactions ends with a marker past the last commit). For a
	// topic the group never consumed it is the offsets, not read.
	unconsumed int64
	// spans are the partitions' offsets past the group's commits.
	spans map[int32]kafka.Span
}

// checkTopologyChange refuses to start an app whose topology lost a
// repartition topic that still holds records the app has not consumed:
// typically an unnamed re-keyed operator renumbered by an operator added
// before it ("<app-id>-rekey-3-repartition" became "...-rekey-4-..."), so
// the records in flight in the old topic would never be read. Kafka
// Streams starts on the new name and loses them silently. With
// allowChange it logs them instead; a drained orphan is only logged.
func checkTopologyChange(ctx context.Context, opts []kgo.Opt, appID string, origins []repartitionOrigin, allowChange bool, log *slog.Logger) error {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("eddy: admin client: %w", err)
	}
	defer cl.Close()
	orphans, existing, err := findOrphanRepartitions(ctx, cl, appID, origins)
	if err != nil {
		return err
	}
	if err := countUnconsumed(ctx, opts, orphans); err != nil {
		return err
	}
	var errs []error
	for _, o := range orphans {
		switch {
		case !o.committed && o.unconsumed > 0:
			log.Warn("a topic named like a repartition topic of this app holds records but the app's group never consumed it: left alone (does another app's id start with this one's?)",
				"topic", o.topic, "records", o.unconsumed)
		case !o.committed || o.unconsumed == 0:
			log.Info("repartition topic not in the topology any more, and nothing in it is left to consume: it can be deleted",
				"topic", o.topic)
		case allowChange:
			log.Warn("repartition topic not in the topology any more: Config.AllowTopologyChange is set, so the records the app has not consumed in it are left behind for good",
				"topic", o.topic, "unconsumed", o.unconsumed)
		default:
			errs = append(errs, orphanError(appID, o, origins, existing))
		}
	}
	return errors.Join(errs...)
}

// orphanError explains an orphan with records in flight and the fixes.
func orphanError(appID string, o orphanRepartition, origins []repartitionOrigin, existing map[string]bool) error {
	old := strings.TrimSuffix(strings.TrimPrefix(o.topic, appID+"-"), "-repartition")
	var fresh []repartitionOrigin // the topology's repartition topics the brokers do not have yet
	for _, r := range origins {
		if !existing[r.topic] {
			fresh = append(fresh, r)
		}
	}
	var advice string
	switch {
	case len(fresh) == 0:
		advice = " No new repartition topic of the topology replaces it: run the previous topology until it has consumed the topic."
	case len(fresh) == 1 && fresh[0].moves:
		advice = fmt.Sprintf(" The topology's new repartition topic %s (the records of operator %s) most likely replaced it: an operator was added or removed before %s. To keep reading it, wrap the stream that operator %s produces in eddy.Named(stream, %q): its repartition then keeps that name whatever its position (rename it once the topic is drained).",
			fresh[0].topic, fresh[0].operator, fresh[0].operator, fresh[0].operator, old)
	case len(fresh) == 1:
		advice = fmt.Sprintf(" The topology's new repartition topic %s (the records of operator %s) most likely replaced it. To keep reading it, give that repartition its old name %q back until the topic is drained.",
			fresh[0].topic, fresh[0].operator, old)
	default:
		var names []string
		for _, r := range fresh {
			names = append(names, fmt.Sprintf("%s (the records of operator %s)", r.topic, r.operator))
		}
		advice = fmt.Sprintf(" One of the topology's new repartition topics most likely replaced it: %s. To keep reading it, give the one that replaced it its old name %q back (eddy.Named(stream, %q) on the stream of an unnamed operator) until the topic is drained.",
			strings.Join(names, ", "), old, old)
	}
	return fmt.Errorf("eddy: repartition topic %s is not in the topology any more and holds %d records the app has not consumed (past its group's committed offsets): starting would leave them unread for good.%s Or set Config.AllowTopologyChange to start without them, and delete the topic",
		o.topic, o.unconsumed, advice)
}

// findOrphanRepartitions lists the topics named "<appID>-...-repartition"
// that origins do not hold, with what the app's group (its app id) left in
// each; existing are all the brokers' topics.
func findOrphanRepartitions(ctx context.Context, cl *kgo.Client, appID string, origins []repartitionOrigin) (_ []orphanRepartition, existing map[string]bool, _ error) {
	topics, err := kafka.ListTopics(ctx, cl)
	if err != nil {
		return nil, nil, fmt.Errorf("eddy: %w", err)
	}
	existing = map[string]bool{}
	var names []string
	for _, topic := range topics {
		existing[topic] = true
		if mid, ok := strings.CutPrefix(topic, appID+"-"); ok && strings.HasSuffix(mid, "-repartition") && len(mid) > len("-repartition") &&
			!slices.ContainsFunc(origins, func(o repartitionOrigin) bool { return o.topic == topic }) {
			names = append(names, topic)
		}
	}
	if len(names) == 0 {
		return nil, existing, nil
	}
	adm := kadm.NewClient(cl)
	committed, err := adm.FetchOffsets(ctx, appID)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return nil, nil, fmt.Errorf("eddy: group %s: fetch offsets: %w", appID, err)
	}
	ends, err := adm.ListCommittedOffsets(ctx, names...)
	if err != nil {
		return nil, nil, fmt.Errorf("eddy: end offsets of %v: %w", names, err)
	}
	starts, err := adm.ListStartOffsets(ctx, names...)
	if err != nil {
		return nil, nil, fmt.Errorf("eddy: start offsets of %v: %w", names, err)
	}
	orphans := make([]orphanRepartition, len(names))
	for i, name := range names {
		orphans[i].topic = name
	}
	var errs []error
	ends.Each(func(e kadm.ListedOffset) {
		if e.Err != nil {
			errs = append(errs, fmt.Errorf("%s/%d: %w", e.Topic, e.Partition, e.Err))
			return
		}
		i := slices.Index(names, e.Topic)
		if i < 0 {
			return
		}
		o := &orphans[i]
		from := int64(0)
		if s, ok := starts.Lookup(e.Topic, e.Partition); ok && s.Err == nil {
			from = s.Offset
		}
		if c, ok := committed.Lookup(e.Topic, e.Partition); ok && c.Err == nil && c.At >= 0 {
			o.committed = true
			from = max(from, c.At)
		}
		if e.Offset > from {
			o.unconsumed += e.Offset - from
			if o.spans == nil {
				o.spans = map[int32]kafka.Span{}
			}
			o.spans[e.Partition] = kafka.Span{From: from, End: e.Offset}
		}
	})
	if len(errs) > 0 {
		return nil, nil, fmt.Errorf("eddy: end offsets: %w", errors.Join(errs...))
	}
	return orphans, existing, nil
}

// countUnconsumed replaces the offsets past the group's commits of the
// orphans it consumed with the records there: reading them is the only way
// to tell records from transaction markers. It reads only what is in
// flight, usually little.
func countUnconsumed(ctx context.Context, opts []kgo.Opt, orphans []orphanRepartition) error {
	for i := range orphans {
		o := &orphans[i]
		if !o.committed || o.unconsumed == 0 {
			continue
		}
		o.unconsumed = 0
		err := kafka.ReadCommitted(ctx, opts, map[string]map[int32]kafka.Span{o.topic: o.spans}, func(r *kgo.Record) error {
			if !runtime.IsEndMarker(r) { // a bounded run's end marker is no data
				o.unconsumed++
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("eddy: read the unconsumed records of %s: %w", o.topic, err)
		}
	}
	return nil
}

// checkTopologyChangeOnStart runs checkTopologyChange with the app's
// client options: every Run, before the runtime creates the topology's
// repartition topics (which the advice tells apart as new).
func checkTopologyChangeOnStart(ctx context.Context, cfg Config, opts []kgo.Opt, origins []repartitionOrigin, log *slog.Logger) error {
	opts = append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, opts...)
	return checkTopologyChange(ctx, opts, cfg.AppID, origins, cfg.AllowTopologyChange, log)
}
