"""AvroConverter and JsonSchemaConverter against Confluent's own serializers from PyPI, over the registry a worker
serves: what one writes the other reads exactly, both ways, and Connect schemas survive the
round trip as Confluent's AvroData maps them."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from hypothesis import given, settings
from hypothesis import strategies as st

from kctl.api.data import (
    BOOLEAN_SCHEMA,
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
    Type,
    date_schema,
    decimal_schema,
    time_schema,
    timestamp_schema,
)
from kctl.errors import DataError
from kctl.runtime.converters import load_converter
from kctl.runtime.converters.avro_data import AvroData


def converter(url: str, is_key: bool = False, **settings: str):
    return load_converter("io.confluent.connect.avro.AvroConverter",
                          {"schema.registry.url": url, **settings}, is_key)


def amount(scale: int = 2, precision: int = 12) -> Schema:
    base = decimal_schema(scale)
    return Schema(base.type, name=base.name, version=1,
                  parameters={"scale": str(scale), "connect.decimal.precision": str(precision)})


ORDER = (SchemaBuilder.struct().name("shop.Order")
         .field("id", INT64_SCHEMA)
         .field("name", OPTIONAL_STRING_SCHEMA)
         .field("amount", amount())
         .field("at", timestamp_schema())
         .field("paid", BOOLEAN_SCHEMA)
         .build())


def order(i: int, name: str | None = "x") -> Struct:
    return Struct(ORDER, {"id": i, "name": name, "amount": decimal.Decimal("1234567890.12"),
                          "at": dt.datetime(2024, 2, 29, 23, 59, 59, 999000, tzinfo=dt.UTC),
                          "paid": i % 2 == 0})


def test_what_kctl_writes_confluents_deserializer_reads_exactly(registry_url):
    data = converter(registry_url).from_connect_data("orders", ORDER, order(7, None))
    assert data[0] == 0 and int.from_bytes(data[1:5], "big") >= 1
    read = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))(
        data, SerializationContext("orders", MessageField.VALUE))
    assert read == {"id": 7, "name": None, "amount": decimal.Decimal("1234567890.12"),
                    "at": dt.datetime(2024, 2, 29, 23, 59, 59, 999000, tzinfo=dt.UTC),
                    "paid": False}
    subject = SchemaRegistryClient({"url": registry_url}).get_latest_version("orders-value")
    avro = json.loads(subject.schema.schema_str)
    assert avro["connect.name"] == "shop.Order"
    assert avro["fields"][1]["type"] == ["null", "string"] and avro["fields"][1]["default"] is None
    assert avro["fields"][2]["type"]["logicalType"] == "decimal"
    assert avro["fields"][2]["type"]["connect.name"] == "org.apache.kafka.connect.data.Decimal"
    assert avro["fields"][3]["type"]["logicalType"] == "timestamp-millis"


def test_what_confluents_serializer_writes_kctl_reads_exactly(registry_url):
    schema = json.dumps({"type": "record", "name": "Payment", "namespace": "bank", "fields": [
        {"name": "id", "type": "long"},
        {"name": "value", "type": {"type": "bytes", "logicalType": "decimal",
                                   "precision": 20, "scale": 4}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "memo", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}}]})
    serialize = AvroSerializer(SchemaRegistryClient({"url": registry_url}), schema)
    record = {"id": 1, "value": decimal.Decimal("-12345678.9012"), "day": dt.date(1, 1, 1),
              "memo": None, "tags": ["a", "é"], "attrs": {"k": 2**40}}
    data = serialize(record, SerializationContext("payments", MessageField.VALUE))
    got = converter(registry_url).to_connect_data("payments", data)
    assert got.schema.type is Type.STRUCT and got.schema.name == "bank.Payment"
    assert got.value.to_dict() == record
    assert got.schema.field("memo").schema.optional
    assert got.schema.field("value").schema.parameters["scale"] == "4"


def test_keys_and_values_have_their_own_subjects_and_strategies(registry_url):
    sr = SchemaRegistryClient({"url": registry_url})
    converter(registry_url, is_key=True).from_connect_data("keyed", INT64_SCHEMA, 5)
    converter(registry_url).from_connect_data("keyed", ORDER, order(1))
    converter(registry_url, **{"value.subject.name.strategy": "RecordNameStrategy"}) \
        .from_connect_data("elsewhere", ORDER, order(2))
    converter(registry_url, **{"value.subject.name.strategy":
                               "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"}) \
        .from_connect_data("elsewhere", ORDER, order(3))
    subjects = set(sr.get_subjects())
    assert {"keyed-key", "keyed-value", "shop.Order", "elsewhere-shop.Order"} <= subjects


def test_without_auto_register_a_schema_the_subject_lacks_is_that_records_error(registry_url):
    strict = converter(registry_url, **{"auto.register.schemas": "false"})
    with pytest.raises(DataError, match="strict-value"):
        strict.from_connect_data("strict", ORDER, order(1))
    converter(registry_url).from_connect_data("strict", ORDER, order(1))
    assert strict.from_connect_data("strict", ORDER, order(2))[0] == 0


def test_bytes_that_are_not_the_wire_format_are_named(registry_url):
    c = converter(registry_url)
    with pytest.raises(DataError, match=r"magic byte 0x7b.*looks like JSON"):
        c.to_connect_data("t", b'{"id": 1}')
    with pytest.raises(DataError, match="schema id 999999"):
        c.to_connect_data("t", b"\x00" + (999999).to_bytes(4, "big") + b"\x02")


def test_an_unreachable_registry_is_a_retriable_error_naming_the_url():
    from kctl.errors import RetriableError

    c = converter("http://127.0.0.1:9")
    with pytest.raises(RetriableError, match=r"127\.0\.0\.1:9"):
        c.from_connect_data("t", INT64_SCHEMA, 1)


# -- Connect schemas and values through Avro and back -------------------------------------

PRIMITIVES = st.sampled_from([
    (INT8_SCHEMA, st.integers(-(2**7), 2**7 - 1)),
    (INT16_SCHEMA, st.integers(-(2**15), 2**15 - 1)),
    (INT32_SCHEMA, st.integers(-(2**31), 2**31 - 1)),
    (INT64_SCHEMA, st.integers(-(2**63), 2**63 - 1)),
    (FLOAT64_SCHEMA, st.floats(allow_nan=False)),
    (BOOLEAN_SCHEMA, st.booleans()),
    (STRING_SCHEMA, st.text()),
    (amount(4, 30), st.decimals(min_value=-(10**25), max_value=10**25, places=4,
                                allow_nan=False, allow_infinity=False)),
    (date_schema(), st.dates()),
    (time_schema(), st.times().map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000))),
    (timestamp_schema(), st.datetimes(timezones=st.just(dt.UTC)).map(
        lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000))),
])


@st.composite
def structs(draw) -> tuple[Schema, Struct]:
    kinds = draw(st.lists(PRIMITIVES, min_size=1, max_size=6))
    builder = SchemaBuilder.struct().name("p.Row")
    values = {}
    for i, (schema, strategy) in enumerate(kinds):
        optional = draw(st.booleans())
        field_schema = Schema(schema.type, optional=optional, name=schema.name,
                              version=schema.version, parameters=schema.parameters)
        builder.field(f"f{i}", field_schema)
        values[f"f{i}"] = draw(st.none() if optional and draw(st.booleans()) else strategy)
    if draw(st.booleans()):
        builder.field("list", SchemaBuilder.array(INT32_SCHEMA).build())
        values["list"] = draw(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=3))
    schema = builder.build()
    return schema, Struct(schema, values)


@settings(max_examples=80, deadline=None)
@given(structs())
def test_connect_data_survives_avro_both_ways(pair):
    schema, value = pair
    data = AvroData()
    avro = data.from_connect_schema(schema)
    assert data.to_connect_schema(avro) == schema
    import io

    import fastavro

    parsed = fastavro.parse_schema(avro)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, data.to_avro_value(schema, value))
    out.seek(0)
    back = data.to_connect_value(schema, fastavro.schemaless_reader(out, parsed, parsed))
    assert back == value


# -- JSON Schema ------------------------------------------------------------------------------


def test_json_schema_converter_and_confluents_json_serializers_read_each_other(registry_url):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    kctl = load_converter("io.confluent.connect.json.JsonSchemaConverter",
                          {"schema.registry.url": registry_url}, False)
    data = kctl.from_connect_data("orders-js", ORDER, order(4, "four"))
    assert data[0] == 0
    sr = SchemaRegistryClient({"url": registry_url})
    registered = sr.get_latest_version("orders-js-value").schema
    assert registered.schema_type == "JSON"
    doc = json.loads(registered.schema_str)
    assert doc["title"] == "shop.Order" and doc["properties"]["id"]["connect.type"] == "int64"
    assert doc["properties"]["name"]["oneOf"][0] == {"type": "null"}
    read = JSONDeserializer(registered.schema_str, schema_registry_client=sr)(
        data, SerializationContext("orders-js", MessageField.VALUE))
    # Python's json reads numbers as floats; the bytes carry the decimal's exact digits
    assert read == {"id": 4, "name": "four", "amount": 1234567890.12, "at": 1709251199999,
                    "paid": True}
    assert b'"amount":1234567890.12,' in data

    schema = json.dumps({"type": "object", "title": "Reading", "properties": {
        "sensor": {"type": "string"}, "value": {"type": "number"},
        "count": {"type": "integer"}}, "required": ["sensor", "value"]})
    written = JSONSerializer(schema, sr)({"sensor": "s1", "value": 21.5, "count": 3},
                                         SerializationContext("readings", MessageField.VALUE))
    got = kctl.to_connect_data("readings", written)
    assert got.schema.name == "Reading"
    assert got.value.to_dict() == {"sensor": "s1", "value": 21.5, "count": 3}
    assert got.schema.field("count").schema.optional, "not required: optional"


@settings(max_examples=60, deadline=None)
@given(structs())
def test_connect_data_survives_json_schema_both_ways(pair):
    from kctl.runtime.converters.json_schema_registry import (
        _dumps,
        from_json_schema,
        to_connect_value,
        to_json_schema,
        to_json_value,
    )

    schema, value = pair
    assert from_json_schema(json.loads(json.dumps(to_json_schema(schema)))) == schema
    if any(isinstance(v, float) and math.isinf(v) for v in value.to_dict().values()):
        # JSON has no infinity: the converter makes this ValueError the record's DataError
        with pytest.raises(ValueError, match="Out of range float"):
            _dumps(to_json_value(schema, value))
        return
    text = _dumps(to_json_value(schema, value))
    back = to_connect_value(schema, json.loads(text, parse_float=decimal.Decimal))
    assert back == value


# -- whole columns ------------------------------------------------------------------------------


@st.composite
def flat_batches(draw):
    """A flat schema and a column of rows for it, nulls included."""
    import pyarrow as pa

    from kctl.api.arrow import structs_to_table

    schema, _ = draw(structs())
    flat = SchemaBuilder.struct().name("p.Flat")
    for f in schema.fields:
        if f.schema.type is not Type.ARRAY:
            flat.field(f.name, f.schema)
    flat = flat.build()
    values = []
    for _ in range(draw(st.integers(1, 6))):
        one = {}
        for f in flat.fields:
            kinds = dict((s.name or s.type, strat) for s, strat in PRIMITIVES.elements)
            strategy = kinds[f.schema.name or f.schema.type]
            one[f.name] = draw(st.none() if f.schema.optional and draw(st.booleans())
                               else strategy)
        values.append(Struct(flat, one))
    table = structs_to_table(values, flat)
    column = pa.StructArray.from_arrays([c.combine_chunks() for c in table.columns],
                                        fields=list(table.schema))
    return flat, values, column


@settings(max_examples=60, deadline=None)
@given(flat_batches())
def test_a_column_encodes_and_decodes_exactly_as_record_by_record(registry_url, batch):
    """The columnar codec gives the very bytes fastavro gives per record, and reads them
    back into the column the per-record path would build."""
    import uuid

    schema, values, column = batch
    topic = f"columns-{uuid.uuid4().hex}"  # a subject per example: the schemas differ
    c = converter(registry_url)
    encoded = c.from_arrow(topic, schema, column)
    assert encoded is not None, "a flat record of primitives is columnar"
    assert encoded.to_pylist() == [c.from_connect_data(topic, schema, v) for v in values]
    decoded = c.to_arrow(topic, encoded)
    assert decoded is not None
    read_schema, read = decoded
    assert [Struct(read_schema, r) for r in read.to_pylist()] == \
        [c.to_connect_data(topic, b).value for b in encoded.to_pylist()]


def test_what_columns_cannot_carry_goes_record_by_record(registry_url):
    import pyarrow as pa

    c = converter(registry_url)
    nested = SchemaBuilder.struct().name("n.N").field("inner", ORDER).build()
    assert c.from_arrow("nested", nested, pa.array([{"inner": None}], pa.struct(
        [pa.field("inner", pa.struct([pa.field("id", pa.int64())]))]))) is None
    good = c.from_connect_data("mixed", ORDER, order(1))
    assert c.to_arrow("mixed", pa.array([good, b'{"not": "avro"}'], pa.binary())) is None
    truncated = good[:-1]
    assert c.to_arrow("mixed", pa.array([good, truncated], pa.binary())) is None


def test_enums_and_fixed_keep_their_symbols_and_sizes_both_ways(registry_url):
    schema = json.dumps({"type": "record", "name": "Card", "namespace": "deck", "fields": [
        {"name": "suit", "type": {"type": "enum", "name": "Suit",
                                  "symbols": ["SPADES", "HEARTS"]}},
        {"name": "hash", "type": {"type": "fixed", "name": "Md5", "size": 4}}]})
    data = AvroSerializer(SchemaRegistryClient({"url": registry_url}), schema)(
        {"suit": "HEARTS", "hash": b"\x01\x02\x03\x04"},
        SerializationContext("cards", MessageField.VALUE))
    c = converter(registry_url)
    got = c.to_connect_data("cards", data)
    suit = got.schema.field("suit").schema
    assert suit.type is Type.STRING and suit.parameters["io.confluent.connect.avro.Enum"] == \
        "deck.Suit"
    assert got.value.to_dict() == {"suit": "HEARTS", "hash": b"\x01\x02\x03\x04"}
    again = c.from_connect_data("cards-copy", got.schema, got.value)
    read = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))(
        again, SerializationContext("cards-copy", MessageField.VALUE))
    assert read == {"suit": "HEARTS", "hash": b"\x01\x02\x03\x04"}
    written = json.loads(SchemaRegistryClient({"url": registry_url})
                         .get_latest_version("cards-copy-value").schema.schema_str)
    assert written["fields"][0]["type"]["type"] == "enum"
    assert written["fields"][0]["type"]["symbols"] == ["SPADES", "HEARTS"]
    assert written["fields"][1]["type"]["size"] == 4
