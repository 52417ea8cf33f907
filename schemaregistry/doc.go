// Package schemaregistry is a Confluent-compatible Schema Registry for
// development and tests: the REST API that Confluent's serializers,
// franz-go's pkg/sr, Karapace's and Redpanda's clients speak (subjects,
// versions, schemas by id, compatibility levels and checks, soft and hard
// deletes, READWRITE and READONLY modes, global and per subject),
// persisted in one file so that ids survive restarts.
//
// `eddy broker --schema-registry HOST:PORT` runs it beside the embedded
// broker; a test runs the same server in-process:
//
//	reg, err := schemaregistry.NewServer(t.TempDir())
//	srv := httptest.NewServer(reg)
//	defer srv.Close()
//	defer reg.Close()
//
// It answers what Confluent answers — the same JSON shapes, status codes
// and error codes ({"error_code": 40401, "message": "Subject 'x' not
// found."}) — because users' other tools talk to it. It is not a
// production registry: one process, no leader election, every schema in
// memory, the state rewritten whole on every change.
//
// Schemas are validated with the parser of their type: Avro with
// github.com/hamba/avro/v2, Protobuf with github.com/bufbuild/protocompile,
// JSON Schema with github.com/santhosh-tekuri/jsonschema/v6, references
// resolved from the registered subjects. A Protobuf schema may come as
// .proto text or as a base64 serialized FileDescriptorProto (as
// Confluent's Python serializer sends it): the descriptor is turned into
// text, so both forms are the same schema with the same id. Compatibility is checked fully for
// Avro (hamba/avro's reader/writer resolution rules) and for a documented
// subset of rules for Protobuf and JSON Schema: see compat.go.
package schemaregistry
