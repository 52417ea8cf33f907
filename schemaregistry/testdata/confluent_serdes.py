"""Cross-check of eddy's schema registry with Confluent's own Python
serializers (Debian's python3-confluent-kafka 1.7.0, with python3-protobuf
and python3-avro), run by TestRegistryConfluentPythonSerdes with the
server's URL as the only argument:

- confluent_kafka.schema_registry.protobuf's ProtobufSerializer, which
  registers a message's file as a base64-encoded FileDescriptorProto (and
  each file it imports under a subject of its own, referenced), serializes
  a message whose class is built at run time from a FileDescriptorProto
  (no protoc, no generated _pb2 module); the registry must answer the
  schema as .proto text, find it from that text, and ProtobufDeserializer
  must decode the bytes back;
- the legacy confluent_kafka.avro MessageSerializer with
  CachedSchemaRegistryClient registers an Avro schema while encoding a
  record and reads it back by id while decoding.

It exits non-zero, naming the step, on the first difference."""

import io
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf import timestamp_pb2

from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

import confluent_kafka.avro
from confluent_kafka.avro import CachedSchemaRegistryClient, MessageSerializer

TIMESTAMP = "google/protobuf/timestamp.proto"
# The text of the file order_class builds: the same schema.
ORDER_TEXT = ('syntax = "proto3"; package shop; import "google/protobuf/timestamp.proto"; '
              'message Order { string order_id = 1; int64 qty = 2; google.protobuf.Timestamp at = 3; }')
PAY = ('{"type":"record","name":"Pay","namespace":"bank",'
       '"fields":[{"name":"cents","type":"long"},{"name":"memo","type":"string"}]}')


def check(step, got, want):
    if got != want:
        sys.exit(f"{step}: got {got!r}, want {want!r}")


def order_class():
    """shop.Order, built from a FileDescriptorProto at run time."""
    fdp = descriptor_pb2.FileDescriptorProto()
    fdp.name = "shop/order.proto"
    fdp.package = "shop"
    fdp.syntax = "proto3"
    fdp.dependency.append(TIMESTAMP)
    msg = fdp.message_type.add()
    msg.name = "Order"
    F = descriptor_pb2.FieldDescriptorProto
    for name, number, typ, type_name in [("order_id", 1, F.TYPE_STRING, None),
                                         ("qty", 2, F.TYPE_INT64, None),
                                         ("at", 3, F.TYPE_MESSAGE, ".google.protobuf.Timestamp")]:
        f = msg.field.add()
        f.name, f.number, f.type, f.label = name, number, typ, F.LABEL_OPTIONAL
        if type_name:
            f.type_name = type_name
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.AddSerializedFile(fdp.SerializeToString())
    return message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName("shop.Order"))


def header(step, data):
    magic, schema_id = struct.unpack(">bI", data[:5])
    check(step + ": magic byte", magic, 0)
    return schema_id


def protobuf(url):
    client = SchemaRegistryClient({"url": url})
    Order = order_class()
    ctx = SerializationContext("orders", MessageField.VALUE)
    msg = Order(order_id="o-1", qty=3)
    msg.at.seconds = 1700000000
    ser = ProtobufSerializer(Order, client, {"auto.register.schemas": True})
    data = ser(msg, ctx)
    schema_id = header("protobuf", data)
    check("protobuf: message indexes (the file's first message)", data[5:6], b"\x00")

    check("subjects", client.get_subjects(), [TIMESTAMP, "orders-value"])
    latest = client.get_latest_version("orders-value")
    refs = [SchemaReference(TIMESTAMP, TIMESTAMP, 1)]
    check("registered", (latest.schema_id, latest.version, latest.subject, latest.schema.schema_type),
          (schema_id, 1, "orders-value", "PROTOBUF"))
    # This client leaves the references of a version as the JSON objects.
    check("references", latest.schema.references, [{"name": TIMESTAMP, "subject": TIMESTAMP, "version": 1}])
    text = latest.schema.schema_str
    for want in ["message Order", 'import "google/protobuf/timestamp.proto";', "google.protobuf.Timestamp at = 3;"]:
        if want not in text:
            sys.exit(f"registered schema: {want!r} missing from the text answered: {text!r}")
    # A fresh client: this one answers the schema it registered from its cache.
    check("by id: the same text", SchemaRegistryClient({"url": url}).get_schema(schema_id).schema_str, text)
    ts = client.get_latest_version(TIMESTAMP).schema.schema_str
    if "message Timestamp" not in ts:
        sys.exit(f"the imported file's subject holds {ts!r}, not Timestamp's text")

    found = client.lookup_schema("orders-value", Schema(ORDER_TEXT, "PROTOBUF", refs))
    check("lookup by hand-written text", (found.schema_id, found.version), (schema_id, 1))
    check("register the text: the same id",
          client.register_schema("orders-value", Schema(ORDER_TEXT, "PROTOBUF", refs)), schema_id)

    again = ProtobufSerializer(Order, SchemaRegistryClient({"url": url}), {"auto.register.schemas": True})
    check("a second serializer: the same bytes", again(msg, ctx), data)
    check("still one version", client.get_versions("orders-value"), [1])

    got = ProtobufDeserializer(Order)(data, ctx)
    check("protobuf round trip", got, msg)


def avro_legacy(url):
    client = CachedSchemaRegistryClient({"url": url})
    ser = MessageSerializer(client)
    record = {"cents": 1250, "memo": "rent"}
    data = ser.encode_record_with_schema("pay", confluent_kafka.avro.loads(PAY), record)
    schema_id = header("avro", data)
    sid, schema, version = client.get_latest_schema("pay-value")
    check("avro registered", (sid, version), (schema_id, 1))
    # A fresh client decodes: the writer schema comes from the registry.
    fresh = MessageSerializer(CachedSchemaRegistryClient({"url": url}))
    check("avro round trip", fresh.decode_message(data), record)


def main(url):
    protobuf(url)
    avro_legacy(url)


if __name__ == "__main__":
    main(sys.argv[1])
