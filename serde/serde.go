// Package serde converts typed keys and values to and from bytes.
//
// Serialize appends to a caller-owned buffer so the per-record path can reuse
// one buffer and allocate nothing; Deserialize must not keep the slice it is
// given (the runtime reuses fetch buffers).
package serde

import "errors"

// Serde serializes and deserializes values of type T.
type Serde[T any] interface {
	// Serialize appends the encoding of v to dst and returns the result.
	Serialize(dst []byte, v T) ([]byte, error)
	// Deserialize decodes b. It must not retain b.
	Deserialize(b []byte) (T, error)
}

// ErrUnavailable is wrapped by the errors of a serde whose service (a
// schema registry) is unreachable or refused the serde's credentials, once
// the serde has retried for as long as its bound allows. Such an error is
// not the record's fault: eddy never skips or dead-letters a record
// because of it, it stops the app, which processes the record again once
// restarted.
var ErrUnavailable = errors.New("service unavailable")
