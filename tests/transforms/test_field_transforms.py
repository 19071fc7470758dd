"""Field SMTs on records with schemas (Structs) and without (dicts), as Kafka's behave."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from kctl.api.data import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT64_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaBuilder,
    Struct,
    Type,
    timestamp_schema,
)
from kctl.errors import ConfigError, DataError, ValidationError

UTC = dt.UTC
PERSON = (SchemaBuilder.struct().name("Person").field("id", INT32_SCHEMA)
          .field("name", STRING_SCHEMA).field("ssn", OPTIONAL_STRING_SCHEMA)
          .field("age", OPTIONAL_INT32_SCHEMA).build())


def person(**kw) -> Struct:
    values = {"id": 1, "name": "Ann", "ssn": "123-45", "age": 41}
    values.update(kw)
    return Struct(PERSON, values)


# --- InsertField ------------------------------------------------------------------------------

def test_insert_field_adds_topic_partition_offset_and_timestamp_to_a_sink_struct(make, sink):
    t = make("InsertField$Value", topic_field="topic!", partition_field="part",
             offset_field="off", timestamp_field="ts", static_field="src", static_value="crm")
    out = t.apply(sink(person(), PERSON, timestamp=1_000))
    assert [f.name for f in out.value_schema.fields][-5:] == ["topic", "part", "off", "ts", "src"]
    assert out.value_schema.field("topic").schema.optional is False
    assert out.value_schema.field("part").schema.optional is True
    assert out.value_schema.field("ts").schema == timestamp_schema(True)
    assert out.value["topic"] == "orders" and out.value["part"] == 3 and out.value["off"] == 7
    assert out.value["ts"] == dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert out.value["src"] == "crm" and out.value["name"] == "Ann"
    assert out.value_schema.name == "Person"


def test_insert_field_on_a_schemaless_source_record_and_its_limits(make, source):
    t = make("InsertField$Value", topic_field="topic", timestamp_field="ts")
    out = t.apply(source({"a": 1}, timestamp=5))
    assert out.value == {"a": 1, "topic": "orders", "ts": 5}
    assert out.source_offset == {"line": 1}  # a SourceRecord stays a SourceRecord
    assert t.apply(source(None)).value is None  # tombstones pass untouched
    with pytest.raises(DataError, match="SinkRecord"):
        make("InsertField$Value", offset_field="off").apply(source({"a": 1}))
    with pytest.raises(DataError, match="Only Map objects supported"):
        t.apply(source("just text"))


def test_insert_field_on_the_key(make, source):
    out = make("InsertField$Key", static_field="k", static_value="v").apply(source(key={"id": 1}))
    assert out.key == {"id": 1, "k": "v"}


def test_insert_field_needs_something_to_insert(make):
    with pytest.raises(ConfigError, match="No field insertion configured"):
        make("InsertField$Value")
    with pytest.raises(ConfigError, match="No value specified for static field"):
        make("InsertField$Value", static_field="x")


# --- ReplaceField -----------------------------------------------------------------------------

def test_replace_field_excludes_includes_and_renames_with_schema(make, source):
    t = make("ReplaceField$Value", include="id,name,ssn", exclude="ssn", renames="name:full_name")
    out = t.apply(source(person(), PERSON))
    assert [f.name for f in out.value_schema.fields] == ["id", "full_name"]
    assert out.value.to_dict() == {"id": 1, "full_name": "Ann"}
    again = t.apply(source(person(id=2), PERSON))
    assert again.value_schema is out.value_schema  # derived schemas are cached


def test_replace_field_without_schema(make, source):
    t = make("ReplaceField$Value", exclude="ssn", renames="id:person_id")
    assert t.apply(source({"id": 1, "ssn": "x", "n": 2})).value == {"person_id": 1, "n": 2}


def test_replace_field_rejects_bad_rename_mappings(make):
    with pytest.raises(ValidationError) as e:
        make("ReplaceField$Value", renames="a:b:c")
    assert "renames" in e.value.errors


# --- MaskField --------------------------------------------------------------------------------

def test_mask_field_blanks_values_to_their_types_empty_value(make, source):
    out = make("MaskField$Value", fields="ssn,age").apply(source(person(), PERSON))
    assert out.value["ssn"] == "" and out.value["age"] == 0 and out.value["name"] == "Ann"
    schemaless = make("MaskField$Value", fields="ssn,tags,when,price").apply(source(
        {"ssn": "1", "tags": ["a"], "when": dt.datetime(2020, 1, 1, tzinfo=UTC),
         "price": decimal.Decimal("9.99"), "keep": True}))
    assert schemaless.value == {"ssn": "", "tags": [], "when": dt.datetime(1970, 1, 1, tzinfo=UTC),
                                "price": decimal.Decimal(0), "keep": True}


def test_mask_field_with_a_replacement_converts_it_to_the_fields_type(make, source):
    out = make("MaskField$Value", fields="ssn,age", replacement="999").apply(source(person(), PERSON))
    assert out.value["ssn"] == "999" and out.value["age"] == 999
    with pytest.raises(DataError, match="Unable to convert"):
        make("MaskField$Value", fields="age", replacement="***").apply(source(person(), PERSON))
    with pytest.raises(DataError, match="Cannot mask value of type bool"):
        make("MaskField$Value", fields="ok", replacement="x").apply(source({"ok": True}))


def test_mask_field_leaves_nulls_null(make, source):
    out = make("MaskField$Value", fields="ssn").apply(source(person(ssn=None), PERSON))
    assert out.value["ssn"] is None


# --- Cast -------------------------------------------------------------------------------------

def test_cast_fields_with_schema_changes_field_schemas(make, source):
    t = make("Cast$Value", spec="id:string,age:float64,name:string")
    out = t.apply(source(person(), PERSON))
    assert out.value_schema.field("id").schema == STRING_SCHEMA
    assert out.value_schema.field("age").schema == Schema(Type.FLOAT64, optional=True)
    assert out.value["id"] == "1" and out.value["age"] == 41.0


def test_cast_without_schema_and_of_the_whole_value(make, source):
    t = make("Cast$Value", spec="n:int8,flag:boolean,f:int32,s:float64,b:string")
    out = t.apply(source({"n": 300, "flag": "TRUE", "f": 3.9, "s": "2.5", "b": b"\x01"}))
    assert out.value == {"n": 44, "flag": True, "f": 3, "s": 2.5, "b": "AQ=="}  # Java narrowing
    whole = make("Cast$Key", spec="int64").apply(source(key="42", key_schema=STRING_SCHEMA))
    assert whole.key == 42 and whole.key_schema == INT64_SCHEMA


def test_cast_errors(make, source):
    with pytest.raises(DataError, match="out of range"):
        make("Cast$Value", spec="int8").apply(source("1000", STRING_SCHEMA))
    with pytest.raises(DataError, match="does not support casting from ARRAY"):
        make("Cast$Value", spec="int32").apply(source([1], SchemaBuilder.array(INT32_SCHEMA).build()))
    with pytest.raises(ValidationError) as e:
        make("Cast$Value", spec="a:bytes")
    assert "does not support casting to BYTES" in e.value.errors["spec"][0]
    with pytest.raises(ValidationError):
        make("Cast$Value", spec="int8,a:int16")


def test_cast_timestamps_to_numbers_and_strings(make, source):
    schema = SchemaBuilder.struct().field("at", timestamp_schema()).field("b", BYTES_SCHEMA).build()
    value = Struct(schema, {"at": dt.datetime(1970, 1, 1, 0, 0, 2, tzinfo=UTC), "b": b"hi"})
    out = make("Cast$Value", spec="at:int64,b:string").apply(source(value, schema))
    assert out.value["at"] == 2000 and out.value["b"] == "aGk="
    as_text = make("Cast$Value", spec="at:string").apply(source(value, schema))
    assert as_text.value["at"] == "1970-01-01T00:00:02.000Z"


# --- ValueToKey, ExtractField, HoistField -----------------------------------------------------

def test_value_to_key_builds_a_key_struct_from_value_fields(make, source):
    out = make("ValueToKey", fields="id,name").apply(source(person(), PERSON))
    assert [f.name for f in out.key_schema.fields] == ["id", "name"]
    assert out.key.to_dict() == {"id": 1, "name": "Ann"}
    assert make("ValueToKey", fields="a").apply(source({"a": 1, "b": 2})).key == {"a": 1}
    with pytest.raises(DataError, match="Field does not exist: nope"):
        make("ValueToKey", fields="nope").apply(source(person(), PERSON))


def test_extract_field_pulls_one_field_up(make, source):
    out = make("ExtractField$Value", field="name").apply(source(person(), PERSON))
    assert out.value == "Ann" and out.value_schema == STRING_SCHEMA
    assert make("ExtractField$Key", field="id").apply(source(key={"id": 5})).key == 5
    assert make("ExtractField$Value", field="x").apply(source(None)).value is None
    with pytest.raises(DataError, match="Unknown field: nope"):
        make("ExtractField$Value", field="nope").apply(source(person(), PERSON))


def test_hoist_field_wraps_a_value_in_a_single_field(make, source):
    out = make("HoistField$Value", field="line").apply(source("hello", STRING_SCHEMA))
    assert out.value_schema.field("line").schema == STRING_SCHEMA
    assert out.value["line"] == "hello"
    assert make("HoistField$Value", field="line").apply(source("hi")).value == {"line": "hi"}


# --- Flatten ----------------------------------------------------------------------------------

def test_flatten_nested_structs_with_a_delimiter(make, source):
    geo = SchemaBuilder.struct().field("lat", FLOAT64_SCHEMA).field("lon", FLOAT64_SCHEMA).build()
    addr = (SchemaBuilder.struct().optional().field("city", STRING_SCHEMA).field("geo", geo).build())
    schema = SchemaBuilder.struct().field("id", INT32_SCHEMA).field("addr", addr) \
        .field("ok", BOOLEAN_SCHEMA).build()
    value = Struct(schema, {"id": 1, "ok": True, "addr": Struct(addr, {
        "city": "Oslo", "geo": Struct(geo, {"lat": 59.9, "lon": 10.7})})})
    out = make("Flatten$Value", delimiter="_").apply(source(value, schema))
    assert [f.name for f in out.value_schema.fields] == ["id", "addr_city", "addr_geo_lat",
                                                         "addr_geo_lon", "ok"]
    assert out.value_schema.field("addr_city").schema.optional  # parent was optional
    assert out.value.to_dict() == {"id": 1, "addr_city": "Oslo", "addr_geo_lat": 59.9,
                                   "addr_geo_lon": 10.7, "ok": True}
    empty = make("Flatten$Value").apply(source(Struct(schema, {"id": 2, "ok": False}), schema))
    assert empty.value["addr.city"] is None


def test_flatten_schemaless_maps_keeps_arrays(make, source):
    out = make("Flatten$Value").apply(source({"a": {"b": {"c": 1}, "d": [1, {"x": 2}]}, "e": None}))
    assert out.value == {"a.b.c": 1, "a.d": [1, {"x": 2}], "e": None}
    with pytest.raises(DataError, match="does not support MAP"):
        schema = SchemaBuilder.struct().field(
            "m", SchemaBuilder.map(STRING_SCHEMA, INT32_SCHEMA).build()).build()
        make("Flatten$Value").apply(source(Struct(schema, {"m": {}}), schema))
