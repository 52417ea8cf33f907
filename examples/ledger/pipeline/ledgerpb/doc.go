// Package ledgerpb holds the generated Protobuf messages of the ledger's
// payments and balances (payment.proto, balance.proto), for `ledger
// --format protobuf`.
package ledgerpb

//go:generate go run github.com/eddy-streams/eddy/internal/protogen payment.proto balance.proto
