package eddy

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is a keyed record flowing through a topology.
type Record[K, V any] struct {
	Key   K
	Value V
	// Timestamp is the record's event time in milliseconds since the Unix
	// epoch (the Kafka record timestamp at a source). 0 is a time like any
	// other (the epoch), and a sink writes it as it is: a processor that
	// forwards a record it builds sets it, usually to the input record's
	// (as Kafka Streams' Record requires one), or to
	// ProcessorContext.WallClock for processing time. (Earlier versions
	// wrote the producer's clock in place of a 0.)
	Timestamp int64
	Headers   []Header
	// Tombstone marks the deletion of Key (Kafka's null value): in a
	// table's update stream a key that was removed or replaced (a merged
	// session), from a table's source a record whose value is null. Value
	// is the zero value; sinks write a null value. Stateless operators pass the
	// flag on; aggregations skip tombstones, as Kafka Streams does.
	Tombstone bool
}
