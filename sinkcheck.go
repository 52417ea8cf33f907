package eddy

import (
	"context"
	"fmt"
)

// serdeChecker is a serde that can check its schema before the first
// record: the schema-registry serdes (serde/avro, serde/protobuf,
// serde/jsonschema) register theirs, look it up or fetch the subject's
// latest, and keep the registry's refusal.
type serdeChecker interface {
	Check(ctx context.Context) error
}

// sinkCheck is the check of one sink serde, with what it encodes.
type sinkCheck struct {
	topic, side string
	check       func(ctx context.Context) error
}

// addSinkChecks keeps the checks of a sink's serdes that have one.
func (t *Topology) addSinkChecks(topic string, keys, values any) {
	for _, s := range []struct {
		side  string
		serde any
	}{{"key", keys}, {"value", values}} {
		if c, ok := s.serde.(serdeChecker); ok {
			t.sinkChecks = append(t.sinkChecks, sinkCheck{topic: topic, side: s.side, check: c.Check})
		}
	}
}

// checkSinkSerdes runs the checks of the serdes of the topics the app
// writes (To and repartitions), so that a schema the registry refuses
// (incompatible with its subject, or unregistered with auto-register off)
// stops the app at start with the registry's message, before a record is
// processed, as a Confluent serializer's first record would later.
// Sources are not checked: a deserializer registers nothing. A ctx
// cancelled meanwhile (a stop while the registry is retried) is not an
// error: Run returns nil, as it does for a stop.
func checkSinkSerdes(ctx context.Context, appID string, checks []sinkCheck) error {
	for _, c := range checks {
		if err := c.check(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("eddy: the %s serde of topic %q: %w", c.side, topicName(appID, c.topic), err)
		}
	}
	return nil
}
