"""Cases ported from Kafka's FlattenTest, HoistFieldTest, ExtractFieldTest and ValueToKeyTest.

Each test names the Kafka test it follows; values are what Kafka's asserts expect.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pytest

from kctl.api.data import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
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
    decimal_schema,
    timestamp_schema,
)
from kctl.api.records import SinkRecord, SourceRecord
from kctl.errors import DataError


def source(schema: Schema | None, value: Any) -> SourceRecord:
    return SourceRecord("topic", 0, None, None, schema, value)


def source_key(schema: Schema | None, key: Any) -> SourceRecord:
    return SourceRecord("topic", 0, schema, key, None, None)


# --- Flatten ----------------------------------------------------------------------------------

SUPPORTED = (SchemaBuilder.struct()
             .field("int8", INT8_SCHEMA).field("int16", INT16_SCHEMA)
             .field("int32", INT32_SCHEMA).field("int64", INT64_SCHEMA)
             .field("float32", FLOAT32_SCHEMA).field("float64", FLOAT64_SCHEMA)
             .field("boolean", BOOLEAN_SCHEMA).field("string", STRING_SCHEMA)
             .field("bytes", BYTES_SCHEMA).build())
SUPPORTED_VALUES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "float32": 32.0,
                    "float64": 64.0, "boolean": True, "string": "stringy", "bytes": b"bytes"}


def test_flatten_top_level_struct_required(make):  # topLevelStructRequired / topLevelMapRequired
    with pytest.raises(DataError, match="Only Struct objects supported for \\[flattening\\]"):
        make("Flatten$Value").apply(source(INT32_SCHEMA, 42))
    with pytest.raises(DataError, match="Only Map objects supported"):
        make("Flatten$Value").apply(source(None, 42))


@pytest.mark.parametrize("variant", ["Key", "Value"])
def test_flatten_nested_struct(make, variant):  # testNestedStruct, on the key and the value
    one_level = SchemaBuilder.struct().field("B", SUPPORTED).build()
    two_level = SchemaBuilder.struct().field("A", one_level).build()
    value = Struct(two_level, {"A": Struct(one_level, {"B": Struct(SUPPORTED, SUPPORTED_VALUES)})})
    rec = source_key(two_level, value) if variant == "Key" else source(two_level, value)
    out = make(f"Flatten${variant}").apply(rec)
    schema, flat = (out.key_schema, out.key) if variant == "Key" else (out.value_schema, out.value)
    assert schema.type is Type.STRUCT and len(schema.fields) == 9
    for name, expected in SUPPORTED_VALUES.items():
        assert flat[f"A.B.{name}"] == expected
        assert schema.field(f"A.B.{name}").schema == SUPPORTED.field(name).schema
    flat.validate()


def test_flatten_nested_map_with_delimiter(make):  # testNestedMapWithDelimiter
    value = {"A": {"B": dict(SUPPORTED_VALUES)}}
    out = make("Flatten$Value", delimiter="#").apply(source(None, value))
    assert out.value_schema is None
    assert out.value == {f"A#B#{k}": v for k, v in SUPPORTED_VALUES.items()}


def test_flatten_optional_field_struct(make):  # testOptionalFieldStruct
    inner = SchemaBuilder.struct().field("opt_int32", OPTIONAL_INT32_SCHEMA).build()
    outer = SchemaBuilder.struct().field("B", inner).build()
    out = make("Flatten$Value").apply(source(outer, Struct(outer, {"B": Struct(inner)})))
    assert out.value_schema.type is Type.STRUCT
    assert out.value["B.opt_int32"] is None


def test_flatten_optional_struct_tombstone_passes_through(make):  # testOptionalStruct
    schema = SchemaBuilder.struct().optional().field("opt_int32", OPTIONAL_INT32_SCHEMA).build()
    rec = source(schema, None)
    out = make("Flatten$Value").apply(rec)
    assert out.value is None and out.value_schema is schema


def test_flatten_optional_nested_struct_that_is_null(make):  # testOptionalNestedStruct
    inner = SchemaBuilder.struct().optional().field("opt_int32", OPTIONAL_INT32_SCHEMA).build()
    outer = SchemaBuilder.struct().field("B", inner).build()
    out = make("Flatten$Value").apply(source(outer, Struct(outer, {"B": None})))
    assert out.value_schema.type is Type.STRUCT
    assert out.value["B.opt_int32"] is None
    out.value.validate()


def test_flatten_required_fields_of_a_null_optional_struct_become_optional(make):
    # The nested struct is optional, so its required fields must be optional once flattened,
    # or a record where that struct is null could not be represented.
    inner = (SchemaBuilder.struct().optional().field("req", STRING_SCHEMA)
             .field("num", INT64_SCHEMA).build())
    outer = SchemaBuilder.struct().field("id", INT32_SCHEMA).field("B", inner).build()
    out = make("Flatten$Value").apply(source(outer, Struct(outer, {"id": 1})))
    assert out.value_schema.field("B.req").schema == OPTIONAL_STRING_SCHEMA
    assert out.value_schema.field("B.num").schema == OPTIONAL_INT64_SCHEMA
    assert out.value_schema.field("id").schema == INT32_SCHEMA
    assert out.value.to_dict() == {"id": 1, "B.req": None, "B.num": None}
    out.value.validate()


def test_flatten_optional_field_map(make):  # testOptionalFieldMap
    out = make("Flatten$Value").apply(source(None, {"B": {"opt_int32": None}}))
    assert out.value == {"B.opt_int32": None}


def test_flatten_key_without_schema(make):  # testKey
    out = make("Flatten$Key").apply(SourceRecord("topic", None, None, {"A": {"B": 12}}, None, None))
    assert out.key_schema is None and out.key == {"A.B": 12}


def test_flatten_arrays_pass_through(make):  # testSchemalessArray / testArrayWithSchema
    plain = {"foo": [{"bar": "baz"}]}
    assert make("Flatten$Value").apply(source(None, plain)).value == plain

    nested = SchemaBuilder.struct().field("lfg", STRING_SCHEMA).build()
    inner = SchemaBuilder.struct().field("baz", nested).build()
    schema = SchemaBuilder.struct().field(
        "foo", SchemaBuilder.array(inner).doc("durk").build()).build()
    value = Struct(schema, {"foo": [Struct(inner, {"baz": Struct(nested, {"lfg": "lfg"})})]})
    out = make("Flatten$Value").apply(source(schema, value))
    assert out.value_schema == schema
    assert out.value == value


def test_flatten_optional_and_default_values_nested(make):  # testOptionalAndDefaultValuesNested
    # Kafka's test also gives the optional parent a Struct default; kctl's Schema cannot hold a
    # Struct default yet (its Struct would need the schema it belongs to), so only the field-level
    # default and the optionality inherited from the parent are checked here.
    child = (SchemaBuilder.struct().optional()
             .field("req_field", STRING_SCHEMA)
             .field("opt_field", Schema(Type.STRING, optional=True, default="child_default"))
             .build())
    schema = SchemaBuilder.struct().field("child", child).build()
    out = make("Flatten$Value").apply(source(schema, Struct(schema)))
    assert len(out.value_schema.fields) == 2
    assert out.value_schema.field("child.req_field").schema == OPTIONAL_STRING_SCHEMA
    assert out.value_schema.field("child.opt_field").schema == \
        Schema(Type.STRING, optional=True, default="child_default")
    assert out.value["child.opt_field"] == "child_default"


def test_flatten_tombstones_pass_through(make):  # tombstoneEventWith(out)SchemaShouldPassThrough
    schema = (SchemaBuilder.struct().name("name").version(1).doc("doc")
              .field("magic", OPTIONAL_INT64_SCHEMA).build())
    for s in (None, schema):
        out = make("Flatten$Value").apply(source(s, None))
        assert out.value is None and out.value_schema is s


def test_flatten_keeps_null_fields_and_their_order(make):  # testMapWithNullFields / ...Struct...
    names = ["firstNull", "firstNonNull", "secondNull", "secondNonNull", "thirdNonNull"]
    plain = dict(zip(names, [None, "nonNull", None, "alsoNonNull", None], strict=True))
    out = make("Flatten$Value").apply(source(None, dict(plain)))
    assert list(out.value.items()) == list(plain.items())

    b = SchemaBuilder.struct()
    for n in names:
        b.field(n, OPTIONAL_STRING_SCHEMA)
    schema = b.build()
    value = Struct(schema, plain)
    assert make("Flatten$Value").apply(source(schema, value)).value == value


def test_flatten_keeps_logical_types_names_and_docs_of_leaves(make):
    money = decimal_schema(2)
    inner = (SchemaBuilder.struct().field("at", timestamp_schema()).field("amount", money)
             .field("note", SchemaBuilder(Type.STRING).doc("free text").optional().build()).build())
    schema = SchemaBuilder.struct().name("shop.Payment").version(4).field("pay", inner).build()
    out = make("Flatten$Value").apply(source(schema, Struct(schema, {"pay": Struct(inner, {
        "at": dt.datetime(2024, 1, 1, tzinfo=dt.UTC), "amount": decimal.Decimal("9.99")})})))
    s = out.value_schema
    assert (s.name, s.version) == ("shop.Payment", 4)
    assert s.field("pay.at").schema == timestamp_schema()
    assert s.field("pay.amount").schema == money
    assert s.field("pay.note").schema.doc == "free text"
    out.value.validate()


def test_flatten_refuses_maps_with_schemas_and_unknown_values_without(make):
    schema = SchemaBuilder.struct().field(
        "m", SchemaBuilder.map(STRING_SCHEMA, INT32_SCHEMA).build()).build()
    with pytest.raises(DataError, match="does not support MAP for record with schemas"):
        make("Flatten$Value").apply(source(schema, Struct(schema, {"m": {}})))
    with pytest.raises(DataError, match="does not support object"):
        make("Flatten$Value").apply(source(None, {"a": {"b": object()}}))


# --- HoistField -------------------------------------------------------------------------------

def test_hoist_field_schemaless_key():  # HoistFieldTest.schemaless
    from kctl.transforms import HoistFieldKey

    t = HoistFieldKey()
    t.configure({"field": "magic"})
    out = t.apply(SinkRecord("test", 0, None, 42, None, None, None, kafka_offset=0))
    assert out.key_schema is None and out.key == {"magic": 42}


def test_hoist_field_with_schema_key(make):  # HoistFieldTest.withSchema
    rec = SinkRecord("test", 0, INT32_SCHEMA, 42, None, None, None, kafka_offset=0)
    out = make("HoistField$Key", field="magic").apply(rec)
    assert out.key_schema.type is Type.STRUCT
    assert out.key_schema.field("magic").schema is INT32_SCHEMA
    assert out.key["magic"] == 42


def test_hoist_field_of_a_struct_nests_it_with_its_schema(make):
    inner = SchemaBuilder.struct().name("Inner").field("a", INT32_SCHEMA).build()
    value = Struct(inner, {"a": 1})
    out = make("HoistField$Value", field="payload").apply(source(inner, value))
    assert out.value_schema == SchemaBuilder.struct().field("payload", inner).build()
    assert out.value["payload"] is value


def test_hoist_field_of_a_null_needs_an_optional_schema(make):
    with pytest.raises(DataError, match="null for a required string schema"):
        make("HoistField$Value", field="line").apply(source(STRING_SCHEMA, None))
    out = make("HoistField$Value", field="line").apply(source(OPTIONAL_STRING_SCHEMA, None))
    assert out.value.to_dict() == {"line": None}


# --- ExtractField -----------------------------------------------------------------------------

def test_extract_field_schemaless_and_with_schema_on_the_key(make):  # schemaless / withSchema
    t = make("ExtractField$Key", field="magic")
    out = t.apply(SinkRecord("test", 0, None, {"magic": 42}, None, None, None, kafka_offset=0))
    assert (out.key_schema, out.key) == (None, 42)
    schema = SchemaBuilder.struct().field("magic", INT32_SCHEMA).build()
    out = t.apply(SinkRecord("test", 0, schema, Struct(schema, {"magic": 42}), None, None, None,
                             kafka_offset=0))
    assert (out.key_schema, out.key) == (INT32_SCHEMA, 42)


def test_extract_field_of_null_keys(make):  # nullSchemaless / testNullWithSchema
    t = make("ExtractField$Key", field="magic")
    out = t.apply(SinkRecord("test", 0, None, None, None, None, None, kafka_offset=0))
    assert (out.key_schema, out.key) == (None, None)
    schema = SchemaBuilder.struct().optional().field("magic", INT32_SCHEMA).build()
    out = t.apply(SinkRecord("test", 0, schema, None, None, None, None, kafka_offset=0))
    assert (out.key_schema, out.key) == (INT32_SCHEMA, None)


def test_extract_field_that_does_not_exist(make):  # nonExistentField*
    t = make("ExtractField$Key", field="nonexistent")
    out = t.apply(SinkRecord("test", 0, None, {"magic": 42}, None, None, None, kafka_offset=0))
    assert out.key is None  # schemaless: a missing field is null
    schema = SchemaBuilder.struct().field("magic", INT32_SCHEMA).build()
    with pytest.raises(DataError, match="Unknown field: nonexistent"):
        t.apply(SinkRecord("test", 0, schema, Struct(schema, {"magic": 42}), None, None, None,
                           kafka_offset=0))


@pytest.mark.parametrize(("replace_null", "expected"), [(False, None), (True, 42)])
@pytest.mark.parametrize("variant", ["Key", "Value"])
def test_extract_field_of_an_unset_optional_field(make, variant, replace_null, expected):
    # testUnsetOptionalKey / testUnsetOptionalField
    schema = SchemaBuilder.struct().field(
        "optional_with_default", Schema(Type.INT32, optional=True, default=42)).build()
    payload = Struct(schema)
    rec = source_key(schema, payload) if variant == "Key" else source(schema, payload)
    out = make(f"ExtractField${variant}", field="optional_with_default",
               **{"replace.null.with.default": str(replace_null).lower()}).apply(rec)
    assert (out.key if variant == "Key" else out.value) == expected


# --- ValueToKey -------------------------------------------------------------------------------

def test_value_to_key_schemaless():  # ValueToKeyTest.schemaless
    from kctl.transforms import ValueToKey

    t = ValueToKey()
    t.configure({"fields": "a,b"})
    value = {"a": 1, "b": 2, "c": 3}
    out = t.apply(SinkRecord("", 0, None, None, None, value, None, kafka_offset=0))
    assert (out.key_schema, out.key) == (None, {"a": 1, "b": 2})
    assert out.value is value


def test_value_to_key_with_schema(make):  # ValueToKeyTest.withSchema
    schema = (SchemaBuilder.struct().field("a", INT32_SCHEMA).field("b", INT32_SCHEMA)
              .field("c", INT32_SCHEMA).build())
    value = Struct(schema, {"a": 1, "b": 2, "c": 3})
    out = make("ValueToKey", fields="a,b").apply(
        SinkRecord("", 0, None, None, schema, value, None, kafka_offset=0))
    expected_schema = SchemaBuilder.struct().field("a", INT32_SCHEMA).field("b", INT32_SCHEMA) \
        .build()
    assert out.key_schema == expected_schema
    assert out.key == Struct(expected_schema, {"a": 1, "b": 2})
    assert out.value is value and out.value_schema is schema


def test_value_to_key_non_existing_field(make):  # ValueToKeyTest.nonExistingField
    schema = SchemaBuilder.struct().field("a", INT32_SCHEMA).build()
    with pytest.raises(DataError, match=r"^Field does not exist: not_exist$"):
        make("ValueToKey", fields="not_exist").apply(
            SinkRecord("", 0, None, None, schema, Struct(schema, {"a": 1}), None, kafka_offset=0))


@pytest.mark.parametrize(("replace_null", "expected"), [(False, None), (True, 42)])
def test_value_to_key_replace_null_with_default(make, replace_null, expected):
    # ValueToKeyTest.testReplaceNullWithDefaultConfig
    schema = (SchemaBuilder.struct().field("a", INT32_SCHEMA)
              .field("optional_with_default", Schema(Type.INT32, optional=True, default=42))
              .build())
    out = make("ValueToKey", fields="optional_with_default",
               **{"replace.null.with.default": str(replace_null).lower()}).apply(
        SinkRecord("", 0, None, None, schema, Struct(schema, {"a": 1}), None, kafka_offset=0))
    assert out.key.get_without_default("optional_with_default") == expected
    assert out.key_schema.field("optional_with_default").schema.default == 42


def test_value_to_key_needs_a_map_or_struct_value(make):
    with pytest.raises(DataError, match="Only Map objects supported"):
        make("ValueToKey", fields="a").apply(source(None, None))
    with pytest.raises(DataError, match="Only Struct objects supported"):
        make("ValueToKey", fields="a").apply(source(SchemaBuilder.struct().optional().field(
            "a", INT32_SCHEMA).build(), None))
