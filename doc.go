// Package eddy is an exactly-once stateful stream processing library: it
// consumes Kafka topics, transforms records with keyed state, and produces
// to Kafka topics, so that every input changes state and outputs exactly
// once through crashes, rebalances and zombie instances.
//
// A program builds a Topology with the typed DSL (Source, Map, Filter,
// GroupByKey, Aggregate, To, ...) or the Processor API (Process with state
// stores), then runs it with Run. State lives in an embedded Pebble database
// per task, is logged to compacted changelog topics inside the same Kafka
// transaction as the outputs, and is written to the local database only once
// that transaction committed.
package eddy
