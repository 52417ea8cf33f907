// Package testpb holds the generated messages serde/protobuf's tests use.
package testpb

//go:generate go run github.com/eddy-streams/eddy/internal/protogen payment.proto envelope.proto
