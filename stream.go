package eddy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/runtime"
	"github.com/eddy-streams/eddy/serde"
)

// Stream is an unbounded sequence of keyed records (a KStream).
type Stream[K, V any] struct {
	t *Topology
	n *node
	// keyChanged is set once an operation may have changed the key, so
	// the records may no longer sit on the partition of their key.
	keyChanged bool
	// values encodes the values when known (from the Source, through the
	// operators that keep the value type), so a grouping or a join after
	// a key change can repartition by itself.
	values serde.Serde[V]
}

// autoRepartition sends s through a repartition topic named after s's
// node (see autoRepartitionName), when it may sit on the wrong partitions and
// its values' serde is known; what says which operation needs it, for the
// error when the serde is not known.
func autoRepartition[K, V any](s Stream[K, V], keys serde.Serde[K], what string) Stream[K, V] {
	if !s.keyChanged {
		return s
	}
	if s.values == nil {
		s.t.failOn(what, s.n, "it follows an operation that may change the key and the value type (Map, FlatMap, Process): the records may sit on another key's partition and eddy does not know how to encode their values; use eddy.Repartition(s, name, keys, values) before it (or eddy.GroupBy to re-key and group in one step)")
		return s
	}
	// One repartition per re-keyed stream, however many use it.
	if r, ok := s.t.rekeyed[s.n]; ok {
		return r.(Stream[K, V])
	}
	name := autoRepartitionName(s.n)
	if s.n.named && slices.Contains(s.t.repartitions, name) {
		s.t.failOn(what, s.n, "its repartition is named %q after the operator eddy.Named named, and a repartition of that name is already declared; give the operator or the repartition another name", name)
		return s
	}
	r := Repartition(s, name, keys, s.values)
	s.t.rekeyed[s.n] = r
	s.t.autoRepartitions[name] = s.n
	return r
}

// autoRepartitionName is the name of the repartition autoRepartition adds
// after node n: n's own name if the user gave one (eddy.Named), which
// keeps the topic whatever operators are added before n; else
// "rekey-<position of n>", which moves when an operator is added before
// n (the startup check refuses to lose the records left in the old topic:
// see orphans.go).
func autoRepartitionName(n *node) string {
	if n.named {
		return n.name
	}
	return "rekey-" + n.name[strings.LastIndex(n.name, "-")+1:]
}

// Topology returns the topology the stream belongs to.
func (s Stream[K, V]) Topology() *Topology { return s.t }

// Source reads topic, decoding keys and values with the serdes. A record
// that fails to decode goes to the dead-letter topic "<topic>.dlq" with the
// reason in its headers, or stops the app, as Config.OnDecodeError says.
//
// A record's event time is its Kafka timestamp, or what the TimestampFrom
// option extracts; it advances the task's stream time before the record is
// processed. A negative event time, one the Kafka client cannot represent
// (after 2262) and one more than Config.MaxEventTimeAhead ahead of the wall
// clock are bad input, handled like a record that fails to decode, with
// stage "time".
func Source[K, V any](t *Topology, topic string, keys serde.Serde[K], values serde.Serde[V], opts ...SourceOption) Stream[K, V] {
	return source(t, topic, keys, values, opts...)
}

// source adds the node that reads topic, which may be a repartition
// topic's placeholder (see repartitionSource).
func source[K, V any](t *Topology, topic string, keys serde.Serde[K], values serde.Serde[V], opts ...SourceOption) Stream[K, V] {
	n := t.add("source-" + topic)
	if _, dup := t.sources[topic]; dup {
		t.fail("eddy: topic %s is a source twice; read it once and branch the stream", topic)
	}
	t.sources[topic] = n
	sc, extract := sourceOptions[K, V](t, "source "+topic, opts)
	n.build = func(b *taskBuild) error {
		out := &emitter[K, V]{}
		b.out[n] = out
		real := topicName(b.cfg.AppID, topic)
		b.sources[real] = &sourceNode[K, V]{b: b, topic: real, keys: keys, values: values, out: out, ts: extract, table: sc.table,
			wallClock: sc.wallClock, internal: real != topic, maxAhead: aheadMillis(b.cfg.MaxEventTimeAhead)}
		return nil
	}
	return Stream[K, V]{t: t, n: n, values: values}
}

// sourceOptions applies a source's options; what names the source in the
// error when TimestampFrom's function does not fit its key and value types.
func sourceOptions[K, V any](t *Topology, what string, opts []SourceOption) (sourceConfig, func(K, V, int64) int64) {
	var sc sourceConfig
	for _, o := range opts {
		o(&sc)
	}
	var extract func(K, V, int64) int64
	if sc.timestamp != nil {
		var ok bool
		if extract, ok = sc.timestamp.(func(K, V, int64) int64); !ok {
			var k K
			var v V
			t.fail("eddy: %s: TimestampFrom's function is a %T; this source's records need a func(%T, %T, int64) int64", what, sc.timestamp, k, v)
		}
	}
	return sc, extract
}

// repartitionPrefix marks a repartition topic in the description, where
// the app id that prefixes its real name is not known yet.
const repartitionPrefix = "\x00repartition:"

// topicName resolves a topic of the description to its name in Kafka.
func topicName(appID, topic string) string {
	if name, ok := strings.CutPrefix(topic, repartitionPrefix); ok {
		return RepartitionTopic(appID, name)
	}
	return topic
}

// Repartition writes s to an internal topic partitioned by its current key
// and reads it back, so that each record reaches the task of its key: what
// a grouping or a join needs after an operation that changed keys. The
// topic is "<app-id>-<name>-repartition", created by Run; records cross it
// inside the same exactly-once transactions.
func Repartition[K, V any](s Stream[K, V], name string, keys serde.Serde[K], values serde.Serde[V]) Stream[K, V] {
	t := s.t
	topic, ok := declareRepartition(t, name)
	if !ok {
		return s
	}
	to(s, topic, keys, values)
	return source(t, topic, keys, values)
}

// Merge combines streams of the same types into one that carries every
// record of each, in the order the task processes them (Kafka Streams'
// merge): e.g. two kinds of events mapped to one type and keyed alike, to
// aggregate them together. The streams' topics end up in one task, so they
// must be co-partitioned (as for a join); a stream whose key changed is
// repartitioned before a grouping or a join as usual.
func Merge[K, V any](first Stream[K, V], more ...Stream[K, V]) Stream[K, V] {
	streams := append([]Stream[K, V]{first}, more...)
	t := first.t
	parents := make([]*node, len(streams))
	merged := Stream[K, V]{t: t, values: streams[0].values}
	for i, s := range streams {
		if s.t != t {
			t.failOn("Merge", first.n, "its streams belong to different topologies; build them in one")
			return first
		}
		parents[i] = s.n
		merged.keyChanged = merged.keyChanged || s.keyChanged
		if s.values == nil {
			merged.values = nil // one side's values cannot be encoded
		}
	}
	merged.n = t.add("merge", parents...)
	merged.n.build = func(b *taskBuild) error {
		out := &emitter[K, V]{}
		b.out[merged.n] = out
		for _, p := range parents {
			in := output[K, V](b, p)
			in.children = append(in.children, receiverFunc[K, V](out.emit))
		}
		return nil
	}
	return merged
}

// SelectKey replaces each record's key with fn's result; the records stay
// on their partition until a Repartition (automatic in GroupBy).
func SelectKey[K, V, K2 any](s Stream[K, V], fn func(K, V) K2) Stream[K2, V] {
	out := attach(s, "select-key", true, func(_ *taskBuild, out *emitter[K2, V]) receiver[K, V] {
		return receiverFunc[K, V](func(r Record[K, V]) error {
			return out.emit(Record[K2, V]{Key: fn(r.Key, r.Value), Value: r.Value, Timestamp: r.Timestamp, Headers: r.Headers, Tombstone: r.Tombstone})
		})
	})
	out.values = s.values
	return out
}

// SourceOption configures a Source.
type SourceOption func(*sourceConfig)

type sourceConfig struct {
	// timestamp is TimestampFrom's func(K, V, int64) int64, checked
	// against the source's types when the source is added.
	timestamp any
	// wallClock stamps records with processing time (ProcessingTime).
	wallClock bool
	table     bool // null values are tombstones
}

// asTable makes a source read a table's topic.
func asTable() SourceOption { return func(c *sourceConfig) { c.table = true } }

// TimestampFrom sets the source's timestamp extractor: fn returns a
// record's event time in ms since the epoch, from the decoded key and value
// and the Kafka record timestamp (Kafka Streams' TimestampExtractor). Its
// key and value types must be the source's: a Topology that mixes them up
// reports it when built.
func TimestampFrom[K, V any](fn func(key K, value V, recordTimestamp int64) int64) SourceOption {
	return func(c *sourceConfig) { c.timestamp, c.wallClock = fn, false }
}

// ProcessingTime makes the source's event time the wall clock at which the
// task reads each record (Kafka Streams' WallclockTimestampExtractor,
// Flink's PROCTIME()): windows, grace and stream time downstream then run
// on processing time, and a record crossing a repartition topic keeps the
// time it was read at. The clock is read once per poll, not per record, so
// the records of one poll share a timestamp. Results depend on when the
// records were processed: a replay after a crash puts them in other
// windows (exactly once still holds for what was committed). It replaces
// TimestampFrom, and the other way round: the last option given wins.
func ProcessingTime() SourceOption {
	return func(c *sourceConfig) { c.timestamp, c.wallClock = nil, true }
}

type sourceNode[K, V any] struct {
	b      *taskBuild
	topic  string
	keys   serde.Serde[K]
	values serde.Serde[V]
	out    *emitter[K, V]
	ts     func(K, V, int64) int64
	table  bool // null values are tombstones
	// wallClock stamps each record with the task's wall clock.
	wallClock bool
	// internal marks a repartition topic: eddy wrote it, so a record
	// that fails to decode there is a bug, never dead-lettered.
	internal bool
	// maxAhead is Config.MaxEventTimeAhead in ms (0: off).
	maxAhead int64
}

func (s *sourceNode[K, V]) receiveRaw(r *kgo.Record) error {
	var rec Record[K, V]
	var err error
	if rec.Key, err = s.keys.Deserialize(r.Key); err != nil {
		return s.decodeFailed(r, fmt.Errorf("key: %w", err))
	}
	// A null value is a tombstone in a table's source and in a
	// repartition topic (where eddy wrote the tombstones itself); a
	// stream passes it to the value serde, which rejects it unless it has
	// a meaning for it (bad input goes to the dead-letter topic).
	if r.Value == nil && (s.table || s.internal) {
		rec.Tombstone = true
	} else if rec.Value, err = s.values.Deserialize(r.Value); err != nil {
		return s.decodeFailed(r, fmt.Errorf("value: %w", err))
	}
	if rec.Timestamp, err = s.eventTime(r, rec.Key, rec.Value); err != nil {
		return s.refused(r, stageTime, err)
	}
	s.b.tc.AdvanceStreamTime(rec.Timestamp)
	if len(r.Headers) > 0 {
		rec.Headers = make([]Header, len(r.Headers))
		for i, h := range r.Headers {
			rec.Headers[i] = Header{Key: h.Key, Value: h.Value}
		}
	}
	return s.out.emit(rec)
}

func (s *sourceNode[K, V]) decodeFailed(r *kgo.Record, err error) error {
	if notTheRecords(err) {
		// A serde's service unavailable (its schema registry): not the
		// record's fault, so no policy applies and the app stops.
		return fmt.Errorf("eddy: decode %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	return s.refused(r, "decode", err)
}

// refused applies OnDecodeError to a record that failed at stage, "decode"
// or stageTime (its event time).
func (s *sourceNode[K, V]) refused(r *kgo.Record, stage string, err error) error {
	switch {
	case s.internal || s.b.cfg.OnDecodeError == Fail:
		// A repartition topic holds what this app's serdes wrote: a
		// record there that fails to decode is a bug, never bad input.
		return &recordFault{stage: stage, err: fmt.Errorf("eddy: %s %s/%d@%d: %w", stage, r.Topic, r.Partition, r.Offset, err)}
	case s.b.cfg.OnDecodeError == LogAndContinue:
		s.b.countSkipped(stage, r, err)
	default:
		if err := s.b.deadLetter(r, stage, err); err != nil {
			return err
		}
	}
	if stage == stageTime {
		s.b.timeRefused++
	}
	return nil
}

// attach adds a stateless operator after s: fn gets the output emitter of
// the new node and returns the receiver that joins s's output.
func attach[K, V, K2, V2 any](s Stream[K, V], name string, keyChange bool, fn func(b *taskBuild, out *emitter[K2, V2]) receiver[K, V]) Stream[K2, V2] {
	n := s.t.add(name, s.n)
	n.build = func(b *taskBuild) error {
		out := &emitter[K2, V2]{}
		b.out[n] = out
		in := output[K, V](b, s.n)
		in.children = append(in.children, fn(b, out))
		return nil
	}
	return Stream[K2, V2]{t: s.t, n: n, keyChanged: s.keyChanged || keyChange}
}

// Map replaces each record's key and value.
func Map[K, V, K2, V2 any](s Stream[K, V], fn func(K, V) (K2, V2)) Stream[K2, V2] {
	return attach(s, "map", true, func(_ *taskBuild, out *emitter[K2, V2]) receiver[K, V] {
		return receiverFunc[K, V](func(r Record[K, V]) error {
			k, v := fn(r.Key, r.Value)
			return out.emit(Record[K2, V2]{Key: k, Value: v, Timestamp: r.Timestamp, Headers: r.Headers, Tombstone: r.Tombstone})
		})
	})
}

// MapValues replaces each record's value; the key, and so the partition,
// stays.
func MapValues[K, V, V2 any](s Stream[K, V], fn func(K, V) V2) Stream[K, V2] {
	return attach(s, "map-values", false, func(_ *taskBuild, out *emitter[K, V2]) receiver[K, V] {
		return receiverFunc[K, V](func(r Record[K, V]) error {
			return out.emit(Record[K, V2]{Key: r.Key, Value: fn(r.Key, r.Value), Timestamp: r.Timestamp, Headers: r.Headers, Tombstone: r.Tombstone})
		})
	})
}

// Filter keeps the records for which keep returns true.
func Filter[K, V any](s Stream[K, V], keep func(K, V) bool) Stream[K, V] {
	out := attach(s, "filter", false, func(_ *taskBuild, out *emitter[K, V]) receiver[K, V] {
		return receiverFunc[K, V](func(r Record[K, V]) error {
			if !keep(r.Key, r.Value) {
				return nil
			}
			return out.emit(r)
		})
	})
	out.values = s.values
	return out
}

// KeyValue is one output of FlatMap.
type KeyValue[K, V any] struct {
	Key   K
	Value V
}

// FlatMap replaces each record with zero or more records. fn appends its
// outputs to dst and returns it, so the slice is reused across records.
func FlatMap[K, V, K2, V2 any](s Stream[K, V], fn func(dst []KeyValue[K2, V2], k K, v V) []KeyValue[K2, V2]) Stream[K2, V2] {
	return attach(s, "flat-map", true, func(_ *taskBuild, out *emitter[K2, V2]) receiver[K, V] {
		var buf []KeyValue[K2, V2]
		return receiverFunc[K, V](func(r Record[K, V]) error {
			buf = fn(buf[:0], r.Key, r.Value)
			for _, kv := range buf {
				if err := out.emit(Record[K2, V2]{Key: kv.Key, Value: kv.Value, Timestamp: r.Timestamp, Headers: r.Headers, Tombstone: r.Tombstone}); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// To writes the stream to topic, inside the transaction of the input that
// produced each record. The partition is Kafka's default partitioner of the
// encoded key.
func To[K, V any](s Stream[K, V], topic string, keys serde.Serde[K], values serde.Serde[V]) {
	to(s, topic, keys, values)
}

func to[K, V any](s Stream[K, V], topic string, keys serde.Serde[K], values serde.Serde[V]) {
	n := s.t.add("sink-"+topic, s.n)
	s.t.writers[n] = topic
	if !strings.HasPrefix(topic, repartitionPrefix) && !slices.Contains(s.t.sinks, topic) {
		s.t.sinks = append(s.t.sinks, topic)
	}
	s.t.addSinkChecks(topic, keys, values)
	n.build = func(b *taskBuild) error {
		// Non-nil from the start: an empty key or value must reach the
		// runtime as empty, not as nil (a null key, a tombstone).
		kbuf, vbuf := []byte{}, []byte{}
		var hs []kgo.RecordHeader // reused: the runtime copies what it is given
		in := output[K, V](b, s.n)
		topic := topicName(b.cfg.AppID, topic)
		in.children = append(in.children, receiverFunc[K, V](func(r Record[K, V]) error {
			var err error
			if kbuf, err = keys.Serialize(kbuf[:0], r.Key); err != nil {
				return fmt.Errorf("eddy: encode key for %s: %w", topic, err)
			}
			value := []byte(nil) // a tombstone
			if !r.Tombstone {
				if vbuf, err = values.Serialize(vbuf[:0], r.Value); err != nil {
					return fmt.Errorf("eddy: encode value for %s: %w", topic, err)
				}
				value = vbuf
			}
			hs = hs[:0]
			for _, h := range r.Headers {
				hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
			}
			return b.tc.Produce(topic, kbuf, value, r.Timestamp, hs)
		}))
		return nil
	}
}

// declareRepartition declares the repartition topic named name and returns
// its topic as the description names it, or reports a name that cannot
// name a topic or is taken and returns false.
func declareRepartition(t *Topology, name string) (string, bool) {
	if !runtime.ValidName(name) {
		t.fail("eddy: repartition name %q: use letters, digits, '.', '_' and '-' (it names a topic)", name)
		return "", false
	}
	if slices.Contains(t.repartitions, name) {
		t.fail("eddy: repartition %q is declared twice; give each its own name", name)
		return "", false
	}
	t.repartitions = append(t.repartitions, name)
	return repartitionPrefix + name, true
}
