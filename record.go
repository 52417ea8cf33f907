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
}
