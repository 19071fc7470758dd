"""Avro, Protobuf and JSON Schema as Confluent's Python clients speak them, for the stories
that run kctl's registry-backed converters against Confluent's own serializers.

Each `Format` knows how Confluent's deserializer reads what kctl's JdbcSource wrote (the
`orders` table: id, name, amount NUMERIC(12,2), placed TIMESTAMP(3), paid) and how Confluent's
serializer writes the `payments` a JdbcSink puts into a table (id, payer, amount with scale
2, at) -- first as written, then with a new optional `memo`, and a schema whose `id` turns
into a string, which the registry refuses under BACKWARD.

The Protobuf payment is built as a descriptor, as `protoc` would generate it; its `amount`
carries Confluent's field metadata (scale 2, precision 12), as Confluent's ProtobufData
writes a Connect Decimal, so the sink knows the column's scale before the first value.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.serialization import MessageField, SerializationContext

UTC = dt.UTC
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


def at(i: int) -> dt.datetime:
    """Payment i's time: whole milliseconds, as every format carries them."""
    return dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=i, milliseconds=i % 1000)


def payment(i: int, memo: str | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {"id": i, "payer": None if i % 5 == 0 else f"p{i}",
                           "amount": decimal.Decimal(i) / 100, "at": at(i)}
    if memo is not None:
        row["memo"] = memo
    return row


@dataclass(frozen=True)
class Format:
    name: str
    converter: str
    topic_prefix: str
    # Confluent's deserializer for what kctl wrote to `subject`, and the row it reads as a dict
    reader: Callable[[SchemaRegistryClient, str], Callable[[bytes, str], dict[str, Any]]]
    # Confluent's key and value serializers for the payment schema (evolved: with `memo`)
    writers: Callable[[SchemaRegistryClient, bool], tuple[Any, Any]]
    to_wire: Callable[[dict[str, Any], bool], Any]  # a payment as the serializer takes it
    # a serializer whose schema turns `id` into a string, and a value for it
    broken: Callable[[SchemaRegistryClient], tuple[Any, Any]]


def _ctx(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


# --- Avro -------------------------------------------------------------------------------


def _avro_payment_schema(evolved: bool) -> str:
    memo = [{"name": "memo", "type": ["null", "string"], "default": None}] if evolved else []
    return json.dumps({"type": "record", "name": "Payment", "namespace": "bank", "fields": [
        {"name": "id", "type": "long"},
        {"name": "payer", "type": ["null", "string"], "default": None},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal",
                                    "precision": 12, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        *memo]})


def _avro_reader(client: SchemaRegistryClient, subject: str) -> Callable[[bytes, str], dict]:
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    deserializer = AvroDeserializer(client)
    return lambda data, topic: deserializer(data, _ctx(topic))


def _avro_writers(client: SchemaRegistryClient, evolved: bool) -> tuple[Any, Any]:
    from confluent_kafka.schema_registry.avro import AvroSerializer

    return AvroSerializer(client, '"long"'), AvroSerializer(client, _avro_payment_schema(evolved))


def _avro_broken(client: SchemaRegistryClient) -> tuple[Any, Any]:
    from confluent_kafka.schema_registry.avro import AvroSerializer

    return AvroSerializer(client, json.dumps({"type": "record", "name": "Payment",
                                              "namespace": "bank", "fields": [
                                                  {"name": "id", "type": "string"}]})), {"id": "x"}


AVRO = Format("avro", "io.confluent.connect.avro.AvroConverter", "avro-", _avro_reader,
              _avro_writers, lambda row, evolved: row, _avro_broken)


# --- JSON Schema ------------------------------------------------------------------------


def _json_payment_schema(evolved: bool) -> str:
    properties: dict[str, Any] = {
        "id": {"type": "integer", "connect.type": "int64", "connect.index": 0},
        "payer": {"oneOf": [{"type": "null"}, {"type": "string"}], "connect.index": 1},
        "amount": {"type": "number", "title": "org.apache.kafka.connect.data.Decimal",
                   "connect.version": 1, "connect.index": 2,
                   "connect.parameters": {"scale": "2", "connect.decimal.precision": "12"}},
        "at": {"type": "integer", "connect.type": "int64", "connect.version": 1,
               "title": "org.apache.kafka.connect.data.Timestamp", "connect.index": 3}}
    if evolved:
        properties["memo"] = {"oneOf": [{"type": "null"}, {"type": "string"}],
                              "connect.index": 4}
    # a closed content model, as Confluent's JsonSchemaData writes a struct: a new optional
    # property is then a compatible change
    return json.dumps({"type": "object", "title": "Payment", "properties": properties,
                       "required": ["id", "amount", "at"], "additionalProperties": False})


def _exact_json(text: str | bytes) -> Any:
    return json.loads(text, parse_float=decimal.Decimal)


def _json_reader(client: SchemaRegistryClient, subject: str) -> Callable[[bytes, str], dict]:
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer

    deserializer = JSONDeserializer(None, schema_registry_client=client, json_decode=_exact_json)

    def read(data: bytes, topic: str) -> dict[str, Any]:
        row = dict(deserializer(data, _ctx(topic)))
        row["placed"] = EPOCH + dt.timedelta(milliseconds=row["placed"])
        return row

    return read


def _json_number(value: Any) -> Any:
    return float(value) if isinstance(value, decimal.Decimal) else value


def _json_writers(client: SchemaRegistryClient, evolved: bool) -> tuple[Any, Any]:
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    def encode(value: Any) -> str:
        # a Decimal as its own digits: the float of a two-decimal amount prints as written
        return json.dumps(value, default=_json_number)

    key = JSONSerializer(json.dumps({"type": "integer", "connect.type": "int64"}), client,
                         json_encode=encode)
    return key, JSONSerializer(_json_payment_schema(evolved), client, json_encode=encode)


def _json_wire(row: dict[str, Any], evolved: bool) -> dict[str, Any]:
    millis = (row["at"] - EPOCH) // dt.timedelta(milliseconds=1)
    return {**row, "amount": float(row["amount"]), "at": millis}


def _json_broken(client: SchemaRegistryClient) -> tuple[Any, Any]:
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    schema = {"type": "object", "title": "Payment", "additionalProperties": False,
              "properties": {"id": {"type": "string"}}, "required": ["id"]}
    return JSONSerializer(json.dumps(schema), client), {"id": "x"}


JSON = Format("json", "io.confluent.connect.json.JsonSchemaConverter", "json-", _json_reader,
              _json_writers, _json_wire, _json_broken)


# --- Protobuf ---------------------------------------------------------------------------


def proto_pool() -> Any:
    """A descriptor pool with the files a Connect schema's message imports."""
    from confluent_kafka.schema_registry.confluent import meta_pb2
    from confluent_kafka.schema_registry.confluent.type import decimal_pb2
    from google.protobuf import descriptor_pb2, descriptor_pool, timestamp_pb2
    from google.type import date_pb2, timeofday_pb2

    pool = descriptor_pool.DescriptorPool()
    for module in (descriptor_pb2, timestamp_pb2, date_pb2, timeofday_pb2, decimal_pb2,
                   meta_pb2):
        pool.AddSerializedFile(module.DESCRIPTOR.serialized_pb)
    return pool


def message_class(file: Any, name: str) -> Any:
    """The Python class of message `name` (its full name) of FileDescriptorProto `file`."""
    from google.protobuf import message_factory

    pool = proto_pool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def _proto_payment(evolved: bool, id_type: str = "TYPE_INT64") -> Any:
    from confluent_kafka.schema_registry.confluent import meta_pb2
    from google.protobuf import descriptor_pb2

    fd = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="bank/payment.proto", package="bank", syntax="proto3",
        dependency=["google/protobuf/timestamp.proto", "confluent/type/decimal.proto",
                    "confluent/meta.proto"])
    msg = file.message_type.add(name="Payment")
    msg.field.add(name="id", number=1, type=getattr(fd, id_type), label=fd.LABEL_OPTIONAL)
    if id_type == "TYPE_INT64":
        optional = [("payer", 2)] + ([("memo", 5)] if evolved else [])
        for name, number in optional:
            msg.field.add(name=name, number=number, type=fd.TYPE_STRING,
                          label=fd.LABEL_OPTIONAL, proto3_optional=True,
                          oneof_index=len(msg.oneof_decl))
            msg.oneof_decl.add(name=f"_{name}")
        amount = msg.field.add(name="amount", number=3, type=fd.TYPE_MESSAGE,
                               type_name=".confluent.type.Decimal", label=fd.LABEL_OPTIONAL)
        meta = amount.options.Extensions[meta_pb2.field_meta]
        meta.params["scale"], meta.params["precision"] = "2", "12"
        msg.field.add(name="at", number=4, type=fd.TYPE_MESSAGE,
                      type_name=".google.protobuf.Timestamp", label=fd.LABEL_OPTIONAL)
    key = file.message_type.add(name="PaymentKey")
    key.field.add(name="id", number=1, type=fd.TYPE_INT64, label=fd.LABEL_OPTIONAL)
    return file


def _proto_reader(client: SchemaRegistryClient, subject: str) -> Callable[[bytes, str], dict]:
    from confluent_kafka.schema_registry.common.protobuf import protobuf_to_decimal
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from google.protobuf import descriptor_pb2

    registered = client.get_latest_version(subject).schema.schema_str
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(registered))
    name = f"{file.package}.{file.message_type[0].name}".lstrip(".")
    deserializer = ProtobufDeserializer(message_class(file, name), {})

    def read(data: bytes, topic: str) -> dict[str, Any]:
        msg = deserializer(data, _ctx(topic))
        return {"id": msg.id, "name": msg.name if msg.HasField("name") else None,
                "amount": protobuf_to_decimal(msg.amount),
                "placed": msg.placed.ToDatetime(tzinfo=UTC), "paid": msg.paid}

    return read


@functools.cache
def _proto_classes(evolved: bool, id_type: str = "TYPE_INT64") -> tuple[Any, Any]:
    """PaymentKey's and Payment's classes: one pair per schema, as generated code has."""
    from google.protobuf import message_factory

    pool = proto_pool()
    pool.Add(_proto_payment(evolved, id_type))
    return tuple(message_factory.GetMessageClass(pool.FindMessageTypeByName(f"bank.{n}"))
                 for n in ("PaymentKey", "Payment"))  # type: ignore[return-value]


def _proto_writers(client: SchemaRegistryClient, evolved: bool) -> tuple[Any, Any]:
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    return tuple(ProtobufSerializer(cls, client) for cls in _proto_classes(evolved))  # type: ignore[return-value]


def _proto_wire(row: dict[str, Any], evolved: bool) -> Any:
    from confluent_kafka.schema_registry.common.protobuf import decimal_to_protobuf

    msg = _proto_classes(evolved)[1](id=row["id"])
    for name in ("payer", "memo"):
        if row.get(name) is not None:
            setattr(msg, name, row[name])
    amount = decimal_to_protobuf(row["amount"], 2)
    msg.amount.value, msg.amount.scale, msg.amount.precision = \
        amount.value, amount.scale, amount.precision
    msg.at.FromDatetime(row["at"])
    return msg


def _proto_broken(client: SchemaRegistryClient) -> tuple[Any, Any]:
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    cls = _proto_classes(False, "TYPE_STRING")[1]
    return ProtobufSerializer(cls, client), cls(id="x")




PROTOBUF = Format("protobuf", "io.confluent.connect.protobuf.ProtobufConverter", "proto-",
                  _proto_reader, _proto_writers, _proto_wire, _proto_broken)

FORMATS = {f.name: f for f in (AVRO, PROTOBUF, JSON)}


def wire_key(fmt: Format, i: int, evolved: bool) -> Any:
    """A payment's key as the format's key serializer takes it."""
    return _proto_classes(evolved)[0](id=i) if fmt is PROTOBUF else i
