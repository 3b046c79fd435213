"""confluent-kafka's schema registry client and serializers against tidelog's registry.

Usage: .build/pyenv/bin/python sr_ck.py, with a JSON spec on stdin:
  {registry, bootstrap, prefix, auth?: "user:password", ca?: PATH}
Runs each check in turn and prints one JSON line per check:
  {"check": NAME, "ok": bool, "detail": str}
then {"done": true}. Every topic and subject starts with `prefix`.

The checks use confluent-kafka 2.16.1's SchemaRegistryClient (REST calls as the serializers
make them) and its Avro, JSON Schema and Protobuf serializers and deserializers, with a
Producer and a Consumer of the same package producing to and consuming from tidelog.
"""

import base64
import json
import sys
import traceback

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

spec = json.loads(sys.stdin.read())
PREFIX = spec["prefix"]
conf = {"url": spec["registry"]}
if spec.get("auth"):
    conf["basic.auth.user.info"] = spec["auth"]
if spec.get("ca"):
    conf["ssl.ca.location"] = spec["ca"]
client = SchemaRegistryClient(conf)


def report(name, ok, detail=""):
    print(json.dumps({"check": name, "ok": ok, "detail": detail}), flush=True)


def expect(condition, message):
    if not condition:
        raise AssertionError(message)


def round_trip(topic, serializer, deserializer, values):
    """Serializes, produces, consumes and deserializes `values`; returns what came back."""
    producer = Producer({"bootstrap.servers": spec["bootstrap"]})
    ctx = SerializationContext(topic, MessageField.VALUE)
    for value in values:
        producer.produce(topic, value=serializer(value, ctx))
    expect(producer.flush(30) == 0, "produce did not finish")
    consumer = Consumer(
        {
            "bootstrap.servers": spec["bootstrap"],
            "group.id": f"{topic}-reader",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    received = []
    raw = []
    for _ in range(300):
        if len(received) >= len(values):
            break
        msg = consumer.poll(0.2)
        if msg is None or msg.error():
            continue
        raw.append(msg.value())
        received.append(deserializer(msg.value(), ctx))
    consumer.close()
    expect(len(received) == len(values), f"consumed {len(received)} of {len(values)}")
    # Confluent's wire format: magic byte 0, then the schema id, big-endian.
    expect(raw[0][0] == 0, "magic byte")
    return received, int.from_bytes(raw[0][1:5], "big")


AVRO_V1 = json.dumps(
    {
        "type": "record",
        "name": "User",
        "namespace": "acme",
        "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
    }
)
# BACKWARD-compatible: a field with a default.
AVRO_V2 = json.dumps(
    {
        "type": "record",
        "name": "User",
        "namespace": "acme",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "age", "type": "int"},
            {"name": "email", "type": "string", "default": ""},
        ],
    }
)
# Not BACKWARD-compatible: a new field without a default.
AVRO_BAD = json.dumps(
    {
        "type": "record",
        "name": "User",
        "namespace": "acme",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "age", "type": "int"},
            {"name": "city", "type": "string"},
        ],
    }
)


def check_client_api():
    subject = f"{PREFIX}-api-value"
    schema_id = client.register_schema(subject, Schema(AVRO_V1, "AVRO"))
    latest = client.get_latest_version(subject)
    expect(latest.schema_id == schema_id and latest.version == 1, f"latest {latest}")
    found = client.lookup_schema(subject, Schema(AVRO_V1, "AVRO"))
    expect(found.schema_id == schema_id, "lookup")
    fetched = client.get_schema(schema_id)
    expect(json.loads(fetched.schema_str)["name"] == "User", fetched.schema_str)
    expect(subject in client.get_subjects(), "get_subjects")
    expect(client.test_compatibility(subject, Schema(AVRO_V2, "AVRO")) is True, "v2 compatible")
    expect(client.test_compatibility(subject, Schema(AVRO_BAD, "AVRO")) is False, "bad incompatible")
    try:
        client.register_schema(subject, Schema(AVRO_BAD, "AVRO"))
        raise AssertionError("an incompatible schema was registered")
    except SchemaRegistryError as error:
        expect(error.http_status_code == 409, f"status {error.http_status_code}")
    v2 = client.register_schema(subject, Schema(AVRO_V2, "AVRO"))
    expect(v2 != schema_id and client.get_versions(subject) == [1, 2], "two versions")
    client.set_compatibility(subject, "NONE")
    expect(client.get_compatibility(subject) == "NONE", "subject config")
    expect(client.register_schema(subject, Schema(AVRO_BAD, "AVRO")) > 0, "NONE admits anything")
    try:
        client.get_version(subject, 9)
        raise AssertionError("version 9 exists")
    except SchemaRegistryError as error:
        expect(error.error_code == 40402, f"error code {error.error_code}")
    expect(client.delete_subject(subject) == [1, 2, 3], "soft delete")
    expect(client.delete_subject(subject, permanent=True) == [1, 2, 3], "hard delete")
    expect(subject not in client.get_subjects(), "deleted")
    return f"ids {schema_id}, {v2}"


def check_avro():
    topic = f"{PREFIX}-avro"
    serializer = AvroSerializer(client, AVRO_V1)
    deserializer = AvroDeserializer(client)
    values = [{"name": "ada", "age": 36}, {"name": "alan", "age": 41}]
    received, schema_id = round_trip(topic, serializer, deserializer, values)
    expect(received == values, f"received {received}")
    expect(client.get_latest_version(f"{topic}-value").schema_id == schema_id, "registered id")
    return f"schema id {schema_id}"


JSON_SCHEMA = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Order",
        "type": "object",
        "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
        "required": ["id"],
    }
)


def check_json():
    topic = f"{PREFIX}-json"
    serializer = JSONSerializer(JSON_SCHEMA, client)
    deserializer = JSONDeserializer(None, schema_registry_client=client)
    values = [{"id": 1, "item": "tea"}, {"id": 2, "item": "cake"}]
    received, schema_id = round_trip(topic, serializer, deserializer, values)
    expect(received == values, f"received {received}")
    expect(client.get_schema(schema_id).schema_type == "JSON", "type JSON")
    # The serializer validates against the schema: a value without `id` is refused.
    try:
        serializer({"item": "x"}, SerializationContext(topic, MessageField.VALUE))
        raise AssertionError("an invalid value was serialized")
    except Exception as error:  # noqa: BLE001 - SerializationError wraps jsonschema's
        expect("id" in str(error), str(error))
    return f"schema id {schema_id}"


def protobuf_class():
    """A message class built at run time (what protoc's generated module would hold)."""
    file = descriptor_pb2.FileDescriptorProto(name="payment.proto", package="acme", syntax="proto3")
    message = file.message_type.add(name="Payment")
    message.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    message.field.add(name="amount", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("acme.Payment"))


def check_protobuf():
    topic = f"{PREFIX}-proto"
    Payment = protobuf_class()
    serializer = ProtobufSerializer(Payment, client, {"use.deprecated.format": False})
    # With the registry: it reads the writer's schema by id with format=serialized.
    deserializer = ProtobufDeserializer(Payment, {"use.deprecated.format": False}, client)
    values = [Payment(id="p1", amount=9.5), Payment(id="p2", amount=1.25)]
    received, schema_id = round_trip(topic, serializer, deserializer, values)
    expect([(p.id, p.amount) for p in received] == [("p1", 9.5), ("p2", 1.25)], f"received {received}")
    registered = client.get_schema(schema_id)
    expect(registered.schema_type == "PROTOBUF", "type PROTOBUF")
    # A schema registered as .proto text is served as a descriptor too.
    text = 'syntax = "proto3";\npackage acme;\nmessage Refund {\n  string id = 1;\n  int64 cents = 2;\n}\n'
    refund_id = client.register_schema(f"{topic}-refund-value", Schema(text, "PROTOBUF"))
    serialized = client.get_schema(refund_id, fmt="serialized").schema_str
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.standard_b64decode(serialized))
    expect([m.name for m in file.message_type] == ["Refund"], f"descriptor {file}")
    expect([f.name for f in file.message_type[0].field] == ["id", "cents"], "fields")
    return f"schema id {schema_id}"


CHECKS = [
    ("client-api", check_client_api),
    ("avro", check_avro),
    ("json", check_json),
    ("protobuf", check_protobuf),
]

only = spec.get("checks")
for name, check in CHECKS:
    if only and name not in only:
        continue
    try:
        report(name, True, check() or "")
    except Exception as error:  # noqa: BLE001 - every failure is reported, the run goes on
        report(name, False, f"{error!r}\n{traceback.format_exc()[-1500:]}")
print(json.dumps({"done": True}), flush=True)
