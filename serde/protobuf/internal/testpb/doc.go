// Package testpb holds the generated messages serde/protobuf's tests use.
package testpb

//go:generate go run ./gen payment.proto envelope.proto
