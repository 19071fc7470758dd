"""Every $Key/$Value transform, on the key and on the value, with a schema and without one.

Each row of CASES is one transform configuration with the payload it gets and what it must
turn that payload into, once as plain Python (schemaless) and once as a Struct with its schema.
Every row runs on the record key (`Transform$Key`) and on the record value (`Transform$Value`);
the other side of the record is a bystander that must come through untouched.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
from typing import Any, NamedTuple

import pytest

from kctl.api.data import (
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaBuilder,
    Struct,
    Type,
    date_schema,
    timestamp_schema,
)
from kctl.api.records import Headers, SinkRecord
from kctl.errors import DataError

UTC = dt.UTC
WHEN = dt.datetime(2024, 3, 5, 14, 7, 9, 123000, tzinfo=UTC)
WHEN_MS = 1709647629123
RECORD_TS = 1_000  # the record's own timestamp, for InsertField

OPTIONAL_INT16_WITH_DEFAULT = Schema(Type.INT16, optional=True, default=1)
ORDER = (SchemaBuilder.struct().name("shop.Order").version(2).doc("an order")
         .field("id", INT32_SCHEMA)
         .field("secret", OPTIONAL_STRING_SCHEMA)
         .field("qty", OPTIONAL_INT16_WITH_DEFAULT)
         .build())
ORDER_VALUE = Struct(ORDER, {"id": 1, "secret": "s3cr3t", "qty": 5})
ORDER_MAP = {"id": 1, "secret": "s3cr3t", "qty": 5}

ADDRESS = SchemaBuilder.struct().field("city", STRING_SCHEMA).field("zip", OPTIONAL_STRING_SCHEMA) \
    .build()
SHIPMENT = (SchemaBuilder.struct().name("shop.Shipment")
            .field("id", INT32_SCHEMA).field("to", ADDRESS).build())
SHIPMENT_VALUE = Struct(SHIPMENT, {"id": 9, "to": Struct(ADDRESS, {"city": "Oslo"})})

STAMPED = SchemaBuilder.struct().field("id", INT32_SCHEMA).field("at", timestamp_schema()).build()


def struct(*fields: tuple[str, Schema], name: str | None = None, version: int | None = None,
           doc: str | None = None) -> Schema:
    b = SchemaBuilder.struct()
    if name:
        b.name(name)
    if version:
        b.version(version)
    if doc:
        b.doc(doc)
    for field_name, schema in fields:
        b.field(field_name, schema)
    return b.build()


class Case(NamedTuple):
    id: str
    transform: str  # without the $Key / $Value suffix
    config: dict[str, str]
    plain_in: Any
    plain_out: Any
    schema_in: Schema
    value_in: Any
    schema_out: Schema
    value_out: Any


INSERTED = struct(("id", INT32_SCHEMA), ("secret", OPTIONAL_STRING_SCHEMA),
                  ("qty", OPTIONAL_INT16_WITH_DEFAULT), ("topic", STRING_SCHEMA),
                  ("part", OPTIONAL_INT32_SCHEMA), ("off", OPTIONAL_INT64_SCHEMA),
                  ("ts", timestamp_schema(True)), ("src", OPTIONAL_STRING_SCHEMA),
                  name="shop.Order", version=2, doc="an order")
REPLACED = struct(("id", INT32_SCHEMA), ("quantity", OPTIONAL_INT16_WITH_DEFAULT),
                  name="shop.Order", version=2, doc="an order")
CAST = struct(("id", STRING_SCHEMA), ("secret", OPTIONAL_STRING_SCHEMA),
              ("qty", Schema(Type.FLOAT64, optional=True, default=1.0)),
              name="shop.Order", version=2, doc="an order")
FLAT = struct(("id", INT32_SCHEMA), ("to_city", STRING_SCHEMA), ("to_zip", OPTIONAL_STRING_SCHEMA),
              name="shop.Shipment")
HOISTED = struct(("wrapped", INT64_SCHEMA))
STAMPED_UNIX = struct(("id", INT32_SCHEMA), ("at", INT64_SCHEMA))

CASES = [
    Case("InsertField", "InsertField",
         {"topic.field": "topic!", "partition.field": "part", "offset.field": "off",
          "timestamp.field": "ts", "static.field": "src", "static.value": "crm"},
         {"id": 1}, {"id": 1, "topic": "orders", "part": 3, "off": 7, "ts": RECORD_TS, "src": "crm"},
         ORDER, ORDER_VALUE,
         INSERTED, Struct(INSERTED, {
             "id": 1, "secret": "s3cr3t", "qty": 5, "topic": "orders", "part": 3, "off": 7,
             "ts": dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC), "src": "crm"})),
    Case("ReplaceField", "ReplaceField",
         {"include": "id,qty", "exclude": "secret", "renames": "qty:quantity"},
         ORDER_MAP, {"id": 1, "quantity": 5},
         ORDER, ORDER_VALUE,
         REPLACED, Struct(REPLACED, {"id": 1, "quantity": 5})),
    Case("MaskField", "MaskField", {"fields": "secret,qty"},
         ORDER_MAP, {"id": 1, "secret": "", "qty": 0},
         ORDER, ORDER_VALUE,
         ORDER, Struct(ORDER, {"id": 1, "secret": "", "qty": 0})),
    Case("MaskField-replacement", "MaskField", {"fields": "secret,qty", "replacement": "42"},
         ORDER_MAP, {"id": 1, "secret": "42", "qty": 42},
         ORDER, ORDER_VALUE,
         ORDER, Struct(ORDER, {"id": 1, "secret": "42", "qty": 42})),
    Case("Cast-fields", "Cast", {"spec": "id:string,qty:float64"},
         ORDER_MAP, {"id": "1", "secret": "s3cr3t", "qty": 5.0},
         ORDER, ORDER_VALUE,
         CAST, Struct(CAST, {"id": "1", "secret": "s3cr3t", "qty": 5.0})),
    Case("Cast-whole", "Cast", {"spec": "string"},
         42, "42",
         INT32_SCHEMA, 42,
         STRING_SCHEMA, "42"),
    Case("TimestampConverter-field", "TimestampConverter",
         {"field": "at", "target.type": "unix"},
         {"id": 1, "at": WHEN}, {"id": 1, "at": WHEN_MS},
         STAMPED, Struct(STAMPED, {"id": 1, "at": WHEN}),
         STAMPED_UNIX, Struct(STAMPED_UNIX, {"id": 1, "at": WHEN_MS})),
    Case("TimestampConverter-whole", "TimestampConverter", {"target.type": "Date"},
         WHEN, dt.date(2024, 3, 5),
         timestamp_schema(), WHEN,
         date_schema(), dt.date(2024, 3, 5)),
    Case("ExtractField", "ExtractField", {"field": "secret"},
         ORDER_MAP, "s3cr3t",
         ORDER, ORDER_VALUE,
         OPTIONAL_STRING_SCHEMA, "s3cr3t"),
    Case("HoistField", "HoistField", {"field": "wrapped"},
         42, {"wrapped": 42},
         INT64_SCHEMA, 42,
         HOISTED, Struct(HOISTED, {"wrapped": 42})),
    Case("Flatten", "Flatten", {"delimiter": "_"},
         {"id": 9, "to": {"city": "Oslo", "zip": None}}, {"id": 9, "to_city": "Oslo", "to_zip": None},
         SHIPMENT, SHIPMENT_VALUE,
         FLAT, Struct(FLAT, {"id": 9, "to_city": "Oslo"})),
]

# The side of the record a transform must leave alone.
BYSTANDER_KEY = ("k-1", STRING_SCHEMA)
BYSTANDER_VALUE = (Struct(ADDRESS, {"city": "Bergen"}), ADDRESS)


def record_with(target: str, schema: Schema | None, payload: Any) -> SinkRecord:
    if target == "key":
        value, value_schema = BYSTANDER_VALUE
        return SinkRecord("orders", 3, schema, payload, value_schema, value, RECORD_TS,
                          Headers().add("h", "v"), kafka_offset=7)
    key, key_schema = BYSTANDER_KEY
    return SinkRecord("orders", 3, key_schema, key, schema, payload, RECORD_TS,
                      Headers().add("h", "v"), kafka_offset=7)


def payload_of(rec: SinkRecord, target: str) -> tuple[Schema | None, Any]:
    return (rec.key_schema, rec.key) if target == "key" else (rec.value_schema, rec.value)


def assert_rest_untouched(out: SinkRecord, original: SinkRecord, target: str) -> None:
    if target == "key":
        assert out.value_schema is original.value_schema and out.value is original.value
    else:
        assert out.key_schema is original.key_schema and out.key is original.key
    assert (out.topic, out.kafka_partition, out.kafka_offset, out.timestamp) == \
        (original.topic, original.kafka_partition, original.kafka_offset, original.timestamp)
    assert out.headers == original.headers


TARGETS = pytest.mark.parametrize("target", ["key", "value"])
EACH_CASE = pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])


def _variant(case: Case, target: str) -> str:
    return f"{case.transform}${target.capitalize()}"


@TARGETS
@EACH_CASE
def test_with_schema(make, case: Case, target: str):
    value_in = copy.deepcopy(case.value_in)
    original = record_with(target, case.schema_in, value_in)
    out = make(_variant(case, target), **case.config).apply(original)
    schema, value = payload_of(out, target)
    assert schema == case.schema_out
    assert value == case.value_out
    if isinstance(value, Struct):
        value.validate()  # what a converter will check before serializing it
    assert_rest_untouched(out, original, target)
    assert value_in == case.value_in  # the input is not mutated


@TARGETS
@EACH_CASE
def test_without_schema(make, case: Case, target: str):
    plain_in = copy.deepcopy(case.plain_in)
    original = record_with(target, None, plain_in)
    out = make(_variant(case, target), **case.config).apply(original)
    assert payload_of(out, target) == (None, case.plain_out)
    assert_rest_untouched(out, original, target)
    assert plain_in == case.plain_in  # the input is not mutated


@TARGETS
@EACH_CASE
def test_an_equal_input_schema_gives_an_equal_output_schema(make, case: Case, target: str):
    """Derived schemas are cached by equality too: a converter rebuilds the schema per record."""
    t = make(_variant(case, target), **case.config)
    first = payload_of(t.apply(record_with(target, case.schema_in, case.value_in)), target)[0]
    rebuilt = dataclasses.replace(case.schema_in)
    assert rebuilt is not case.schema_in
    value = case.value_in
    if isinstance(value, Struct):
        value = Struct(rebuilt, dict(value.items()))
    again = payload_of(t.apply(record_with(target, rebuilt, value)), target)[0]
    assert again == first


# --- null keys and values (tombstones), as Kafka's transforms treat them ---------------------

OPTIONAL_ORDER = (SchemaBuilder.struct().name("shop.Order").optional()
                  .field("id", INT32_SCHEMA).field("at", timestamp_schema(True)).build())
OPTIONAL_ORDER_UNIX = (SchemaBuilder.struct().name("shop.Order").optional()
                       .field("id", INT32_SCHEMA).field("at", OPTIONAL_INT64_SCHEMA).build())
HOISTED_OPTIONAL = struct(("wrapped", OPTIONAL_ORDER))
UNCHANGED = object()


class NullCase(NamedTuple):
    id: str
    transform: str
    config: dict[str, str]
    schema_in: Schema
    with_schema: Any  # UNCHANGED, DataError, or the (schema, value) it becomes
    schemaless: Any  # UNCHANGED, DataError, or the value it becomes


NULL_CASES = [
    NullCase("InsertField", "InsertField", {"topic.field": "t"}, OPTIONAL_ORDER, UNCHANGED,
             UNCHANGED),
    NullCase("ReplaceField", "ReplaceField", {"renames": "id:key"}, OPTIONAL_ORDER, UNCHANGED,
             UNCHANGED),
    NullCase("Cast", "Cast", {"spec": "id:int64"}, OPTIONAL_ORDER, UNCHANGED, UNCHANGED),
    NullCase("Flatten", "Flatten", {}, OPTIONAL_ORDER, UNCHANGED, UNCHANGED),
    NullCase("ExtractField", "ExtractField", {"field": "id"}, OPTIONAL_ORDER,
             (INT32_SCHEMA, None), None),
    NullCase("HoistField", "HoistField", {"field": "wrapped"}, OPTIONAL_ORDER,
             (HOISTED_OPTIONAL, Struct(HOISTED_OPTIONAL, {"wrapped": None})), {"wrapped": None}),
    NullCase("TimestampConverter-field", "TimestampConverter", {"field": "at", "target.type": "unix"},
             OPTIONAL_ORDER, (OPTIONAL_ORDER_UNIX, None), None),
    NullCase("TimestampConverter-whole", "TimestampConverter", {"target.type": "unix"},
             timestamp_schema(True), (OPTIONAL_INT64_SCHEMA, None), None),
    # Kafka's MaskField and HeaderFrom require a Struct / Map: a null is an error.
    NullCase("MaskField", "MaskField", {"fields": "id"}, OPTIONAL_ORDER, DataError, DataError),
    NullCase("HeaderFrom", "HeaderFrom", {"fields": "id", "headers": "h", "operation": "copy"},
             OPTIONAL_ORDER, DataError, DataError),
]


@TARGETS
@pytest.mark.parametrize("case", NULL_CASES, ids=[c.id for c in NULL_CASES])
def test_null_payloads_with_schema(make, case: NullCase, target: str):
    t = make(_variant(case, target), **case.config)
    original = record_with(target, case.schema_in, None)
    if case.with_schema is DataError:
        with pytest.raises(DataError, match="Only Struct objects supported"):
            t.apply(original)
        return
    out = t.apply(original)
    if case.with_schema is UNCHANGED:
        assert out is original
    else:
        assert payload_of(out, target) == case.with_schema
        assert_rest_untouched(out, original, target)


@TARGETS
@pytest.mark.parametrize("case", NULL_CASES, ids=[c.id for c in NULL_CASES])
def test_null_payloads_without_schema(make, case: NullCase, target: str):
    t = make(_variant(case, target), **case.config)
    original = record_with(target, None, None)
    if case.schemaless is DataError:
        with pytest.raises(DataError, match="Only Map objects supported"):
            t.apply(original)
        return
    out = t.apply(original)
    if case.schemaless is UNCHANGED:
        assert out is original
    else:
        assert payload_of(out, target) == (None, case.schemaless)
        assert_rest_untouched(out, original, target)


# --- a payload of the wrong shape is a DataError naming the transform's purpose ---------------

WRONG_SHAPE = [
    ("InsertField", {"topic.field": "t"}, "field insertion"),
    ("ReplaceField", {"exclude": "x"}, "field replacement"),
    ("MaskField", {"fields": "x"}, "mask fields"),
    ("Cast", {"spec": "x:int8"}, "cast types"),
    ("Flatten", {}, "flattening"),
    ("ExtractField", {"field": "x"}, "field extraction"),
    ("TimestampConverter", {"field": "x", "target.type": "unix"}, "converting timestamp formats"),
    ("HeaderFrom", {"fields": "x", "headers": "h", "operation": "move"}, "header move"),
]


@TARGETS
@pytest.mark.parametrize(("transform", "config", "purpose"), WRONG_SHAPE,
                         ids=[w[0] for w in WRONG_SHAPE])
def test_a_primitive_payload_is_refused(make, transform, config, purpose, target):
    t = make(f"{transform}${target.capitalize()}", **config)
    with pytest.raises(DataError, match=f"Only Map objects supported .*\\[{purpose}\\]"):
        t.apply(record_with(target, None, "plain text"))
    with pytest.raises(DataError, match=f"Only Struct objects supported for \\[{purpose}\\]"):
        t.apply(record_with(target, STRING_SCHEMA, "plain text"))
