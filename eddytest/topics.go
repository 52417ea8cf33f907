package eddytest

import (
	"fmt"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
)

// InputTopic pipes typed records into one of the topology's source topics.
type InputTopic[K, V any] struct {
	d      *Driver
	topic  string
	keys   serde.Serde[K]
	values serde.Serde[V]
}

// Input returns a typed input for topic.
func Input[K, V any](d *Driver, topic string, keys serde.Serde[K], values serde.Serde[V]) *InputTopic[K, V] {
	return &InputTopic[K, V]{d: d, topic: topic, keys: keys, values: values}
}

// Pipe encodes and sends one record with event time ts (ms), as PipeRaw.
func (in *InputTopic[K, V]) Pipe(key K, value V, ts int64) error {
	k, err := in.keys.Serialize(nil, key)
	if err != nil {
		return fmt.Errorf("eddytest: encode key for %s: %w", in.topic, err)
	}
	v, err := in.values.Serialize([]byte{}, value)
	if err != nil {
		return fmt.Errorf("eddytest: encode value for %s: %w", in.topic, err)
	}
	return in.d.PipeRaw(in.topic, k, v, ts)
}

// PipeTombstone sends a record with a null value for key (a deletion, for
// a table's topic).
func (in *InputTopic[K, V]) PipeTombstone(key K, ts int64) error {
	k, err := in.keys.Serialize(nil, key)
	if err != nil {
		return fmt.Errorf("eddytest: encode key for %s: %w", in.topic, err)
	}
	return in.d.PipeRaw(in.topic, k, nil, ts)
}

// OutputTopic reads typed records from a topic the topology writes.
type OutputTopic[K, V any] struct {
	d      *Driver
	topic  string
	keys   serde.Serde[K]
	values serde.Serde[V]
}

// Output returns a typed reader of topic.
func Output[K, V any](d *Driver, topic string, keys serde.Serde[K], values serde.Serde[V]) *OutputTopic[K, V] {
	return &OutputTopic[K, V]{d: d, topic: topic, keys: keys, values: values}
}

// Len is the number of committed records not read yet.
func (out *OutputTopic[K, V]) Len() int { return out.d.outputLen(out.topic) }

// Read removes and decodes the oldest unread record; ok is false when
// there is none. A null value decodes as a tombstone.
func (out *OutputTopic[K, V]) Read() (rec eddy.Record[K, V], ok bool, err error) {
	r, ok := out.d.readOutput(out.topic)
	if !ok {
		return rec, false, nil
	}
	if rec.Key, err = out.keys.Deserialize(r.key); err != nil {
		return rec, true, fmt.Errorf("eddytest: decode key from %s: %w", out.topic, err)
	}
	if r.value == nil {
		rec.Tombstone = true
	} else if rec.Value, err = out.values.Deserialize(r.value); err != nil {
		return rec, true, fmt.Errorf("eddytest: decode value from %s: %w", out.topic, err)
	}
	rec.Timestamp, rec.Headers = r.timestamp, r.headers
	return rec, true, nil
}

// ReadAll removes and decodes every unread record.
func (out *OutputTopic[K, V]) ReadAll() ([]eddy.Record[K, V], error) {
	var recs []eddy.Record[K, V]
	for {
		r, ok, err := out.Read()
		if err != nil || !ok {
			return recs, err
		}
		recs = append(recs, r)
	}
}

// ReadKeyValues removes every unread record and returns keys and values
// only, the usual thing to compare with an expectation. Tombstones have the
// zero value.
func (out *OutputTopic[K, V]) ReadKeyValues() ([]eddy.KeyValue[K, V], error) {
	recs, err := out.ReadAll()
	kvs := make([]eddy.KeyValue[K, V], len(recs))
	for i, r := range recs {
		kvs[i] = eddy.KeyValue[K, V]{Key: r.Key, Value: r.Value}
	}
	return kvs, err
}

// KeyValueStore returns a typed view of the committed content of a
// key-value store (an aggregation's, or one declared for a processor).
func KeyValueStore[K, V any](d *Driver, spec eddy.KeyValueStoreSpec[K, V]) (*eddy.KeyValueStore[K, V], error) {
	t, err := d.storeTask(spec.StoreName())
	if err != nil {
		return nil, err
	}
	return spec.View(t.Buffer().Store(spec.StoreName()), t.StreamTime), nil
}

// WindowStore returns a typed view of the committed content of a window
// store (a windowed aggregation's, or one declared for a processor).
func WindowStore[K, V any](d *Driver, spec eddy.WindowStoreSpec[K, V]) (*eddy.WindowStore[K, V], error) {
	t, err := d.storeTask(spec.StoreName())
	if err != nil {
		return nil, err
	}
	return spec.View(t.Buffer().Store(spec.StoreName())), nil
}

// SessionStore returns a typed view of the committed content of a session
// store.
func SessionStore[K, V any](d *Driver, spec eddy.SessionStoreSpec[K, V]) (*eddy.SessionStore[K, V], error) {
	t, err := d.storeTask(spec.StoreName())
	if err != nil {
		return nil, err
	}
	return spec.View(t.Buffer().Store(spec.StoreName())), nil
}
