"""The ledger's payments and balances through Confluent's own Python client
(Debian's python3-confluent-kafka, librdkafka underneath, with python3-avro
and python3-protobuf), run by TestLedgerFormatsSurviveKillsAndBrokerRestart:

  confluent_ledger.py produce FORMAT BROKERS REGISTRY TOPIC N SCHEMA
      writes N payments py-0 .. py-N-1 to TOPIC in the Confluent wire format,
      keyed by their account (acct-0000 ..), with Kafka's murmur2 partitioner
      (librdkafka's default is CRC32, which would put an account's payments on
      another partition than the Go and Java clients do), and prints their
      count.
  confluent_ledger.py consume FORMAT BROKERS REGISTRY TOPIC N SCHEMA
      reads N records of TOPIC read_committed and prints each decoded balance
      as one JSON line.

FORMAT is avro or protobuf. SCHEMA is, for avro, the payment's schema (JSON)
to produce and unused to consume (a balance's schema comes by its id); for
protobuf, the FileDescriptorProto of the message's file (payment.proto to
produce, balance.proto to consume), serialized and base64-encoded: the
message class is built from it at run time (no protoc, no _pb2 file).
It exits non-zero, naming the step, on any failure."""

import base64
import json
import sys

from confluent_kafka import Consumer, Producer

ACCOUNTS = 200


def avro_serializer(registry):
    from confluent_kafka.avro import CachedSchemaRegistryClient
    from confluent_kafka.avro.serializer.message_serializer import MessageSerializer
    return MessageSerializer(CachedSchemaRegistryClient({"url": registry}))


def proto_class(descriptor_b64, name):
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(descriptor_b64))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    desc = pool.FindMessageTypeByName(fdp.package + "." + name)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


def produce(fmt, brokers, registry, topic, n, schema):
    if fmt == "avro":
        from confluent_kafka import avro
        ser, parsed = avro_serializer(registry), avro.loads(schema)
        encode = lambda p: ser.encode_record_with_schema(topic, parsed, p)
    else:
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext
        payment = proto_class(schema, "Payment")
        ser = ProtobufSerializer(payment, SchemaRegistryClient({"url": registry}))
        ctx = SerializationContext(topic, MessageField.VALUE)
        encode = lambda p: ser(payment(**p), ctx)
    producer = Producer({"bootstrap.servers": brokers, "partitioner": "murmur2_random",
                         "enable.idempotence": True})
    failed = []
    for i in range(n):
        account = "acct-%04d" % (i % ACCOUNTS)
        p = {"id": "py-%d" % i, "account": account, "amount": i % 97 - 40, "ts": 0}
        producer.produce(topic, key=account.encode(), value=encode(p),
                         on_delivery=lambda err, msg: err and failed.append(err))
        producer.poll(0)
    if producer.flush(30) != 0 or failed:
        sys.exit("produce: %d records not delivered: %s" % (len(failed), failed[:3]))
    print(n)


def consume(fmt, brokers, registry, topic, n, schema):
    if fmt == "avro":
        ser = avro_serializer(registry)
        decode = ser.decode_message
    else:
        from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
        balance = proto_class(schema, "Balance")
        des = ProtobufDeserializer(balance)

        def decode(v):
            m = des(v, None)
            return {f.name: getattr(m, f.name) for f in m.DESCRIPTOR.fields}
    consumer = Consumer({"bootstrap.servers": brokers, "group.id": "confluent-ledger-check",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    got, idle = 0, 0
    while got < n:
        msg = consumer.poll(1.0)
        if msg is None:
            idle += 1
            if idle > 60:
                sys.exit("consume: %d of %d records after a minute without any" % (got, n))
            continue
        idle = 0
        if msg.error():
            sys.exit("consume: %s" % msg.error())
        print(json.dumps(decode(msg.value()), sort_keys=True))
        got += 1
    consumer.close()


if __name__ == "__main__":
    cmd, fmt, brokers, registry, topic, n, schema = sys.argv[1:8]
    {"produce": produce, "consume": consume}[cmd](fmt, brokers, registry, topic, int(n), schema)
