"""JsonConverter's columnar path gives exactly what the per-record path gives, or None.

Every property compares `from_arrow` / `to_arrow` row by row with `from_connect_data` /
`to_connect_data` on the same data: byte-identical envelopes on the way out, equal schemas
and values (NaN equal to NaN, -0.0 distinct from 0.0) on the way in, and None whenever any
row would fail per record.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kctl.api.arrow import array_to_connect, arrow_type_to_connect, connect_to_arrow_type
from kctl.api.data import (
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Field,
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
from kctl.runtime.converters import JsonConverter, load_converter
from kctl.runtime.converters import columns as json_columns

FAST = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def conv(enable: bool = True) -> JsonConverter:
    c = load_converter("json", {"schemas.enable": str(enable).lower()}, False)
    assert isinstance(c, JsonConverter)
    return c


# --- comparing values ---------------------------------------------------------------------


def from_arrow(c: JsonConverter, topic: str, schema: Schema, arr: pa.Array) -> list | None:
    """c.from_arrow as Python bytes (it returns a binary array)."""
    out = c.from_arrow(topic, schema, arr)
    if out is None:
        return None
    assert out.type == pa.binary()
    return out.to_pylist()


def canon(v: Any) -> Any:
    """A comparable form: structs as (field, value) tuples, floats by their exact text."""
    if hasattr(v, "schema") and hasattr(v, "get_without_default"):
        return ("struct", v.schema, tuple((f.name, canon(v.get_without_default(f.name)))
                                          for f in v.schema.fields))
    if isinstance(v, float):
        return ("float", repr(v))  # NaN == NaN, -0.0 != 0.0
    if isinstance(v, bool):
        return ("bool", v)
    return v


def per_record_encode(c: JsonConverter, schema: Schema, arr: pa.Array) -> list[bytes] | None:
    """from_connect_data for every row, or None when any row raises."""
    try:
        return [c.from_connect_data("t", schema, v) for v in array_to_connect(arr, schema)]
    except DataError:
        return None


def per_record_decode(values: list[bytes]) -> list[tuple[Schema | None, Any]] | None:
    """to_connect_data for every value (a fresh converter), or None when any raises."""
    c = conv()
    out = []
    for v in values:
        try:
            sv = c.to_connect_data("t", v)
        except (DataError, ValueError, OverflowError, RecursionError):
            return None
        out.append((sv.schema, canon(sv.value)))
    return out


def columnar_decode(values: list[bytes]) -> list[tuple[Schema | None, Any]] | None:
    res = conv().to_arrow("t", values)
    if res is None:
        return None
    schema, column = res
    assert isinstance(column, pa.Array) and len(column) == len(values)
    assert column.type == connect_to_arrow_type(schema)
    column.validate(full=True)
    return [(schema, canon(v)) for v in array_to_connect(column, schema)]


def check_decode(values: list[bytes]) -> list[tuple[Schema | None, Any]] | None:
    """The columnar decode is None or equal to per record (and None when per record fails)."""
    got = columnar_decode(values)
    if got is not None:
        assert got == per_record_decode(values)
    return got


# --- Arrow data -------------------------------------------------------------------------------

SPECIAL_CHARS = ['"', "\\", "\x00", "\n", "\r", "\t", "\x1f", "\x7f", "\u2028", "é", "😀", "/",
                 "\ufeff", "a", "b", " ", ":", ",", "{", "}", "N", "I", "-", "0"]
text_values = st.one_of(
    st.text(alphabet=st.sampled_from(SPECIAL_CHARS), max_size=12),
    st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12),
)
field_names = st.one_of(st.sampled_from(["a", "b", "id", "x y", "é", 'q"uote', "back\\slash",
                                         "😀", "tab\t", "p", "schema", "payload"]),
                        st.text(alphabet=st.characters(exclude_categories=("Cs",)),
                                min_size=1, max_size=6))
EDGE_FLOATS = [0.0, -0.0, 1.0, -1.5, 1e16, 1e-7, 1e-4, 9.999e-5, 1e15, 123456789.0, 1e9, 1e10,
               12345678901.5, 2.0**53, 2.0**63, 0.1, 1 / 3, 5e-324, 1.7976931348623157e308,
               math.nan, math.inf, -math.inf]
float64_values = st.one_of(st.sampled_from(EDGE_FLOATS), st.floats())
float32_values = st.one_of(st.sampled_from([0.0, -0.0, 0.1, 1e-7, 3.0, 1e16, math.nan, math.inf]),
                           st.floats(width=32))

LEAVES: dict[str, tuple[pa.DataType, st.SearchStrategy]] = {
    "int8": (pa.int8(), st.integers(-(2**7), 2**7 - 1)),
    "int16": (pa.int16(), st.integers(-(2**15), 2**15 - 1)),
    "int32": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "int64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "float32": (pa.float32(), float32_values),
    "float64": (pa.float64(), float64_values),
    "bool": (pa.bool_(), st.booleans()),
    "string": (pa.string(), text_values),
    "binary": (pa.binary(), st.binary(max_size=12)),
}
LEAF_TYPES = [t for t, _ in LEAVES.values()]


def _leaf_values(t: pa.DataType) -> st.SearchStrategy:
    return next(s for lt, s in LEAVES.values() if lt == t)


def struct_types(max_depth: int = 3) -> st.SearchStrategy[pa.DataType]:
    leaf = st.sampled_from(LEAF_TYPES)

    def extend(children: st.SearchStrategy) -> st.SearchStrategy:
        fields = st.lists(st.tuples(field_names, children, st.booleans()), max_size=5,
                          unique_by=lambda f: f[0])
        return fields.map(lambda fs: pa.struct([pa.field(n, t, nullable=nl) for n, t, nl in fs]))

    return extend(st.recursive(leaf, extend, max_leaves=8)).filter(lambda t: t.num_fields > 0)


def values_of(t: pa.DataType, nullable: bool, bad_nulls: bool) -> st.SearchStrategy:
    """Python values of an Arrow type; nulls where nullable, and in required fields too
    when `bad_nulls` (those rows must make the columnar path give None)."""
    if pa.types.is_struct(t):
        base: st.SearchStrategy = st.fixed_dictionaries(
            {t.field(i).name: values_of(t.field(i).type, t.field(i).nullable, bad_nulls)
             for i in range(t.num_fields)})
    else:
        base = _leaf_values(t)
    if nullable:
        return st.one_of(st.none(), base)
    if bad_nulls:
        return st.one_of(base, base, base, st.none())
    return base


@st.composite
def struct_arrays(draw: st.DrawFn, bad_nulls: bool | None = None) -> pa.Array:
    t = draw(struct_types())
    if bad_nulls is None:
        bad_nulls = draw(st.booleans())
    rows = draw(st.lists(values_of(t, True, bad_nulls), min_size=1, max_size=12))
    arr = pa.array(rows, t)
    how = draw(st.sampled_from(["plain", "sliced", "chunked"]))
    if how == "sliced" and len(arr) > 1:
        arr = arr.slice(1)
    elif how == "chunked" and len(arr) > 1:
        arr = pa.chunked_array([arr.slice(0, 1), arr.slice(1)])
    return arr


# --- from_arrow: byte-identical to from_connect_data ------------------------------------------


@FAST
@given(arr=struct_arrays(), enable=st.booleans(), top_optional=st.booleans())
def test_from_arrow_is_byte_identical_to_per_record(arr, enable, top_optional):
    schema = arrow_type_to_connect(arr.type, optional=top_optional)
    c = conv(enable)
    expected = per_record_encode(c, schema, arr)
    got = from_arrow(c, "t", schema, arr)
    # None exactly when some row fails per record (a null in a live required field, or a
    # null top-level row of a required schema): the types here all fit their schema.
    assert got == expected


@FAST
@given(arr=struct_arrays(bad_nulls=False), enable=st.booleans())
def test_from_arrow_without_bad_nulls_always_takes_the_columnar_path(arr, enable):
    schema = arrow_type_to_connect(arr.type, optional=True)
    c = conv(enable)
    got = from_arrow(c, "t", schema, arr)
    assert got is not None
    assert got == per_record_encode(c, schema, arr)


@FAST
@given(leaf=st.sampled_from(sorted(LEAVES)), data=st.data(), enable=st.booleans(),
       optional=st.booleans())
def test_top_level_primitive_columns(leaf, data, enable, optional):
    t, values = LEAVES[leaf]
    rows = data.draw(st.lists(st.one_of(st.none(), values), min_size=1, max_size=20))
    arr = pa.array(rows, t)
    schema = arrow_type_to_connect(t, optional=optional)
    c = conv(enable)
    assert from_arrow(c, "t", schema, arr) == per_record_encode(c, schema, arr)


@FAST
@given(s=st.text(alphabet=st.characters(exclude_categories=("Cs",))))
def test_any_string_is_escaped_exactly_as_json_dumps(s):
    got = from_arrow(conv(False), "t", STRING_SCHEMA, pa.array([s, "plain", s]))
    want = json.dumps(s, ensure_ascii=False).encode()
    assert got == [want, b'"plain"', want]


@FAST
@given(x=st.one_of(st.floats(), st.sampled_from(EDGE_FLOATS),
                   st.integers(-(2**53), 2**53).map(float),
                   st.builds(lambda m, e: m * 10.0**e, st.integers(-10**6, 10**6),
                             st.integers(-12, 18))))
def test_any_float_is_written_as_python_json_writes_it(x):
    got = from_arrow(conv(False), "t", FLOAT64_SCHEMA, pa.array([x, 1.5, x]))
    want = json.dumps(x).encode()
    assert got == [want, b"1.5", want]


@FAST
@given(arr=struct_arrays(), schema_arr=struct_arrays(), enable=st.booleans())
def test_a_schema_that_does_not_describe_the_array_never_gives_different_bytes(
        arr, schema_arr, enable):
    schema = arrow_type_to_connect(schema_arr.type, optional=True)
    c = conv(enable)
    got = from_arrow(c, "t", schema, arr)
    if got is not None:
        assert got == per_record_encode(c, schema, arr)


@FAST
@given(leaf=st.sampled_from(sorted(LEAVES)), data=st.data(),
       target=st.sampled_from([Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.FLOAT32,
                               Type.FLOAT64, Type.BOOLEAN, Type.STRING, Type.BYTES]))
def test_primitive_type_mismatches_give_none_or_the_same_bytes(leaf, data, target):
    t, values = LEAVES[leaf]
    arr = pa.array(data.draw(st.lists(values, min_size=1, max_size=10)), t)
    schema = Schema(target, optional=True)
    c = conv(False)
    got = from_arrow(c, "t", schema, arr)
    expected = per_record_encode(c, schema, arr)
    if expected is None:
        assert got is None
    elif got is not None:
        assert got == expected


def test_unsigned_and_wide_integers_are_range_checked():
    c = conv(False)
    assert from_arrow(c, "t", INT8_SCHEMA, pa.array([1, 127], pa.uint8())) == [b"1", b"127"]
    assert from_arrow(c, "t", INT8_SCHEMA, pa.array([1, 128], pa.uint8())) is None
    assert from_arrow(c, "t", INT16_SCHEMA, pa.array([-(2**15), 2**15], pa.int64())) is None
    assert from_arrow(c, "t", INT64_SCHEMA, pa.array([2**63], pa.uint64())) is None
    assert from_arrow(c, "t", INT32_SCHEMA, pa.array([None, -5], pa.int64())) is None  # required
    assert from_arrow(c, "t", Schema(Type.INT32, optional=True),
                        pa.array([None, -5], pa.int64())) == [b"null", b"-5"]
    with pytest.raises(DataError):
        c.from_connect_data("t", INT8_SCHEMA, 128)


def test_dictionary_strings_and_the_envelope():
    arr = pa.array(["a", "b\n", "a", None]).dictionary_encode()
    schema = Schema(Type.STRING, optional=True)
    c = conv()
    got = from_arrow(c, "t", schema, arr)
    assert got == per_record_encode(c, schema, arr)
    assert got[1] == b'{"schema":{"type":"string","optional":true},"payload":"b\\n"}'


def test_a_required_field_may_be_null_under_a_null_struct():
    inner = pa.struct([pa.field("x", pa.int32(), nullable=False)])
    t = pa.struct([pa.field("s", inner, nullable=True), pa.field("n", pa.int64(), nullable=False)])
    arr = pa.StructArray.from_arrays(
        [pa.StructArray.from_arrays([pa.array([1, None], pa.int32())], fields=list(inner),
                                    mask=pa.array([False, True])),
         pa.array([1, 2])], fields=list(t))
    schema = arrow_type_to_connect(t, optional=False)
    c = conv(False)
    assert from_arrow(c, "t", schema, arr) == [b'{"s":{"x":1},"n":1}', b'{"s":null,"n":2}']
    assert from_arrow(c, "t", schema, arr) == per_record_encode(c, schema, arr)


def test_an_escaping_bug_would_be_caught(monkeypatch):
    """The comparison these tests make fails when the columnar escaping is wrong."""
    arr = pa.array(['a\\b', 'q"'])
    c = conv(False)
    assert from_arrow(c, "t", STRING_SCHEMA, arr) == per_record_encode(c, STRING_SCHEMA, arr)
    monkeypatch.setattr(json_columns, "_ESCAPED_BYTES", b'"')
    monkeypatch.setattr(json_columns, "_NEEDS_ESCAPE", '"')
    assert from_arrow(c, "t", STRING_SCHEMA, arr) != per_record_encode(c, STRING_SCHEMA, arr)


def _struct(*fields: tuple[str, Schema], optional: bool = False) -> Schema:
    b = SchemaBuilder.struct()
    for name, s in fields:
        b.field(name, s)
    if optional:
        b.optional()
    return b.build()


FROM_ARROW_NONE = {
    "array schema": (SchemaBuilder.array(INT32_SCHEMA).build(), pa.array([[1]], pa.list_(pa.int32()))),
    "map schema": (SchemaBuilder.map(STRING_SCHEMA, INT32_SCHEMA).build(),
                   pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int32()))),
    "decimal of another scale": (decimal_schema(3), pa.array([1], pa.decimal128(5, 2))),
    "date64 for a date": (date_schema(), pa.array([1], pa.date64())),
    "int column for a timestamp": (timestamp_schema(), pa.array([1], pa.int64())),
    "string column for a time": (time_schema(), pa.array(["x"])),
    "default at top": (Schema(Type.INT32, default=7), pa.array([1], pa.int32())),
    "default in a field": (_struct(("a", Schema(Type.INT32, optional=True, default=7))),
                           pa.array([{"a": 1}], pa.struct([("a", pa.int32())]))),
    "null at a required top level": (INT32_SCHEMA, pa.array([1, None], pa.int32())),
    "null in a required field": (_struct(("a", INT32_SCHEMA)),
                                 pa.array([{"a": None}], pa.struct([("a", pa.int32())]))),
    "out of range": (INT8_SCHEMA, pa.array([300], pa.int64())),
    "float column for an int schema": (INT64_SCHEMA, pa.array([1.0])),
    "int column for a float schema": (FLOAT64_SCHEMA, pa.array([1], pa.int64())),
    "bytes for a string": (STRING_SCHEMA, pa.array([b"x"])),
    "string for bytes": (Schema(Type.BYTES), pa.array(["x"])),
    "bool for int": (INT32_SCHEMA, pa.array([True])),
    "field names differ": (_struct(("b", INT32_SCHEMA)),
                           pa.array([{"a": 1}], pa.struct([("a", pa.int32())]))),
    "field order differs": (_struct(("b", INT32_SCHEMA), ("a", INT32_SCHEMA)),
                            pa.array([{"a": 1, "b": 2}],
                                     pa.struct([("a", pa.int32()), ("b", pa.int32())]))),
    "duplicate field names": (Schema(Type.STRUCT, fields=(Field("a", 0, INT32_SCHEMA),
                                                          Field("a", 1, INT32_SCHEMA))),
                              pa.StructArray.from_arrays([pa.array([1]), pa.array([2])],
                                                         names=["a", "a"])),
    "half floats": (FLOAT64_SCHEMA, pa.array([1.0], pa.float16())),
    "struct schema for a null column": (_struct(("a", INT32_SCHEMA), optional=True),
                                        pa.nulls(2)),
}


@pytest.mark.parametrize("case", sorted(FROM_ARROW_NONE))
@pytest.mark.parametrize("enable", [True, False])
def test_from_arrow_gives_none(case, enable):
    schema, arr = FROM_ARROW_NONE[case]
    assert from_arrow(conv(enable), "t", schema, arr) is None


def test_from_arrow_of_no_rows_and_of_no_schema():
    assert from_arrow(conv(), "t", INT32_SCHEMA, pa.array([], pa.int32())) == []
    assert from_arrow(conv(), "t", None, pa.array([1])) is None  # type: ignore[arg-type]


# --- to_arrow: equal to to_connect_data -------------------------------------------------------

SUSPECT = re.compile(json_columns.SUSPECT_NUMBERS)


def encoded(arr: pa.Array) -> list[bytes] | None:
    schema = arrow_type_to_connect(arr.type, optional=True)  # null rows as null payloads
    return per_record_encode(conv(), schema, arr)


@FAST
@given(arr=struct_arrays(bad_nulls=False))
def test_to_arrow_round_trips_what_the_per_record_encoder_writes(arr):
    values = encoded(arr)
    assume(values is not None)
    got = check_decode(values)
    if got is None:
        # the only excuse: text that looks like a number form the parsers disagree on
        assert any(SUSPECT.search(v.decode()) for v in values)
        return
    original = array_to_connect(arr, arrow_type_to_connect(arr.type, optional=True))
    assert [v for _, v in got] == [canon(v) for v in original]


MUTATIONS = [",", "}", "{", '"', "\\", ":", "null", "NaN", "Infinity", "-Infinity", "Inf",
             "-Inf", "-NaN", "-0", "1.0", "1e2", "1e400", "\n", "\r", " ", "\t", '"x":1',
             '"a":null', "\ufeff", "\x00", "\\ud800", "\\u0041", "[", "]", "9" * 400, "true",
             "0.1", "{}", '{"a":1}', "\\/", '"\\u0000"', "\xff"]


@FUZZ
@given(arr=struct_arrays(bad_nulls=False), data=st.data())
def test_to_arrow_on_damaged_payloads_is_none_or_equal_to_per_record(arr, data):
    values = encoded(arr)
    assume(values is not None)
    i = data.draw(st.integers(0, len(values) - 1))
    text = values[i].decode()
    start = text.index(',"payload":') + len(',"payload":')
    pos = data.draw(st.integers(start, len(text)))
    cut = data.draw(st.integers(0, 3))
    insert = data.draw(st.sampled_from([*MUTATIONS, ""]))
    raw = (text[:pos] + insert + text[pos + cut:]).encode("utf-8", "surrogatepass")
    if insert == "\xff":
        raw = raw.replace("\xff".encode(), b"\xff")  # invalid UTF-8
    values[i] = raw
    check_decode(values)  # asserts equality whenever the columnar path answers


@pytest.mark.parametrize("payloads", [
    [b'{"f":1,"s":"\\u00e9\\/","n":null}',          # an int for a float, escapes
     b'{"f":NaN,"s":null,"n":{"x":2}}',               # NaN, Infinity as Python writes them
     b'{"f":-Infinity,"s":"\\ud83d\\ude00"}',      # a surrogate pair; missing = null
     b'{"s":"a","f":Infinity}'],                      # any key order
    [b' {"f":9007199254740993} ',                     # rounded as Python rounds it
     b'{"f":123456789012345678901234567890,"n":{"x":-0}}',  # -0 is fine for an int
     b'{ "f" : 1E-3 , "n" : { "x" : 0 } }'],          # whitespace between tokens
    [b'{"f":-0.0}', b'{"f":-0e0}', b'{"f":0}'],      # negative zeros written as floats
], ids=["specials", "numbers", "zeros"])
def test_to_arrow_decodes_what_another_writer_might_write(payloads):
    schema = _struct(("f", Schema(Type.FLOAT64, optional=True)), ("s", OPTIONAL_STRING_SCHEMA),
                     ("n", Schema(Type.STRUCT, optional=True,
                                  fields=(Field("x", 0, INT32_SCHEMA),))))
    prefix = conv()._compile_encoder(schema)[1]
    values = [prefix + p + b"}" for p in payloads]
    got = check_decode(values)
    assert got is not None
    assert got == per_record_decode(values)


def test_to_arrow_keeps_a_null_payload_of_an_optional_schema():
    schema = _struct(("a", INT32_SCHEMA), optional=True)
    prefix = conv()._compile_encoder(schema)[1]
    values = [prefix + b'{"a":1}}', prefix + b"null}"]
    got = check_decode(values)
    assert got is not None and got[1] == (schema, None)


_S = _struct(("i", Schema(Type.INT32, optional=True)), ("i8", Schema(Type.INT8, optional=True)),
             ("r", Schema(Type.INT64, optional=True)),
             ("f", Schema(Type.FLOAT64, optional=True)),
             ("f32", Schema(Type.FLOAT32, optional=True)),
             ("s", OPTIONAL_STRING_SCHEMA), ("b", Schema(Type.BOOLEAN, optional=True)),
             ("y", Schema(Type.BYTES, optional=True)),
             ("req", Schema(Type.STRING, optional=True)),
             ("n", Schema(Type.STRUCT, optional=True, fields=(Field("x", 0, INT32_SCHEMA),))))
_P = conv()._compile_encoder(_S)[1]
_MAPS = _struct(("m", SchemaBuilder.map(STRING_SCHEMA, INT32_SCHEMA).build()))
_OK = b'{"i":1}'

# payload -> does per record accept it (with what difference) or raise
TO_ARROW_NONE: dict[str, list[bytes]] = {
    "int written as 1.0 (per record: 1)": [_P + b'{"i":1.0}}'],
    "int written as 1e2 (per record: 100)": [_P + b'{"i":1e2}}'],
    "string for an int": [_P + b'{"i":"1"}}'],
    "bool for an int": [_P + b'{"i":true}}'],
    "int8 out of range": [_P + b'{"i8":128}}'],
    "int64 out of range": [_P + b'{"r":9223372036854775808}}'],
    "number for a string": [_P + b'{"s":1}}'],
    "number for a bool": [_P + b'{"b":1}}'],
    "bytes not base64": [_P + b'{"y":"***"}}'],
    "bytes not ascii": [_P + '{"y":"é"}}'.encode()],
    "null in a required nested field": [_P + b'{"n":{"x":null}}}'],
    "missing required nested field": [_P + b'{"n":{}}}'],
    "extra field (per record ignores it)": [_P + b'{"i":1,"zz":2}}'],
    "extra nested field (per record ignores it)": [_P + b'{"n":{"x":1,"zz":2}}}'],
    "duplicate keys (per record: the last)": [_P + b'{"i":1,"i":2}}'],
    "duplicate keys written differently": [_P + b'{"i":1,"\\u0069":2}}'],
    "payload not an object": [_P + b"[1]}"],
    "payload a number": [_P + b"1}"],
    "null payload for a required schema": [_P + b"null}"],
    "payload empty": [_P + b"}"],
    "Inf (Python rejects it)": [_P + b'{"f":Inf}}'],
    "-Inf": [_P + b'{"f":-Inf}}'],
    "-NaN": [_P + b'{"f":-NaN}}'],
    "NaN for an int": [_P + b'{"i":NaN}}'],
    "-0 integer for a float (per record: +0.0)": [_P + b'{"f":-0}}'],
    "integer beyond double for a float (per record raises)": [_P + b'{"f":' + b"9" * 400 + b"}}"],
    "1e400 (per record: inf)": [_P + b'{"f":1e400}}'],
    "0.1 for a float32 (per record keeps the double)": [_P + b'{"f32":0.1}}'],
    "newline inside the payload": [_P + b'{"i":\n1}}'],
    "carriage return inside the payload": [_P + b'{"i":\r1}}'],
    "raw tab inside a string": [_P + b'{"s":"a\tb"}}'],
    "trailing garbage": [_P + b'{"i":1} x}'],
    "trailing whitespace": [_P + b'{"i":1}} '],
    "two objects in one payload": [_P + b'{"i":1}{"i":2}}', _P + b"}"],
    "an envelope with a second payload": [_P + b'{"i":1},"payload":{"i":2}}'],
    "byte order mark": [_P + '\ufeff{"i":1}}'.encode()],
    "invalid UTF-8": [_P + b'{"s":"\xff"}}'],
    "encoded surrogate (per record accepts it)": [_P + b'{"s":"\xed\xa0\x80"}}'],
    "lone surrogate escape": [_P + b'{"s":"\\ud800"}}'],
    "single quotes": [_P + b"{'i':1}}"],
    "trailing comma": [_P + b'{"i":1,}}'],
    "a None value (tombstone)": [_P + _OK + b"}", None],
    "a str value (per record: TypeError)": [_P + _OK + b"}", (_P + _OK + b"}").decode()],
    "different schemas": [_P + _OK + b"}",
                          conv().from_connect_data("t", INT32_SCHEMA, 1)],
    "schema with whitespace": [_P.replace(b'{"schema":', b'{"schema": ') + _OK + b"}"],
    "payload before schema": [b'{"payload":{"i":1},"schema":' + _P[len(b'{"schema":'):-11] + b"}"],
    "not JSON at all": [b"hello"],
    "no schema": [b'{"schema":null,"payload":{"i":1}}'],
    "primitive schema": [conv().from_connect_data("t", INT32_SCHEMA, 1)],
    "array schema": [conv().from_connect_data("t", SchemaBuilder.array(INT32_SCHEMA).build(), [1])],
    "map field": [conv().from_connect_data("t", _MAPS, Struct(_MAPS, {"m": {"a": 1}}))],
    "decimal as a number (decimal.format=NUMERIC)": [
        b'{"schema":{"type":"struct","fields":[{"type":"bytes","optional":false,'
        b'"name":"org.apache.kafka.connect.data.Decimal","version":1,'
        b'"parameters":{"scale":"0"},"field":"d"}],'
        b'"optional":false},"payload":{"d":1}}'],
    "default in the schema": [b'{"schema":{"type":"struct","fields":[{"type":"int32",'
                              b'"optional":true,"default":5,"field":"a"}],"optional":false},'
                              b'"payload":{"a":null}}'],
    "broken schema": [b'{"schema":{"type":"nope"},"payload":{}}'],
}


@pytest.mark.parametrize("case", sorted(TO_ARROW_NONE))
def test_to_arrow_gives_none(case):
    values = TO_ARROW_NONE[case]
    assert conv().to_arrow("t", values) is None
    if all(isinstance(v, bytes) for v in values):
        check_decode(values)


def test_the_none_cases_really_differ_from_a_columnar_reading():
    """A few of the cases above that per record *accepts*, with the value it gives: a naive
    read_json would give something else (or drop the row)."""
    c = conv()
    assert c.to_connect_data("t", _P + b'{"i":1.0}}').value["i"] == 1
    assert math.copysign(1, c.to_connect_data("t", _P + b'{"f":-0}}').value["f"]) == 1
    assert c.to_connect_data("t", _P + b'{"f32":0.1}}').value["f32"] == 0.1
    assert c.to_connect_data("t", _P + b'{"i":1,"i":2}}').value["i"] == 2
    assert c.to_connect_data("t", _P + b'{"i":1,"zz":2}}').value["i"] == 1
    with pytest.raises(DataError):
        c.to_connect_data("t", _P + b'{"f":Inf}}')


def test_to_arrow_needs_schemas_and_rows():
    assert conv(False).to_arrow("t", [b'{"i":1}']) is None
    assert conv().to_arrow("t", []) is None
    assert conv().to_arrow("t", [None]) is None


def test_to_arrow_accepts_bytes_like_values():
    values = [_P + _OK + b"}", bytearray(_P + b'{"i":2}}'), memoryview(_P + b'{"i":3}}')]
    res = conv().to_arrow("t", values)
    assert res is not None
    assert res[0] == _S
    assert res[1].field("i").to_pylist() == [1, 2, 3]


# --- logical types (what database rows hold): byte-identical to per record -----------------

_TS_RANGE = (-(2**50), 2**50)  # about +-35 years of microseconds around 1970, and beyond
LOGICAL: dict[str, tuple[pa.DataType, Schema, st.SearchStrategy]] = {
    "timestamp us UTC": (pa.timestamp("us", tz="UTC"), timestamp_schema(True),
                         st.integers(*_TS_RANGE)),
    "timestamp ms": (pa.timestamp("ms", tz="UTC"), timestamp_schema(True),
                     st.integers(-(2**40), 2**40)),
    "timestamp no zone": (pa.timestamp("us"), timestamp_schema(True), st.integers(*_TS_RANGE)),
    "date": (pa.date32(), date_schema(True), st.integers(-100_000, 100_000)),
    "time us": (pa.time64("us"), time_schema(True), st.integers(0, 86_400_000_000 - 1)),
    "time ms": (pa.time32("ms"), time_schema(True), st.integers(0, 86_400_000 - 1)),
}


@FAST
@given(kind=st.sampled_from(sorted(LOGICAL)), data=st.data(), enable=st.booleans())
def test_logical_columns_encode_as_per_record(kind, data, enable):
    t, schema, raw = LOGICAL[kind]
    rows = data.draw(st.lists(st.one_of(st.none(), raw), min_size=1, max_size=20))
    storage = pa.int32() if t in (pa.date32(), pa.time32("ms")) else pa.int64()
    arr = pa.array(rows, storage).cast(t)
    c = conv(enable)
    got = from_arrow(c, "t", schema, arr)
    assert got is not None and got == per_record_encode(c, schema, arr)


@FAST
@given(data=st.data(), precision=st.integers(1, 38), enable=st.booleans(),
       numeric=st.booleans())
def test_decimal_columns_encode_as_per_record(data, precision, enable, numeric):
    import decimal

    scale = data.draw(st.integers(0, precision))
    digits = st.integers(-(10**precision) + 1, 10**precision - 1)
    rows = data.draw(st.lists(st.one_of(st.none(), digits), min_size=1, max_size=20))
    values = [None if v is None else decimal.Decimal(f"{v}e-{scale}") for v in rows]
    arr = pa.array(values, pa.decimal128(precision, scale))
    schema = arrow_type_to_connect(arr.type, optional=True)
    c = load_converter("json", {"schemas.enable": str(enable).lower(),
                                "decimal.format": "NUMERIC" if numeric else "BASE64"}, False)
    got = from_arrow(c, "t", schema, arr)
    assert got is not None and got == per_record_encode(c, schema, arr)


def test_a_database_row_with_every_logical_type_takes_the_columnar_path():
    import datetime as dt
    import decimal

    arr = pa.array([{"id": 1, "at": dt.datetime(1969, 12, 31, 23, 59, 59, 999_999),
                     "day": dt.date(2024, 1, 2), "price": decimal.Decimal("-3.45"),
                     "t": dt.time(1, 2, 3, 456_789)},
                    {"id": 2, "at": None, "day": None, "price": None, "t": None}],
                   pa.struct([("id", pa.int64()), ("at", pa.timestamp("us", tz="UTC")),
                              ("day", pa.date32()), ("price", pa.decimal128(10, 2)),
                              ("t", pa.time64("us"))]))
    schema = arrow_type_to_connect(arr.type, optional=False)
    c = conv(True)
    got = from_arrow(c, "t", schema, arr)
    assert got is not None and got == per_record_encode(c, schema, arr)
    payload = json.loads(got[0])["payload"]
    assert payload["at"] == -1 and payload["day"] == 19724 and payload["t"] == 3723456


# --- decoding epoch logical types (JdbcSink's timestamps, dates and times as columns) ---------

EPOCH_DECODE = {  # schema, the range the per-record decoder turns into values
    "timestamp": (timestamp_schema(True), -62_135_596_800_000, 253_402_300_799_999),
    "date": (date_schema(True), -719_162, 2_932_896),
    "time": (time_schema(True), 0, 86_399_999),
}


@FAST
@given(kind=st.sampled_from(sorted(EPOCH_DECODE)), data=st.data())
def test_epoch_logical_values_decode_as_columns_exactly_as_per_record(kind, data):
    """Timestamp, Date and Time payloads (epoch integers) decode into one column equal to
    the per-record values; a value the per-record decoder refuses (out of range, not an
    integer) sends the whole column record by record, where that record's error is named."""
    schema, lo, hi = EPOCH_DECODE[kind]
    struct = _struct(("id", INT64_SCHEMA), ("v", schema))
    prefix = conv()._compile_encoder(struct)[1]
    good = st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, 0]))
    bad = st.sampled_from([lo - 1, hi + 1, 2**63 - 1, -(2**63), 2**64, "1.5", "1e3", "true",
                           '"12"'])
    rows = data.draw(st.lists(st.one_of(st.none(), good), min_size=1, max_size=20))
    if data.draw(st.booleans()):
        rows[data.draw(st.integers(0, len(rows) - 1))] = data.draw(bad)
    values = [prefix + b'{"id":%d,"v":%s}}' % (i, b"null" if v is None else str(v).encode())
              for i, v in enumerate(rows)]
    got = check_decode(values)
    clean = all(v is None or (type(v) is int and lo <= v <= hi) for v in rows)
    assert (got is not None) == clean


@FAST
@given(data=st.data(), precision=st.integers(1, 40), optional=st.booleans())
def test_decimal_values_decode_as_columns_exactly_as_per_record(data, precision, optional):
    """Decimal payloads (base64 of the unscaled value, what JdbcSource's numerics carry)
    decode into one column equal to the per-record values; a value that is not base64, a
    number, or one wider than the schema's precision sends the column record by record."""
    import base64
    import decimal

    from kctl.api.arrow import PRECISION_PARAM
    from kctl.api.data import DECIMAL

    scale = data.draw(st.integers(0, min(precision, 12)))
    schema = Schema(Type.BYTES, optional=optional, name=DECIMAL, version=1,
                    parameters={"scale": str(scale), PRECISION_PARAM: str(precision)})
    struct = _struct(("id", INT64_SCHEMA), ("v", schema))
    prefix = conv()._compile_encoder(struct)[1]
    limit = 10**precision
    fits = st.one_of(st.integers(-limit + 1, limit - 1),
                     st.sampled_from([0, -1, limit - 1, -limit + 1]))
    wide = st.sampled_from([limit, -limit, 7 * limit, -limit - 1])
    rows = data.draw(st.lists(st.one_of(st.none(), fits) if optional else fits,
                              min_size=1, max_size=20))
    broken = data.draw(st.sampled_from([None, "wide", "not base64", "number"]))
    texts = []
    for v in rows:
        if v is None:
            texts.append(b"null")
        else:
            raw = v.to_bytes(max(1, (v + (v < 0)).bit_length() // 8 + 1), "big", signed=True)
            texts.append(b'"' + base64.b64encode(raw) + b'"')
    at = data.draw(st.integers(0, len(rows) - 1))
    if broken == "wide":
        v = data.draw(wide)
        raw = v.to_bytes((v + (v < 0)).bit_length() // 8 + 1, "big", signed=True)
        texts[at] = b'"' + base64.b64encode(raw) + b'"'
    elif broken == "not base64":
        texts[at] = b'"A=B"'
    elif broken == "number":
        texts[at] = b"12"
    values = [prefix + b'{"id":%d,"v":%s}}' % (i, t) for i, t in enumerate(texts)]
    got = check_decode(values)
    assert (got is not None) == (broken is None)
    if got is not None:
        assert [dict(v[2])["v"] for _, v in got] == [
            None if v is None else decimal.Decimal(v).scaleb(-scale, decimal.Context(prec=100))
            for v in rows]
