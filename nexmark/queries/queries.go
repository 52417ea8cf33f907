// Package queries holds the Nexmark queries written with eddy's public DSL,
// each with a check that compares its output with a straightforward
// reference computation over the same events. The queries follow the SQL of
// the nexmark/nexmark repository (the Flink suite whose per-core figures
// eddy is compared with); where eddy's semantics differ (no end-of-input
// watermark, emit modes), the query's doc comment says how, and its
// reference computes what eddy is meant to produce.
package queries

import (
	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/nexmark"
)

// Query is one Nexmark query.
type Query struct {
	// Name is the suite's name: "q0" … "q12".
	Name string
	// Title is what the suite calls it ("pass through", "hot items").
	Title string
	// Build adds the query to t. It reads the event topics it needs from in
	// (keys serde.Int64, values nexmark's binary serdes, record timestamps
	// the events' DateTime) and writes its result to the topic out.
	Build func(t *eddy.Topology, in nexmark.Topics, out string)
	// NewCheck returns the check of the query's output for events [0, n)
	// of g.
	NewCheck func(g *nexmark.Generator, n int64) Check
	// Result says how the output records read as the SQL's result rows.
	Result Result
	// Files is set for a query whose result is a directory of files
	// rather than a topic (q10): Build's out is then that directory, and
	// Files reads its committed result after the run, calling record
	// with each record as Check.Add and Result.Rows take them. It fails
	// if the result is incomplete (a part file still in progress, a
	// partition not marked complete).
	Files func(dir string, record func(key, value []byte)) error
}

// Result describes a query's result as the suite's SQL names it, so that
// its output can be written as rows (`eddy bench nexmark --results`) and
// compared with another engine's.
type Result struct {
	// Columns are the result's column names, in the SQL's order.
	Columns []string
	// Upsert says each output record replaces the rows of its key, and a
	// tombstone (a nil value) deletes them: the result is the rows of the
	// last record per key, as a table's changelog reads. Otherwise every
	// output record adds its rows.
	Upsert bool
	// Identity, for an Upsert result whose record key does not identify
	// its rows alone (q12: a bidder's windows share the bidder's key), is
	// what does: the identity of record (key, value), appended to dst.
	// Nil: the record key.
	Identity func(dst, key, value []byte) []byte
	// Rows decodes one output record into its rows (usually one), calling
	// row with a value per column: int64, float64, string, or nil for SQL
	// NULL. Timestamps are strings as Timestamp formats them.
	Rows func(key, value []byte, row func(values ...any)) error
}

// Timestamp formats ms since the epoch as Flink prints a TIMESTAMP(3), in
// UTC: "2026-01-01 00:00:00.000", as nexmark.FormatTime writes the
// events' times.
func Timestamp(ms int64) string { return nexmark.FormatTime(ms) }

// Check collects a query's output and compares it with the reference. Add
// runs inside the measured process, once per output record, so it must be
// cheap (a digest, or the last value per key for an updating result), not
// a copy of every record.
type Check interface {
	// Add sees one output record, in the order the query produced it;
	// key and value are valid only during the call.
	Add(key, value []byte, timestamp int64)
	// Verify computes the reference result and compares; nil means the
	// output matched. The error describes the first differences.
	Verify() error
}

// All returns the queries in the suite's order.
func All() []Query {
	return []Query{q0(), q1(), q2(), q3(), q4(), q5(), q6(), q7(), q8(), q9(), q10(), q11(), q12(), q13(), q14(), q15(), q16(), q17(), q18(), q19(), q20(), q21(), q22()}
}
