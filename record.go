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
	// epoch (the Kafka record timestamp at a source).
	Timestamp int64
	Headers   []Header
	// Tombstone marks the deletion of Key (Kafka's null value): in a
	// table's update stream a key that was removed or replaced (a merged
	// session), from a table's source a record whose value is null. Value
	// is the zero value; sinks write a null value. Stateless operators pass the
	// flag on; aggregations skip tombstones, as Kafka Streams does.
	Tombstone bool
}
