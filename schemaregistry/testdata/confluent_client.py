"""Cross-check of eddy's schema registry with Confluent's own Python client
(confluent_kafka.schema_registry, Debian's python3-confluent-kafka), run by
TestClientConfluentPython with the server's URL as the only argument. It
exits non-zero, naming the step, on the first answer the client rejects or
that differs from what Confluent's registry answers."""

import sys

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

V1 = '{"type":"record","name":"Pay","fields":[{"name":"cents","type":"long"}]}'
V2 = ('{"type":"record","name":"Pay","fields":[{"name":"cents","type":"long"},'
      '{"name":"memo","type":"string","default":""}]}')
BAD = '{"type":"record","name":"Pay","fields":[{"name":"cents","type":"string"}]}'
PROTO = 'syntax = "proto3"; package p; message M { int64 a = 1; }'


def check(step, got, want):
    if got != want:
        sys.exit(f"{step}: got {got!r}, want {want!r}")


def error_code(step, call):
    try:
        call()
    except SchemaRegistryError as e:
        return e.http_status_code, e.error_code
    sys.exit(f"{step}: no error")


def main(url):
    client = SchemaRegistryClient({"url": url})
    check("register v1", client.register_schema("pay-value", Schema(V1, "AVRO")), 1)
    check("register v2", client.register_schema("pay-value", Schema(V2, "AVRO")), 2)
    check("register protobuf", client.register_schema("p-value", Schema(PROTO, "PROTOBUF")), 3)
    check("subjects", client.get_subjects(), ["p-value", "pay-value"])
    check("versions", client.get_versions("pay-value"), [1, 2])
    s = client.get_schema(2)
    check("get_schema", (s.schema_str, s.schema_type), (V2, "AVRO"))
    p = client.get_schema(3)
    check("get_schema protobuf", (p.schema_str, p.schema_type), (PROTO, "PROTOBUF"))
    latest = client.get_latest_version("pay-value")
    check("latest", (latest.schema_id, latest.version, latest.subject), (2, 2, "pay-value"))
    v1 = client.get_version("pay-value", 1)
    check("version 1", (v1.schema_id, v1.schema.schema_str), (1, V1))
    found = client.lookup_schema("pay-value", Schema(V1, "AVRO"))
    check("lookup", (found.schema_id, found.version), (1, 1))
    check("compatible", client.test_compatibility("pay-value", Schema(V2, "AVRO")), True)
    check("incompatible", client.test_compatibility("pay-value", Schema(BAD, "AVRO")), False)
    check("register incompatible", error_code("register incompatible",
          lambda: client.register_schema("pay-value", Schema(BAD, "AVRO"))), (409, 409))
    check("global level", client.get_compatibility(), "BACKWARD")
    client.set_compatibility("pay-value", "FULL")
    check("subject level", client.get_compatibility("pay-value"), "FULL")
    check("unknown subject", error_code("unknown subject",
          lambda: client.get_versions("nobody")), (404, 40401))
    check("unknown version", error_code("unknown version",
          lambda: client.get_version("pay-value", 9)), (404, 40402))
    check("unknown id", error_code("unknown id", lambda: client.get_schema(99)), (404, 40403))
    check("delete version", client.delete_version("pay-value", 2), 2)
    # This client soft-deletes first, then deletes permanently, and answers
    # the soft delete's list: the versions still live.
    check("delete subject permanently", client.delete_subject("pay-value", permanent=True), [1])
    check("hard-deleted", error_code("hard-deleted", lambda: client.get_versions("pay-value")), (404, 40401))
    check("subjects after", client.get_subjects(), ["p-value"])


if __name__ == "__main__":
    main(sys.argv[1])
