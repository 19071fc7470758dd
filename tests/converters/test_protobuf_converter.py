"""ProtobufConverter against Confluent's own Protobuf serializers from PyPI, over the registry a
worker serves: a message Confluent writes kctl reads exactly, one kctl writes Confluent reads
exactly, Connect schemas survive the trip through a FileDescriptorProto, and the registry
refuses a field that changes its type, in descriptor and in .proto text alike."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import itertools

import pytest
from confluent_kafka.schema_registry import Schema as RegisteredSchema
from confluent_kafka.schema_registry import SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.confluent.type import decimal_pb2
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    message_factory,
    text_format,
    timestamp_pb2,
)
from google.type import date_pb2, timeofday_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from kctl.api.data import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaBuilder,
    Struct,
    date_schema,
    decimal_schema,
    time_schema,
    timestamp_schema,
)
from kctl.errors import DataError
from kctl.runtime.converters import ProtobufConverter, load_converter
from kctl.runtime.converters.protobuf import decode_indexes, encode_indexes


def converter(url: str, **settings: str):
    return load_converter("io.confluent.connect.protobuf.ProtobufConverter",
                          {"schema.registry.url": url, **settings}, False)


def amount(scale: int = 4, precision: int = 20) -> Schema:
    base = decimal_schema(scale)
    return Schema(base.type, name=base.name, version=1,
                  parameters={"scale": str(scale), "connect.decimal.precision": str(precision)})


# What a team writing .proto by hand would compile: Confluent's logical types, a proto3
# optional, a repeated field, a map, and Confluent's field metadata for the decimal's scale
# and for a Connect int16.
PAYMENT_PROTO = """
name: "bank/payment.proto" package: "bank" syntax: "proto3"
dependency: "google/protobuf/timestamp.proto" dependency: "google/type/date.proto"
dependency: "google/type/timeofday.proto" dependency: "confluent/type/decimal.proto"
dependency: "confluent/meta.proto"
message_type {
  name: "Payment"
  field { name: "id" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "memo" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING oneof_index: 0
          proto3_optional: true }
  field { name: "value" number: 3 label: LABEL_OPTIONAL type: TYPE_MESSAGE
          type_name: ".confluent.type.Decimal"
          options { [confluent.field_meta] { params { key: "scale" value: "4" }
                                             params { key: "precision" value: "20" } } } }
  field { name: "at" number: 4 label: LABEL_OPTIONAL type: TYPE_MESSAGE
          type_name: ".google.protobuf.Timestamp" }
  field { name: "day" number: 5 label: LABEL_OPTIONAL type: TYPE_MESSAGE
          type_name: ".google.type.Date" }
  field { name: "cutoff" number: 6 label: LABEL_OPTIONAL type: TYPE_MESSAGE
          type_name: ".google.type.TimeOfDay" oneof_index: 1 proto3_optional: true }
  field { name: "tags" number: 7 label: LABEL_REPEATED type: TYPE_STRING }
  field { name: "attrs" number: 8 label: LABEL_REPEATED type: TYPE_MESSAGE
          type_name: ".bank.Payment.AttrsEntry" }
  field { name: "branch" number: 9 label: LABEL_OPTIONAL type: TYPE_INT32
          options { [confluent.field_meta] { params { key: "connect.type" value: "int16" } } } }
  field { name: "rate" number: 10 label: LABEL_OPTIONAL type: TYPE_FLOAT }
  nested_type { name: "AttrsEntry" options { map_entry: true }
    field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
    field { name: "value" number: 2 label: LABEL_OPTIONAL type: TYPE_INT64 } }
  oneof_decl { name: "_memo" }
  oneof_decl { name: "_cutoff" }
}
"""

PAYMENT = (SchemaBuilder.struct().name("bank.Payment")
           .field("id", INT64_SCHEMA)
           .field("memo", OPTIONAL_STRING_SCHEMA)
           .field("value", amount())
           .field("at", timestamp_schema())
           .field("day", date_schema())
           .field("cutoff", time_schema(optional=True))
           .field("tags", SchemaBuilder.array(STRING_SCHEMA).build())
           .field("attrs", SchemaBuilder.map(STRING_SCHEMA, INT64_SCHEMA).build())
           .field("branch", INT16_SCHEMA)
           .field("rate", FLOAT32_SCHEMA)
           .build())


def payment_class():
    """The message class protoc would generate for PAYMENT_PROTO."""
    from confluent_kafka.schema_registry.confluent import meta_pb2

    file = text_format.Parse(PAYMENT_PROTO, descriptor_pb2.FileDescriptorProto())
    pool = descriptor_pool.DescriptorPool()
    for module in (descriptor_pb2, timestamp_pb2, date_pb2, timeofday_pb2, decimal_pb2,
                   meta_pb2):
        pool.AddSerializedFile(module.DESCRIPTOR.serialized_pb)
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("bank.Payment"))


AT = dt.datetime(2024, 2, 29, 23, 59, 59, 999000, tzinfo=dt.UTC)


def test_what_confluents_serializer_writes_kctl_reads_exactly(registry_url):
    cls = payment_class()
    msg = cls(id=2**40, value={"value": (-123456789012).to_bytes(5, "big", signed=True),
                               "precision": 12, "scale": 4},
        tags=["a", "é"], branch=-300, rate=0.5)
    msg.at.FromDatetime(AT)
    msg.day.year, msg.day.month, msg.day.day = 1, 1, 1
    msg.attrs["k"] = 2**40
    serialize = ProtobufSerializer(cls, SchemaRegistryClient({"url": registry_url}))
    data = serialize(msg, SerializationContext("payments", MessageField.VALUE))

    got = converter(registry_url).to_connect_data("payments", data)

    assert got.schema == PAYMENT
    assert got.value.to_dict() == {
        "id": 2**40, "memo": None, "value": decimal.Decimal("-12345678.9012"), "at": AT,
        "day": dt.date(1, 1, 1), "cutoff": None, "tags": ["a", "é"], "attrs": {"k": 2**40},
        "branch": -300, "rate": 0.5}


def test_what_kctl_writes_confluents_deserializer_reads_exactly(registry_url):
    value = Struct(PAYMENT, {
        "id": -7, "memo": "rent", "value": decimal.Decimal("0.0001"), "at": AT,
        "day": dt.date(9999, 12, 31), "cutoff": dt.time(23, 59, 59, 999000), "tags": [],
        "attrs": {"a": -1, "b": 0}, "branch": 32767, "rate": -1.25})
    data = converter(registry_url).from_connect_data("ledger", PAYMENT, value)
    assert data[0] == 0 and data[5] == 0  # magic byte, id, message indexes [0]

    read = ProtobufDeserializer(payment_class(), {"use.deprecated.format": False},
                                SchemaRegistryClient({"url": registry_url}))(
        data, SerializationContext("ledger", MessageField.VALUE))

    assert (read.id, read.memo, read.branch, read.rate) == (-7, "rent", 32767, -1.25)
    assert int.from_bytes(read.value.value, "big", signed=True) == 1 and read.value.scale == 4
    assert read.at.ToDatetime(dt.UTC) == AT
    assert (read.day.year, read.day.month, read.day.day) == (9999, 12, 31)
    assert (read.cutoff.hours, read.cutoff.minutes, read.cutoff.seconds, read.cutoff.nanos) \
        == (23, 59, 59, 999_000_000)
    assert list(read.tags) == [] and dict(read.attrs) == {"a": -1, "b": 0}
    registered = SchemaRegistryClient({"url": registry_url}).get_latest_version("ledger-value")
    file = descriptor_pb2.FileDescriptorProto.FromString(
        base64.b64decode(registered.schema.schema_str))
    assert registered.schema.schema_type == "PROTOBUF"
    assert [(f.name, f.number) for f in file.message_type[0].field][:3] == \
        [("id", 1), ("memo", 2), ("value", 3)]


def test_a_field_that_changes_its_type_is_refused_with_409_in_either_form(registry_url):
    v1 = SchemaBuilder.struct().name("shop.Item").field("sku", STRING_SCHEMA) \
        .field("count", INT64_SCHEMA).build()
    converter(registry_url).from_connect_data("items", v1, Struct(v1, {"sku": "a", "count": 1}))
    sr = SchemaRegistryClient({"url": registry_url})
    retyped = SchemaBuilder.struct().name("shop.Item").field("sku", STRING_SCHEMA) \
        .field("count", STRING_SCHEMA).build()
    text = ProtobufConverter()._registered_schema(retyped)
    as_proto_text = ('syntax = "proto3";\npackage shop;\n'
                     'message Item {\n  string sku = 1;\n  string count = 2;\n}\n')
    for schema_str in (text, as_proto_text):
        with pytest.raises(SchemaRegistryError) as refused:
            sr.register_schema("items-value", RegisteredSchema(schema_str, "PROTOBUF"))
        assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    with pytest.raises(DataError, match="items-value"):
        converter(registry_url).from_connect_data("items", retyped,
                                                  Struct(retyped, {"sku": "a", "count": "x"}))
    grown = SchemaBuilder.struct().name("shop.Item").field("sku", STRING_SCHEMA) \
        .field("count", INT64_SCHEMA).field("note", OPTIONAL_STRING_SCHEMA).build()
    assert converter(registry_url).from_connect_data(
        "items", grown, Struct(grown, {"sku": "b", "count": 2}))[0] == 0


def test_bytes_that_are_not_the_wire_format_are_named(registry_url):
    c = converter(registry_url)
    with pytest.raises(DataError, match=r"magic byte 0x7b.*looks like JSON"):
        c.to_connect_data("t", b'{"id": 1}')
    with pytest.raises(DataError, match="schema id 999999"):
        c.to_connect_data("t", b"\x00" + (999999).to_bytes(4, "big") + b"\x00\x08\x01")


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | 0x80 if n else byte)
        if not n:
            return bytes(out)


def _len(field: int, body: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(body)) + body


def test_schemas_registered_as_proto_text_are_read_with_their_references(registry_url):
    """What Confluent's Java serializer registers: .proto text, importing a file of another
    subject (a reference) and a well-known type; values of the first and a later message."""
    sr = SchemaRegistryClient({"url": registry_url})
    sr.register_schema("money.proto", RegisteredSchema(
        'syntax = "proto3";\npackage money;\nmessage Amount {\n  string currency = 1;\n'
        '  int64 cents = 2;\n}\n', "PROTOBUF"))
    schema_id = sr.register_schema("notes-value", RegisteredSchema(
        'syntax = "proto3";\npackage notes;\nimport "money.proto";\n'
        'import "google/protobuf/timestamp.proto";\n\nmessage Note {\n  string text = 1;\n'
        '  money.Amount price = 2;\n  google.protobuf.Timestamp at = 3;\n'
        '  message Inner { int32 n = 1; }\n}\nmessage Other {\n  Note.Inner inner = 1;\n}\n',
        "PROTOBUF", [SchemaReference("money.proto", "money.proto", 1)]))
    header = b"\x00" + schema_id.to_bytes(4, "big")
    note = (_len(1, b"a") + _len(2, _len(1, b"EUR") + b"\x10" + _varint(150))
            + _len(3, b"\x08" + _varint(1_700_000_000)))
    got = converter(registry_url).to_connect_data("notes", header + encode_indexes([0]) + note)
    assert got.schema.name == "notes.Note"
    assert [f.name for f in got.schema.fields] == ["text", "price", "at"]
    assert got.value.get("text") == "a"
    assert dict(got.value.get("price").items()) == {"currency": "EUR", "cents": 150}
    assert got.value.get("at") == dt.datetime.fromtimestamp(1_700_000_000, dt.UTC)
    other = converter(registry_url).to_connect_data(
        "notes", header + encode_indexes([1]) + _len(1, b"\x08\x05"))
    assert other.schema.name == "notes.Other"
    assert dict(other.value.get("inner").items()) == {"n": 5}


def test_proto_text_that_does_not_compile_is_refused_with_protocs_words(registry_url):
    sr = SchemaRegistryClient({"url": registry_url})
    with pytest.raises(SchemaRegistryError) as refused:
        sr.register_schema("broken-value", RegisteredSchema(
            'syntax = "proto3";\nmessage Note {\n  Missing text = 1;\n}\n', "PROTOBUF"))
    assert refused.value.http_status_code == 422
    assert '"Missing" is not defined' in refused.value.error_message


def test_a_value_that_is_not_a_struct_is_named():
    with pytest.raises(DataError, match="writes structs"):
        ProtobufConverter()._registered_schema(INT64_SCHEMA)


@given(st.lists(st.integers(0, 300), min_size=1, max_size=5))
def test_message_indexes_read_back_as_confluent_writes_them(indexes):
    data = b"head" + encode_indexes(indexes) + b"rest"
    assert decode_indexes(data, 4) == (indexes, len(data) - 4)
    assert encode_indexes([0]) == b"\x00" and encode_indexes([1]) == b"\x02\x02"


# -- Connect schemas and values through Protobuf and back ---------------------------------

PRIMITIVES = [
    (INT8_SCHEMA, st.integers(-(2**7), 2**7 - 1)),
    (INT16_SCHEMA, st.integers(-(2**15), 2**15 - 1)),
    (INT32_SCHEMA, st.integers(-(2**31), 2**31 - 1)),
    (INT64_SCHEMA, st.integers(-(2**63), 2**63 - 1)),
    (FLOAT32_SCHEMA, st.floats(width=32, allow_nan=False)),
    (FLOAT64_SCHEMA, st.floats(allow_nan=False)),
    (BOOLEAN_SCHEMA, st.booleans()),
    (STRING_SCHEMA, st.text()),
    (BYTES_SCHEMA, st.binary(max_size=8)),
    (amount(4, 30), st.decimals(min_value=-(10**25), max_value=10**25, places=4,
                                allow_nan=False, allow_infinity=False)),
    (date_schema(), st.dates()),
    (time_schema(), st.times().map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000))),
    (timestamp_schema(), st.datetimes(timezones=st.just(dt.UTC)).map(
        lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000))),
]
_names = itertools.count()


@st.composite
def structs(draw, depth: int = 0) -> tuple[Schema, Struct]:
    kinds = draw(st.lists(st.sampled_from(PRIMITIVES), min_size=1, max_size=5))
    builder = SchemaBuilder.struct().name(f"p.Row{next(_names)}")
    values = {}
    for i, (schema, strategy) in enumerate(kinds):
        optional = draw(st.booleans())
        builder.field(f"f{i}", Schema(schema.type, optional=optional, name=schema.name,
                                      version=schema.version, parameters=schema.parameters))
        values[f"f{i}"] = draw(st.none() if optional and draw(st.booleans()) else strategy)
    if draw(st.booleans()):
        builder.field("list", SchemaBuilder.array(INT32_SCHEMA).build())
        values["list"] = draw(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=3))
    if draw(st.booleans()):
        builder.field("attrs", SchemaBuilder.map(STRING_SCHEMA, FLOAT64_SCHEMA).build())
        values["attrs"] = draw(st.dictionaries(st.text(max_size=3), st.floats(allow_nan=False),
                                               max_size=3))
    if depth == 0 and draw(st.booleans()):
        nested, nested_value = draw(structs(depth=1))
        optional = draw(st.booleans())
        builder.field("child", Schema(nested.type, optional=optional, name=nested.name,
                                      fields=nested.fields))
        values["child"] = None if optional and draw(st.booleans()) else \
            Struct(builder.build().field("child").schema, dict(nested_value.items()))
        builder.field("children", SchemaBuilder.array(nested).build())
        values["children"] = [nested_value] * draw(st.integers(0, 2))
    schema = builder.build()
    return schema, Struct(schema, values)


@settings(max_examples=80, deadline=None)
@given(structs())
def test_connect_data_survives_protobuf_both_ways(registry_url, pair):
    schema, value = pair
    c = converter(registry_url)
    # a topic per example: another message name in one subject is an incompatible change
    topic = f"roundtrip-{next(_names)}"
    got = c.to_connect_data(topic, c.from_connect_data(topic, schema, value))
    assert got.schema == schema
    assert got.value == value


def test_the_registry_compares_descriptors_with_proto_text_field_by_field():
    from kctl.runtime.registry.formats import incompatibilities, parse

    tagged = SchemaBuilder.struct().name("shop.Tagged").field("id", INT64_SCHEMA) \
        .field("attrs", SchemaBuilder.map(STRING_SCHEMA, INT64_SCHEMA).build()).build()
    described = parse("PROTOBUF", ProtobufConverter()._registered_schema(tagged))
    text = "syntax = \"proto3\";\npackage shop;\nmessage Tagged {{\n  int64 id = 1;\n" \
           "  map<string, {}> attrs = 2;\n}}\n"
    same, retyped = (parse("PROTOBUF", text.format(t)) for t in ("int64", "string"))
    assert incompatibilities(same, described) == []
    assert incompatibilities(described, same) == []
    assert incompatibilities(retyped, described) == ["FIELD_SCALAR_KIND_CHANGED: Tagged.2"]
    moved = parse("PROTOBUF", text.format("int64").replace("package shop;", "package store;"))
    assert incompatibilities(moved, described) == ["PACKAGE_CHANGED: shop"]
