"""Cases ported from Kafka's CastTest, MaskFieldTest, ReplaceFieldTest, InsertFieldTest and
HeaderFromTest, with schemas and without, on keys and values.

Each test names the Kafka test it follows; values are what Kafka's asserts expect, written
with Python's types (Java's byte/short/int/long are all `int`, float/double are `float`).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
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
    OPTIONAL_FLOAT32_SCHEMA,
    OPTIONAL_INT16_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
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
from kctl.api.records import Headers, SinkRecord, SourceRecord
from kctl.errors import ConfigError, DataError, ValidationError
from kctl.runtime.converters import JsonConverter

UTC = dt.UTC
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
DAY = dt.date(1970, 1, 2)  # Kafka's `new Date(MILLIS_PER_DAY)` as a Connect Date


def source(schema: Schema | None, value: Any, key_schema: Schema | None = None,
           key: Any = None, topic: str = "topic", timestamp: int | None = None) -> SourceRecord:
    return SourceRecord(topic, 0, key_schema, key, schema, value, timestamp)


def payload(rec: Any, variant: str) -> tuple[Schema | None, Any]:
    return (rec.key_schema, rec.key) if variant == "Key" else (rec.value_schema, rec.value)


def on(variant: str, schema: Schema | None, value: Any) -> SourceRecord:
    """The payload on the key (with a string value beside it) or on the value."""
    if variant == "Key":
        return source(STRING_SCHEMA, "bogus", key_schema=schema, key=value)
    return source(schema, value, key_schema=STRING_SCHEMA, key="key")


VARIANTS = pytest.mark.parametrize("variant", ["Key", "Value"])
NULL_DEFAULT = pytest.mark.parametrize(("replace_null", "expected"), [(False, None), (True, 42)])


# --- Cast -------------------------------------------------------------------------------------

@VARIANTS
@pytest.mark.parametrize(("spec", "value", "schema_out", "expected"), [
    ("int8", 42, INT8_SCHEMA, 42),
    ("int16", 42, INT16_SCHEMA, 42),
    ("int32", 42, INT32_SCHEMA, 42),
    ("int64", 42, INT64_SCHEMA, 42),
    ("float32", 42, FLOAT32_SCHEMA, 42.0),
    ("float64", 42, FLOAT64_SCHEMA, 42.0),
    ("boolean", 42, BOOLEAN_SCHEMA, True),
    ("boolean", 0, BOOLEAN_SCHEMA, False),
    ("string", 42, STRING_SCHEMA, "42"),
])
def test_cast_whole_record_with_schema(make, variant, spec, value, schema_out, expected):
    # castWholeRecordKeyWithSchema, castWholeRecordValueWithSchema{Int8,...,String}
    out = make(f"Cast${variant}", spec=spec).apply(on(variant, INT32_SCHEMA, value))
    schema, cast = payload(out, variant)
    assert schema == schema_out
    assert cast == expected and type(cast) is type(expected)


@VARIANTS
@pytest.mark.parametrize(("spec", "value", "expected"), [
    ("int8", 42, 42), ("int16", 42, 42), ("int32", 42, 42), ("int64", 42, 42),
    ("float32", 42, 42.0), ("float64", 42, 42.0), ("boolean", 42, True), ("boolean", 0, False),
    ("string", 42, "42"),
])
def test_cast_whole_record_schemaless(make, variant, spec, value, expected):
    # castWholeRecordKeySchemaless, castWholeRecordValueSchemaless{Int8,...,String}
    out = make(f"Cast${variant}", spec=spec).apply(on(variant, None, value))
    schema, cast = payload(out, variant)
    assert schema is None
    assert cast == expected and type(cast) is type(expected)


def test_cast_whole_record_schemaless_unsupported_type(make):
    with pytest.raises(DataError, match="does not support casting from ARRAY"):
        make("Cast$Value", spec="int8").apply(source(None, ["foo"]))


def test_cast_whole_big_decimal_and_timestamp_to_string(make):
    # castWholeBigDecimalRecordValueWithSchemaString / castWholeDateRecordValueWithSchemaString
    out = make("Cast$Value", spec="string").apply(source(decimal_schema(0), decimal.Decimal(42)))
    assert (out.value_schema.type, out.value) == (Type.STRING, "42")
    ts = dt.datetime(1970, 1, 2, 0, 0, 0, 1000, tzinfo=UTC)  # a day and a millisecond
    out = make("Cast$Value", spec="string").apply(source(timestamp_schema(), ts))
    assert (out.value_schema.type, out.value) == (Type.STRING, "1970-01-02T00:00:00.001Z")


@pytest.mark.parametrize(("schema", "value", "spec", "schema_out", "expected"), [
    (timestamp_schema(), dt.datetime(2024, 1, 1, tzinfo=UTC), "int64", INT64_SCHEMA, 1704067200000),
    (timestamp_schema(True), EPOCH, "string", OPTIONAL_STRING_SCHEMA, "1970-01-01T00:00:00.000Z"),
    (date_schema(), DAY, "int32", INT32_SCHEMA, 1),
    (time_schema(), dt.time(0, 0, 0, 1000), "int64", INT64_SCHEMA, 1),
    (decimal_schema(2), decimal.Decimal("9.99"), "string", STRING_SCHEMA, "9.99"),
    (decimal_schema(2), decimal.Decimal("9.99"), "float64", FLOAT64_SCHEMA, 9.99),
])
def test_cast_whole_logical_value_drops_the_logical_type(make, schema, value, spec, schema_out,
                                                         expected):
    # A cast value is no longer a Timestamp/Date/Time/Decimal: keeping the logical name on the
    # new schema would make every converter reject the record (a Timestamp that holds an int).
    out = make("Cast$Value", spec=spec).apply(source(schema, value))
    assert out.value_schema == schema_out
    assert out.value == expected
    converter = JsonConverter()
    converter.configure({"schemas.enable": True}, False)
    envelope = json.loads(converter.from_connect_data("topic", out.value_schema, out.value))
    assert envelope["payload"] == expected and "name" not in envelope["schema"]


def test_cast_whole_value_keeps_a_non_logical_schema_name_and_doc(make):
    code = SchemaBuilder(Type.STRING).name("shop.Code").version(2).doc("a numeric code").build()
    out = make("Cast$Value", spec="int64").apply(source(code, "0042"))
    assert out.value_schema == Schema(Type.INT64, name="shop.Code", version=2, doc="a numeric code")
    assert out.value == 42


def test_cast_whole_record_default_value(make):  # castWholeRecordDefaultValue
    schema = Schema(Type.FLOAT32, default=-42.125)
    out = make("Cast$Value", spec="int32").apply(source(schema, 42.125))
    assert out.value_schema.type is Type.INT32
    assert out.value == 42 and out.value_schema.default == -42


def test_cast_logical_to_primitive(make):  # castLogicalToPrimitive
    spec = ("date_to_int32:int32,timestamp_to_int64:int64,time_to_int64:int64,"
            "decimal_to_int32:int32,null_timestamp_to_int32:int32")
    schema = (SchemaBuilder.struct()
              .field("date_to_int32", date_schema())
              .field("timestamp_to_int64", timestamp_schema())
              .field("time_to_int64", time_schema())
              .field("decimal_to_int32", decimal_schema(0))
              .field("null_timestamp_to_int32", timestamp_schema(True))
              .build())
    value = Struct(schema, {"date_to_int32": DAY, "timestamp_to_int64": EPOCH,
                            "time_to_int64": dt.time(0, 0, 0, 1000),
                            "decimal_to_int32": decimal.Decimal(2**31)})
    out = make("Cast$Value", spec=spec).apply(source(schema, value))
    assert out.value.to_dict() == {"date_to_int32": 1, "timestamp_to_int64": 0,
                                   "time_to_int64": 1, "decimal_to_int32": -(2**31),
                                   "null_timestamp_to_int32": None}
    assert [f.schema for f in out.value_schema.fields] == [
        INT32_SCHEMA, INT64_SCHEMA, INT64_SCHEMA, INT32_SCHEMA, OPTIONAL_INT32_SCHEMA]
    out.value.validate()


def test_cast_logical_to_string(make):  # castLogicalToString
    schema = (SchemaBuilder.struct().field("date", date_schema())
              .field("decimal", decimal_schema(0)).field("time", time_schema())
              .field("timestamp", timestamp_schema()).build())
    value = Struct(schema, {"date": DAY, "decimal": decimal.Decimal(1982), "time": dt.time(1),
                            "timestamp": dt.datetime(2024, 3, 5, 14, 7, 9, 123000, tzinfo=UTC)})
    out = make("Cast$Value", spec="date:string,decimal:string,time:string,timestamp:string") \
        .apply(source(schema, value))
    assert out.value.to_dict() == {"date": "1970-01-02", "decimal": "1982",
                                   "time": "01:00:00.000Z", "timestamp": "2024-03-05T14:07:09.123Z"}
    assert all(f.schema == STRING_SCHEMA for f in out.value_schema.fields)


@VARIANTS
def test_cast_fields_with_schema(make, variant):  # castFieldsWithSchema, on the key and the value
    spec = ("int8:int16,int16:int32,int32:int64,int64:boolean,float32:float64,float64:boolean,"
            "boolean:int8,string:int32,bigdecimal:string,date:string,optional:int32,bytes:string")
    schema = (SchemaBuilder.struct()
              .field("int8", INT8_SCHEMA)
              .field("int16", OPTIONAL_INT16_SCHEMA)
              .field("int32", Schema(Type.INT32, default=2))
              .field("int64", INT64_SCHEMA)
              .field("float32", FLOAT32_SCHEMA)
              .field("float64", Schema(Type.FLOAT64, default=-1.125))
              .field("boolean", BOOLEAN_SCHEMA)
              .field("string", STRING_SCHEMA)
              .field("bigdecimal", decimal_schema(0))
              .field("date", date_schema())
              .field("optional", OPTIONAL_FLOAT32_SCHEMA)
              .field("timestamp", timestamp_schema())
              .field("bytes", BYTES_SCHEMA)
              .build())
    value = Struct(schema, {
        "int8": 8, "int16": 16, "int32": 32, "int64": 64, "float32": 32.0, "float64": -64.0,
        "boolean": True, "string": "42", "bigdecimal": decimal.Decimal(42), "date": DAY,
        "timestamp": EPOCH, "bytes": bytes([0xFE, 0xDC, 0xBA, 0x98, 0x76, 0x54, 0x32, 0x10]),
    })  # "optional" intentionally left out
    out = make(f"Cast${variant}", spec=spec).apply(on(variant, schema, value))
    s, v = payload(out, variant)
    assert v.to_dict() == {
        "int8": 8, "int16": 16, "int32": 32, "int64": True, "float32": 32.0,
        "float64": True, "boolean": 1, "string": 42, "bigdecimal": "42", "date": "1970-01-02",
        "optional": None, "timestamp": EPOCH, "bytes": "/ty6mHZUMhA=",
    }
    assert [(f.name, f.schema) for f in s.fields] == [
        ("int8", INT16_SCHEMA),
        ("int16", OPTIONAL_INT32_SCHEMA),
        ("int32", Schema(Type.INT64, default=2)),
        ("int64", BOOLEAN_SCHEMA),
        ("float32", FLOAT64_SCHEMA),
        ("float64", Schema(Type.BOOLEAN, default=True)),
        ("boolean", INT8_SCHEMA),
        ("string", INT32_SCHEMA),
        ("bigdecimal", STRING_SCHEMA),
        ("date", STRING_SCHEMA),
        ("optional", OPTIONAL_INT32_SCHEMA),
        ("timestamp", timestamp_schema()),  # not in the spec: unchanged
        ("bytes", STRING_SCHEMA),
    ]
    v.validate()


def test_cast_fields_schemaless(make):  # castFieldsSchemaless
    spec = ("int8:int16,int16:int32,int32:int64,int64:boolean,float32:float64,float64:boolean,"
            "boolean:int8,string:int32")
    value = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "float32": 32.0,
             "float64": -64.0, "boolean": True, "string": "42"}
    out = make("Cast$Value", spec=spec).apply(source(None, value))
    assert out.value_schema is None
    assert out.value == {"int8": 8, "int16": 16, "int32": 32, "int64": True, "float32": 32.0,
                         "float64": True, "boolean": 1, "string": 42}


@pytest.mark.parametrize(("replace_null", "expected"), [(False, None), (True, "10")])
def test_cast_field_with_default_value(make, replace_null, expected):
    # castFieldWithDefaultValueRecordWithSchema
    schema = SchemaBuilder.struct().field("magic", Schema(Type.INT32, optional=True, default=10)) \
        .build()
    out = make("Cast$Value", spec="magic:string",
               **{"replace.null.with.default": str(replace_null).lower()}).apply(
        source(schema, Struct(schema), key_schema=STRING_SCHEMA, key="key"))
    assert out.value_schema.field("magic").schema == \
        Schema(Type.STRING, optional=True, default="10")
    assert out.value.get_without_default("magic") == expected


@pytest.mark.parametrize(("variant", "key_schema", "key", "value_schema", "value"), [
    ("Value", STRING_SCHEMA, "key", STRING_SCHEMA, None),  # castNullValueRecordWithSchema
    ("Value", STRING_SCHEMA, "key", None, None),  # castNullValueRecordSchemaless
    ("Key", STRING_SCHEMA, None, STRING_SCHEMA, "value"),  # castNullKeyRecordWithSchema
    ("Key", None, None, STRING_SCHEMA, "value"),  # castNullKeyRecordSchemaless
])
def test_cast_of_a_null_leaves_the_record_as_is(make, variant, key_schema, key, value_schema,
                                                 value):
    rec = source(value_schema, value, key_schema=key_schema, key=key)
    assert make(f"Cast${variant}", spec="foo:int64").apply(rec) is rec


def test_cast_of_a_float_field_that_holds_an_int(make):
    # kctl's FLOAT32/FLOAT64 schemas accept Python ints (5 for 5.0); cast to string they read as
    # the float they are, as they would had the record come through the JsonConverter.
    schema = SchemaBuilder.struct().field("price", FLOAT64_SCHEMA).field("w", FLOAT32_SCHEMA) \
        .build()
    out = make("Cast$Value", spec="price:string,w:string").apply(
        source(schema, Struct(schema, {"price": 5, "w": 2})))
    assert out.value.to_dict() == {"price": "5.0", "w": "2.0"}
    assert make("Cast$Key", spec="string").apply(
        source(None, None, key_schema=FLOAT64_SCHEMA, key=5)).key == "5.0"
    assert make("Cast$Value", spec="int8").apply(source(FLOAT64_SCHEMA, 300)).value == 44


def test_cast_config_errors():  # testConfigEmpty, ...InvalidSchemaType, ...InvalidTargetType,
    from kctl.transforms import CastValue  # ...UnsupportedTargetType, ...InvalidMap, ...Mix...

    for spec, message in (("", "Must specify at least one field to cast."),
                          ("foo:faketype", "Invalid type found in casting spec: faketype"),
                          ("foo:array", "does not support casting to ARRAY"),
                          ("foo:bytes", "does not support casting to BYTES"),
                          ("foo:int8:extra", "Invalid cast mapping: foo:int8:extra"),
                          ("foo:int8,int32", "may only specify a single cast")):
        with pytest.raises(ValidationError) as e:
            CastValue().configure({"spec": spec})
        assert message in e.value.errors["spec"][0], spec


# --- MaskField --------------------------------------------------------------------------------

MASK_SCHEMA = (SchemaBuilder.struct()
               .field("magic", INT32_SCHEMA)
               .field("bool", BOOLEAN_SCHEMA)
               .field("byte", INT8_SCHEMA)
               .field("short", INT16_SCHEMA)
               .field("int", INT32_SCHEMA)
               .field("long", INT64_SCHEMA)
               .field("float", FLOAT32_SCHEMA)
               .field("double", FLOAT64_SCHEMA)
               .field("string", STRING_SCHEMA)
               .field("date", date_schema())
               .field("time", time_schema())
               .field("timestamp", timestamp_schema())
               .field("decimal", decimal_schema(0))
               .field("array", SchemaBuilder.array(INT32_SCHEMA).build())
               .field("map", SchemaBuilder.map(STRING_SCHEMA, STRING_SCHEMA).build())
               .field("withDefault", Schema(Type.STRING, optional=True, default="default"))
               .build())


def mask_struct() -> Struct:
    now = dt.datetime.now(UTC)
    return Struct(MASK_SCHEMA, {
        "magic": 42, "bool": True, "byte": 42, "short": 42, "int": 42, "long": 42, "float": 42.0,
        "double": 42.0, "string": "hmm", "date": now.date(), "time": now.time(),
        "timestamp": now, "decimal": decimal.Decimal(42), "array": [1, 2, 3],
        "map": {"what": "what"}, "withDefault": None})


def mask_map() -> dict[str, Any]:
    return {"magic": 42, "bool": True, "int": 42, "float": 42.0, "string": "55.121.20.20",
            "date": dt.datetime.now(UTC), "bigdec": decimal.Decimal("42.0"), "list": [42],
            "map": {"key": "value"}}


def mask(make, fields: list[str], replacement: str | None = None, variant: str = "Value",
         replace_null: bool = False) -> Any:
    props: dict[str, Any] = {"fields": ",".join(fields),
                             "replace.null.with.default": str(replace_null).lower()}
    if replacement is not None:
        props["replacement"] = replacement
    return make(f"MaskField${variant}", **props)


@VARIANTS
def test_mask_field_schemaless(make, variant):  # MaskFieldTest.testSchemaless
    value = mask_map()
    out = mask(make, [k for k in value if k != "magic"], variant=variant).apply(
        on(variant, None, value))
    assert payload(out, variant) == (None, {
        "magic": 42, "bool": False, "int": 0, "float": 0.0, "string": "", "date": EPOCH,
        "bigdec": decimal.Decimal(0), "list": [], "map": {}})
    assert value["string"] == "55.121.20.20"  # the input map is not changed


@VARIANTS
def test_mask_field_with_schema(make, variant):  # MaskFieldTest.testWithSchema
    value = mask_struct()
    fields = [f.name for f in MASK_SCHEMA.fields if f.name != "magic"]
    out = mask(make, fields, variant=variant).apply(on(variant, MASK_SCHEMA, value))
    schema, masked = payload(out, variant)
    assert schema is MASK_SCHEMA
    assert masked.to_dict() == {
        "magic": 42, "bool": False, "byte": 0, "short": 0, "int": 0, "long": 0, "float": 0.0,
        "double": 0.0, "string": "", "date": dt.date(1970, 1, 1), "time": dt.time(0),
        "timestamp": EPOCH, "decimal": decimal.Decimal(0), "array": [], "map": {},
        "withDefault": "default"}  # to_dict reads through the default...
    assert masked.get_without_default("withDefault") is None  # ...the field itself stays null
    masked.validate()


def test_mask_field_masks_a_null_fields_default_when_replacing_nulls(make):
    out = mask(make, ["withDefault"], replace_null=True).apply(source(MASK_SCHEMA, mask_struct()))
    assert out.value.get_without_default("withDefault") == ""


@pytest.mark.parametrize(("field", "replacement", "expected"), [
    ("short", "123", 123), ("byte", "123", 123), ("int", "123", 123), ("long", "123", 123),
    ("float", "123.0", 123.0), ("double", "123.0", 123.0), ("string", "123", "123"),
    ("decimal", "123.0", decimal.Decimal("123.0")),
])
def test_mask_field_with_schema_and_replacement(make, field, replacement, expected):
    # MaskFieldTest.testWithSchemaAndReplacement
    out = mask(make, [field], replacement).apply(source(MASK_SCHEMA, mask_struct()))
    assert out.value[field] == expected and type(out.value[field]) is type(expected)
    out.value.validate()


@pytest.mark.parametrize(("field", "replacement", "expected"), [
    ("int", "123", 123), ("float", "123.0", 123.0), ("string", "123", "123"),
    ("bigdec", "123.0", decimal.Decimal("123.0")),
])
def test_mask_field_schemaless_with_replacement(make, field, replacement, expected):
    # MaskFieldTest.testSchemalessWithReplacement
    out = mask(make, [field], replacement).apply(source(None, mask_map()))
    assert out.value[field] == expected and type(out.value[field]) is type(expected)


@pytest.mark.parametrize(("schema", "field"), [
    (MASK_SCHEMA, "time"), (MASK_SCHEMA, "timestamp"), (MASK_SCHEMA, "array"),
    (MASK_SCHEMA, "bool"), (None, "date"), (None, "bool"), (None, "list"), (None, "map"),
])
def test_mask_field_unsupported_replacement_type(make, schema, field):
    # MaskFieldTest.testWithSchemaUnsupportedReplacementType / testSchemalessUnsupported...
    value = mask_struct() if schema else mask_map()
    with pytest.raises(DataError, match="Cannot mask value of type"):
        mask(make, [field], "123").apply(source(schema, value))


@pytest.mark.parametrize("field", ["int", "float", "bigdec"])
def test_mask_field_replacement_type_mismatch(make, field):  # testReplacementTypeMismatch
    with pytest.raises(DataError, match="Unable to convert foo"):
        mask(make, [field], "foo").apply(source(None, mask_map()))
    with pytest.raises(DataError, match="Unable to convert foo"):
        mask(make, ["string", "int"], "foo").apply(source(None, mask_map()))


def test_mask_field_empty_replacement_is_a_config_error(make):  # testEmptyStringReplacementValue
    with pytest.raises(ValidationError) as e:
        mask(make, ["short"], "")
    assert "String must be non-empty" in e.value.errors["replacement"][0]


def test_mask_field_null_list_and_map_replacements_are_fresh(make):
    # testNullListAndMapReplacementsAreMutable: each record gets its own empty list and map
    t = mask(make, ["array", "map"])
    first = t.apply(source(MASK_SCHEMA, mask_struct())).value
    second = t.apply(source(MASK_SCHEMA, mask_struct())).value
    first["array"].append(0)
    first["map"]["k"] = "v"
    assert (second["array"], second["map"]) == ([], {})


def test_mask_field_replacement_of_a_float_field_that_holds_an_int(make):
    # kctl's FLOAT32/FLOAT64 fields accept Python ints (a connector may put 5 for 5.0): the
    # replacement is converted for the field's schema type, not for the int that happens to be
    # there, so a float replacement does not fail with "Unable to convert".
    schema = SchemaBuilder.struct().field("price", FLOAT64_SCHEMA) \
        .field("weight", OPTIONAL_FLOAT32_SCHEMA).build()
    value = Struct(schema, {"price": 5, "weight": 2})
    out = mask(make, ["price", "weight"], "-1.5").apply(source(schema, value))
    assert out.value.to_dict() == {"price": -1.5, "weight": -1.5}
    out = mask(make, ["price"]).apply(source(schema, value))
    assert out.value["price"] == 0.0 and type(out.value["price"]) is float


# --- ReplaceField -----------------------------------------------------------------------------

RF_SCHEMA = (SchemaBuilder.struct().field("dont", STRING_SCHEMA).field("abc", INT32_SCHEMA)
             .field("foo", BOOLEAN_SCHEMA).field("etc", STRING_SCHEMA).build())


def test_replace_field_tombstones(make):  # tombstoneSchemaless / tombstoneWithSchema
    t = make("ReplaceField$Value", include="abc,foo", renames="abc:xyz,foo:bar")
    for schema in (None, RF_SCHEMA):
        rec = SinkRecord("test", 0, None, None, schema, None, None, kafka_offset=0)
        out = t.apply(rec)
        assert out.value is None and out.value_schema is schema


@VARIANTS
def test_replace_field_schemaless(make, variant):  # ReplaceFieldTest.schemaless
    value = {"dont": "whatever", "abc": 42, "foo": True, "etc": "etc"}
    out = make(f"ReplaceField${variant}", exclude="dont", renames="abc:xyz,foo:bar").apply(
        on(variant, None, value))
    assert payload(out, variant) == (None, {"xyz": 42, "bar": True, "etc": "etc"})


@VARIANTS
def test_replace_field_with_schema(make, variant):  # ReplaceFieldTest.withSchema
    value = Struct(RF_SCHEMA, {"dont": "whatever", "abc": 42, "foo": True, "etc": "etc"})
    out = make(f"ReplaceField${variant}", include="abc,foo", renames="abc:xyz,foo:bar").apply(
        on(variant, RF_SCHEMA, value))
    schema, replaced = payload(out, variant)
    assert [(f.name, f.schema) for f in schema.fields] == [("xyz", INT32_SCHEMA),
                                                           ("bar", BOOLEAN_SCHEMA)]
    assert replaced.to_dict() == {"xyz": 42, "bar": True}


@VARIANTS
@NULL_DEFAULT
def test_replace_field_replace_null_with_default(make, variant, replace_null, expected):
    # testReplaceNullWithDefaultConfigOnValue / testReplaceNullWithDefaultConfigOnKey
    schema = SchemaBuilder.struct().field("abc", Schema(Type.INT32, optional=True, default=42)) \
        .build()
    out = make(f"ReplaceField${variant}", include="abc", renames="abc:optional_with_default",
               **{"replace.null.with.default": str(replace_null).lower()}).apply(
        on(variant, schema, Struct(schema)))
    renamed_schema, renamed = payload(out, variant)
    assert len(renamed_schema.fields) == 1
    assert renamed.get_without_default("optional_with_default") == expected


@VARIANTS
def test_replace_field_renames_keep_optionality_defaults_and_schema_metadata(make, variant):
    schema = (SchemaBuilder.struct().name("shop.Order").version(3).doc("an order").optional()
              .parameter("source", "crm")
              .field("id", INT64_SCHEMA)
              .field("qty", Schema(Type.INT16, optional=True, default=1))
              .field("note", SchemaBuilder(Type.STRING).optional().doc("free text").build())
              .build())
    value = Struct(schema, {"id": 7, "note": "gift"})
    out = make(f"ReplaceField${variant}", renames="id:order_id,qty:quantity,note:remark").apply(
        on(variant, schema, value))
    renamed_schema, renamed = payload(out, variant)
    assert renamed_schema == (
        SchemaBuilder.struct().name("shop.Order").version(3).doc("an order").optional()
        .parameter("source", "crm")
        .field("order_id", INT64_SCHEMA)
        .field("quantity", Schema(Type.INT16, optional=True, default=1))
        .field("remark", SchemaBuilder(Type.STRING).optional().doc("free text").build())
        .build())
    assert renamed.to_dict() == {"order_id": 7, "quantity": 1, "remark": "gift"}
    assert renamed.get_without_default("quantity") == 1  # replace.null.with.default is on


def test_replace_field_config_errors(make):
    for renames in ("a:b:c", "a", ":b", "a:"):
        with pytest.raises(ValidationError) as e:
            make("ReplaceField$Value", renames=renames)
        assert "Invalid rename mapping" in e.value.errors["renames"][0], renames


# --- InsertField ------------------------------------------------------------------------------

INSERT_PROPS = {"topic.field": "topic_field!", "partition.field": "partition_field",
                "timestamp.field": "timestamp_field?", "static.field": "instance_id",
                "static.value": "my-instance-id"}
SIMPLE = (SchemaBuilder.struct().name("name").version(1).doc("doc")
          .field("magic", OPTIONAL_INT64_SCHEMA).build())


def test_insert_field_needs_a_struct(make):  # InsertFieldTest.topLevelStructRequired
    with pytest.raises(DataError, match="Only Struct objects supported for \\[field insertion"):
        make("InsertField$Value", **INSERT_PROPS).apply(source(INT32_SCHEMA, 42))


@VARIANTS
def test_insert_field_copies_the_schema_and_inserts_configured_fields(make, variant):
    # InsertFieldTest.copySchemaAndInsertConfiguredFields, on the key and the value
    t = make(f"InsertField${variant}", **INSERT_PROPS)
    rec = on(variant, SIMPLE, Struct(SIMPLE, {"magic": 42}))
    out = t.apply(dataclass_replace(rec, topic="test", timestamp=789))
    schema, value = payload(out, variant)
    assert (schema.name, schema.version, schema.doc) == ("name", 1, "doc")
    assert schema.field("magic").schema == OPTIONAL_INT64_SCHEMA and value["magic"] == 42
    assert schema.field("topic_field").schema == STRING_SCHEMA
    assert value["topic_field"] == "test"
    assert schema.field("partition_field").schema == OPTIONAL_INT32_SCHEMA
    assert value["partition_field"] == 0
    assert schema.field("timestamp_field").schema == timestamp_schema(True)
    assert value["timestamp_field"] == EPOCH + dt.timedelta(milliseconds=789)
    assert schema.field("instance_id").schema == OPTIONAL_STRING_SCHEMA
    assert value["instance_id"] == "my-instance-id"
    value.validate()

    # Exercise caching: the same input schema gives the very same output schema
    again = t.apply(dataclass_replace(on(variant, SIMPLE, Struct(SIMPLE)), kafka_partition=1))
    assert payload(again, variant)[0] is schema


def dataclass_replace(rec: Any, **changes: Any) -> Any:
    return rec.new_record(**changes)


def test_insert_field_schemaless(make):  # InsertFieldTest.schemalessInsertConfiguredFields
    out = make("InsertField$Value", **INSERT_PROPS).apply(
        source(None, {"magic": 42}, topic="test", timestamp=123))
    assert out.value == {"magic": 42, "topic_field": "test", "partition_field": 0,
                         "timestamp_field": 123, "instance_id": "my-instance-id"}


def test_insert_field_tombstones_are_left_unchanged(make):
    # insertConfiguredFieldsIntoTombstoneEventWith(out)SchemaLeavesValueUnchanged
    t = make("InsertField$Value", **INSERT_PROPS)
    for schema in (None, SIMPLE):
        rec = source(schema, None, topic="test")
        out = t.apply(rec)
        assert out.value is None and out.value_schema is schema


def test_insert_key_fields_into_a_tombstone_and_a_null_key(make):
    # insertKeyFieldsIntoTombstoneEvent / insertIntoNullKeyLeavesRecordUnchanged
    t = make("InsertField$Key", **INSERT_PROPS)
    out = t.apply(source(None, None, key={"magic": 42}, topic="test"))
    assert out.key == {"magic": 42, "topic_field": "test", "partition_field": 0,
                       "instance_id": "my-instance-id"}  # no timestamp on the record: none added
    assert out.value is None
    rec = source(None, {"magic": 42}, topic="test")
    assert t.apply(rec) is rec


@NULL_DEFAULT
def test_insert_field_unset_optional_field(make, replace_null, expected):
    # InsertFieldTest.testUnsetOptionalField
    magic = Schema(Type.INT64, optional=True, default=42)
    schema = (SchemaBuilder.struct().name("name").version(1).doc("doc")
              .field("magic_with_default", magic).build())
    out = make("InsertField$Value", **INSERT_PROPS,
               **{"replace.null.with.default": str(replace_null).lower()}).apply(
        source(schema, Struct(schema), timestamp=789))
    assert (out.value_schema.name, out.value_schema.version, out.value_schema.doc) == \
        ("name", 1, "doc")
    assert out.value_schema.field("magic_with_default").schema == magic
    assert out.value.get_without_default("magic_with_default") == expected


def test_insert_field_offset_needs_a_sink_record(make):
    t = make("InsertField$Value", **{"offset.field": "off!"})
    out = t.apply(SinkRecord("t", 1, None, None, SIMPLE, Struct(SIMPLE), None, kafka_offset=99))
    assert out.value_schema.field("off").schema == INT64_SCHEMA and out.value["off"] == 99
    with pytest.raises(DataError, match="Only SinkRecord supported for \\[field insertion\\]"):
        t.apply(source(SIMPLE, Struct(SIMPLE)))


def test_insert_field_config_errors(make):
    with pytest.raises(ConfigError, match="No field insertion configured"):
        make("InsertField$Key")
    with pytest.raises(ConfigError, match="No value specified for static field: s"):
        make("InsertField$Key", **{"static.field": "s"})


# --- HeaderFrom -------------------------------------------------------------------------------

STRING_WITH_DEFAULT = Schema(Type.STRING, optional=True, default="default")
FOO = SchemaBuilder.struct().field("foo", STRING_SCHEMA).build()
FOO_VALUE = Struct(FOO, {"foo": "foo-value"})
H1 = ("header1", STRING_SCHEMA, "existing-value")

# (description, [(field, schema, value)], existing headers, fields, headers, operation,
#  replace.null.with.default, expected fields, expected headers) as in HeaderFromTest.data()
HEADER_FROM = [
    ("basic copy",
     [("field1", STRING_SCHEMA, "field1-value"), ("field2", STRING_SCHEMA, "field2-value")], [H1],
     "field1", "inserted1", "copy", True,
     [("field1", STRING_SCHEMA, "field1-value"), ("field2", STRING_SCHEMA, "field2-value")],
     [H1, ("inserted1", STRING_SCHEMA, "field1-value")]),
    ("basic move",
     [("field1", STRING_SCHEMA, "field1-value"), ("field2", STRING_SCHEMA, "field2-value")], [H1],
     "field1", "inserted1", "move", True,
     [("field2", STRING_SCHEMA, "field2-value")],
     [H1, ("inserted1", STRING_SCHEMA, "field1-value")]),
    ("copy with preexisting header",
     [("field1", STRING_SCHEMA, "field1-value"), ("field2", STRING_SCHEMA, "field2-value")],
     [("inserted1", STRING_SCHEMA, "existing-value")],
     "field1", "inserted1", "copy", True,
     [("field1", STRING_SCHEMA, "field1-value"), ("field2", STRING_SCHEMA, "field2-value")],
     [("inserted1", STRING_SCHEMA, "existing-value"),
      ("inserted1", STRING_SCHEMA, "field1-value")]),
    ("move with preexisting header",
     [("field1", STRING_SCHEMA, "field1-value"), ("field2", STRING_SCHEMA, "field2-value")],
     [("inserted1", STRING_SCHEMA, "existing-value")],
     "field1", "inserted1", "move", True,
     [("field2", STRING_SCHEMA, "field2-value")],
     [("inserted1", STRING_SCHEMA, "existing-value"),
      ("inserted1", STRING_SCHEMA, "field1-value")]),
    ("copy with struct value",
     [("field1", FOO, FOO_VALUE), ("field2", STRING_SCHEMA, "field2-value")], [H1],
     "field1", "inserted1", "copy", True,
     [("field1", FOO, FOO_VALUE), ("field2", STRING_SCHEMA, "field2-value")],
     [H1, ("inserted1", FOO, FOO_VALUE)]),
    ("move with struct value",
     [("field1", FOO, FOO_VALUE), ("field2", STRING_SCHEMA, "field2-value")], [H1],
     "field1", "inserted1", "move", True,
     [("field2", STRING_SCHEMA, "field2-value")],
     [H1, ("inserted1", FOO, FOO_VALUE)]),
    ("two headers from same field",
     [("field1", STRING_SCHEMA, "field1-value"), ("field2", STRING_SCHEMA, "field2-value")], [H1],
     "field1,field1", "inserted1,inserted2", "move", True,
     [("field2", STRING_SCHEMA, "field2-value")],
     [H1, ("inserted1", STRING_SCHEMA, "field1-value"),
      ("inserted2", STRING_SCHEMA, "field1-value")]),
    ("two fields to same header",
     [("field1", STRING_SCHEMA, "field1-value"), ("field2", STRING_SCHEMA, "field2-value")], [H1],
     "field1,field2", "inserted1,inserted1", "move", True,
     [],
     [H1, ("inserted1", STRING_SCHEMA, "field1-value"),
      ("inserted1", STRING_SCHEMA, "field2-value")]),
    ("copy null field without default",
     [("field1", STRING_WITH_DEFAULT, "field1-value"), ("field2", STRING_WITH_DEFAULT, None)],
     [H1], "field1,field2", "inserted1,inserted2", "copy", False,
     [("field1", STRING_WITH_DEFAULT, "field1-value"), ("field2", STRING_WITH_DEFAULT, None)],
     [H1, ("inserted1", STRING_WITH_DEFAULT, "field1-value"),
      ("inserted2", STRING_WITH_DEFAULT, None)]),
    ("move null field without default",
     [("field1", STRING_WITH_DEFAULT, "field1-value"), ("field2", STRING_WITH_DEFAULT, None)],
     [H1], "field1,field2", "inserted1,inserted2", "move", False,
     [],
     [H1, ("inserted1", STRING_WITH_DEFAULT, "field1-value"),
      ("inserted2", STRING_WITH_DEFAULT, None)]),
    ("copy null field with default",
     [("field1", STRING_WITH_DEFAULT, None)], [], "field1", "inserted1", "copy", True,
     [("field1", STRING_WITH_DEFAULT, None)],
     [("inserted1", STRING_WITH_DEFAULT, "default")]),
]


def header_from_record(variant: str, fields: list[tuple[str, Schema, Any]],
                       headers: list[tuple[str, Schema, Any]], with_schema: bool) -> SourceRecord:
    h = Headers()
    for name, schema, value in headers:
        h.add(name, value, schema if with_schema else None)
    if with_schema:
        b = SchemaBuilder.struct()
        for name, schema, _ in fields:
            b.field(name, schema)
        schema = b.build()
        payload_value: Any = Struct(schema)
        for name, _, value in fields:
            payload_value.put(name, value)
    else:
        schema, payload_value = None, {name: value for name, _, value in fields}
    base = SourceRecord("topic", 0, None, "key", None, "value", 0, h, {"foo": "bar"},
                        {"baz": "quxx"})
    if variant == "Key":
        return base.new_record(key_schema=schema, key=payload_value)
    return base.new_record(value_schema=schema, value=payload_value)


def _header_from_cases() -> list:
    """Every row with and without a schema, except replacing nulls with defaults on
    schemaless records: without a schema there is no default to replace a null with."""
    return [pytest.param(with_schema, *row, id=f"{row[0]}-{'with-schema' if with_schema else 'schemaless'}")
            for row in HEADER_FROM for with_schema in (True, False)
            if with_schema or not (row[6] and any(v is None for _, _, v in row[1]))]


@VARIANTS
@pytest.mark.parametrize(
    ("with_schema", "description", "fields", "headers", "xform_fields", "xform_headers",
     "operation", "replace_null", "expected_fields", "expected_headers"),
    _header_from_cases())
def test_header_from(make, variant, with_schema, description, fields, headers, xform_fields,
                     xform_headers, operation, replace_null, expected_fields, expected_headers):
    # HeaderFromTest.schemaless / HeaderFromTest.withSchema, on the key and the value
    t = make(f"HeaderFrom${variant}", fields=xform_fields, headers=xform_headers,
             operation=operation, **{"replace.null.with.default": str(replace_null).lower()})
    original = header_from_record(variant, fields, headers, with_schema)
    out = t.apply(original)
    expected = header_from_record(variant, expected_fields, expected_headers, with_schema)
    assert payload(out, variant) == payload(expected, variant)
    assert [(h.key, h.value, h.schema) for h in out.headers] == \
        [(h.key, h.value, h.schema) for h in expected.headers]
    other = "Value" if variant == "Key" else "Key"
    assert payload(out, other) == payload(original, other)
    assert (out.source_partition, out.source_offset) == ({"foo": "bar"}, {"baz": "quxx"})
    assert len(original.headers) == len(headers)  # the input's headers are not mutated


def test_header_from_config_errors(make):
    # invalidConfigExtraHeaderConfig / invalidConfigExtraFieldConfig / ...EmptyHeadersAndFields...
    with pytest.raises(ConfigError, match="same number of elements"):
        make("HeaderFrom$Value", fields="foo", headers="foo,bar", operation="copy")
    with pytest.raises(ConfigError, match="same number of elements"):
        make("HeaderFrom$Key", fields="foo,bar", headers="foo", operation="move")
    with pytest.raises(ValidationError):
        make("HeaderFrom$Value", fields="", headers="", operation="copy")
