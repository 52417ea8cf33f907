// Package pgsink writes Kafka records into PostgreSQL exactly once.
//
// Writer writes batches of rows into one table inside a transaction its
// caller owns: upsert by key (last row per key wins within a batch, a
// delete removes the key's row) or append. Every value is sent as text and
// cast on the server to its column's type, so one code path serves every
// column type; the table and the mapping are checked against the catalog
// when the Writer is made.
//
// Run is a sink from any topic ("eddy sink postgres"): a consumer group
// member that reads read_committed and writes each batch in one database
// transaction together with the partitions' next offsets, kept in
// OffsetsTable with an owner epoch per partition that fences a zombie. See
// docs/postgres.md. Its Mapper turns a record into a row: JSONMapper (the
// default), or AvroMapper and ProtobufMapper for values of any schema in
// the Confluent wire format, whose writer schemas they read from a schema
// registry (serde/registry) by the records' schema ids.
//
// The driver is pgx (github.com/jackc/pgx/v5): it speaks the COPY
// protocol and binary array parameters (the two fast paths measured for
// batches), exposes the server's error codes (pgconn.PgError) that tell a
// row's fault (classes 22 and 23) from the database's, and owns no pool or
// global state.
package pgsink
