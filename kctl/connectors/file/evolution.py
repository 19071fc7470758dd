"""How an inferred json or csv schema evolves as lines arrive: the widening lattice over
Spark's types, each line's own type, and the conflicts that cannot widen.

Pure functions of values (pyspark's type objects need no JVM), so the lattice is checked
by hypothesis without a session (tests/connectors/test_file_evolution.py). It imports
pyspark: parsing.py imports it once the task has its session (a first import of pyspark
next to a session being built once deadlocked). A schema only
ever grows: every line's type is joined into it, so a field keeps the values it had and a
stream has at most as many schema versions as the lattice is high.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from kctl.connectors.file._common import CONFLICT_ERROR, CONFLICT_STRING

ERROR, STRING = CONFLICT_ERROR, CONFLICT_STRING

MAX_PRECISION = 38  # Spark's decimals
_INTEGRAL = {ByteType: 3, ShortType: 5, IntegerType: 10, LongType: 20}  # digits as a decimal
_RANK = {ByteType: 1, ShortType: 2, IntegerType: 3, LongType: 4}
# the strings Spark's json reader takes as a double (allowNonNumericNumbers)
NON_NUMERIC = frozenset({"NaN", "Infinity", "+Infinity", "-Infinity", "INF", "+INF", "-INF"})


class Conflict(Exception):
    """A value whose type cannot widen the schema's: where, and both types."""

    def __init__(self, path: str, had: str, got: str) -> None:
        super().__init__(path, had, got)
        self.path = path  # the field, dotted; `[]` for an array's elements; "" the line
        self.had = had  # the schema's type there
        self.got = got  # the line's

    def __str__(self) -> str:
        if not self.path:
            return f"the line is {self.got}, not an object"
        return (f"field {self.path!r} is {self.got} in this line but {self.had} in the "
                f"schema")


def type_name(t: DataType) -> str:
    return "null" if isinstance(t, NullType) else t.simpleString()


def _is_numeric(t: DataType) -> bool:
    return type(t) in _RANK or isinstance(t, DecimalType | FloatType | DoubleType)


def _as_decimal(t: DataType) -> DecimalType:
    return t if isinstance(t, DecimalType) else DecimalType(_INTEGRAL[type(t)], 0)


def _numeric(a: DataType, b: DataType) -> DataType:
    """int -> long -> double; integers and decimals meet in a decimal wide enough for both
    (a double beyond 38 digits); anything with a floating point is a double."""
    if type(a) in _RANK and type(b) in _RANK:
        return a if _RANK[type(a)] >= _RANK[type(b)] else b
    if isinstance(a, FloatType) and isinstance(b, FloatType):
        return a
    if isinstance(a, FloatType | DoubleType) or isinstance(b, FloatType | DoubleType):
        return DoubleType()
    da, db = _as_decimal(a), _as_decimal(b)
    scale = max(da.scale, db.scale)
    digits = max(da.precision - da.scale, db.precision - db.scale) + scale
    return DecimalType(digits, scale) if digits <= MAX_PRECISION else DoubleType()


def widen(had: DataType, got: DataType, conflict: str = ERROR, path: str = "",
          fixed: bool = False) -> DataType:
    """The least type holding both; raises Conflict where none does (number against
    string, object against scalar). With conflict=string such a field becomes a string,
    and a string field takes anything (as its JSON text). `fixed`: the schema was given,
    so it holds a value only as it is (its new fields are ignored, as Spark ignores them)."""
    if isinstance(got, NullType):
        return had
    if isinstance(had, NullType):
        if fixed:
            return had
        return got
    if had == got:
        return had
    if isinstance(had, StructType) and isinstance(got, StructType):
        fields = []
        names = set(had.names)
        theirs = {f.name: f for f in got.fields}
        for f in had.fields:
            g = theirs.get(f.name)
            t = f.dataType if g is None else widen(f.dataType, g.dataType, conflict,
                                                   _join(path, f.name), fixed)
            fields.append(f if t is f.dataType else StructField(f.name, t, True))
        if not fixed:
            fields.extend(StructField(f.name, f.dataType, True) for f in got.fields
                          if f.name not in names)
        return StructType(fields)
    if isinstance(had, ArrayType) and isinstance(got, ArrayType):
        element = widen(had.elementType, got.elementType, conflict, path + "[]", fixed)
        return had if element is had.elementType else ArrayType(element, True)
    if conflict == STRING and isinstance(had, StringType):
        return had
    if _is_numeric(had) and _is_numeric(got):
        t = _numeric(had, got)
        if not fixed or t == had:
            return t
    if isinstance(had, TimestampType | TimestampNTZType | DateType) and \
            isinstance(got, TimestampType | TimestampNTZType | DateType) and not fixed:
        return TimestampType() if not isinstance(had, DateType) or \
            not isinstance(got, DateType) else had
    if conflict == STRING and not fixed:
        return StringType()
    raise Conflict(path, type_name(had), type_name(got))


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def json_type(value: Any) -> DataType:
    """The type Spark's json inference gives one parsed value (None: null). Integers
    beyond a long are decimals, as Spark's; object fields keep their order."""
    if value is None:
        return NullType()
    if isinstance(value, bool):
        return BooleanType()
    if isinstance(value, int):
        if -(2**63) <= value < 2**63:
            return LongType()
        digits = len(str(abs(value)))
        return DecimalType(digits, 0) if digits <= MAX_PRECISION else DoubleType()
    if isinstance(value, float):
        return DoubleType()
    if isinstance(value, str):
        return StringType()
    if isinstance(value, dict):
        return StructType([StructField(k, json_type(v), True) for k, v in value.items()])
    if isinstance(value, list):
        element: DataType = NullType()
        for v in value:
            element = widen(element, json_type(v), STRING)
        return ArrayType(element, True)
    raise TypeError(f"not a json value: {type(value).__name__}")


def arrow_type(t: pa.DataType) -> DataType | None:
    """The type of a column Arrow's json reader inferred (an ISO time it took for a
    timestamp is the string it was); None for one Spark's inference would not give."""
    if pa.types.is_struct(t):
        fields = [(f.name, arrow_type(f.type)) for f in t]
        if any(ft is None for _, ft in fields):
            return None
        return StructType([StructField(n, ft, True) for n, ft in fields])
    if pa.types.is_list(t):
        element = arrow_type(t.value_type)
        return None if element is None else ArrayType(element, True)
    if pa.types.is_timestamp(t) or pa.types.is_string(t):
        return StringType()
    return {pa.null(): NullType(), pa.bool_(): BooleanType(), pa.int64(): LongType(),
            pa.float64(): DoubleType()}.get(t)


def json_kind(value: Any) -> str:
    return {bool: "boolean", int: "number", float: "number", str: "string", dict: "object",
            list: "array"}.get(type(value), "null")


_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(NaN|Infinity|Inf)")


def csv_type(text: str | None) -> DataType:
    """The type a csv value asks for (Spark's csv inference, for the kinds that widen):
    integers, longs, decimals beyond a long, doubles, booleans; anything else a string.
    An empty value is null."""
    if text is None or text == "":
        return NullType()
    if _INT.fullmatch(text):
        n = int(text)
        if -(2**31) <= n < 2**31:
            return IntegerType()
        return json_type(n)
    if _FLOAT.fullmatch(text):
        return DoubleType()
    if text.lower() in ("true", "false"):
        return BooleanType()
    return StringType()


def fits_double(value: Any) -> bool:
    """A string Spark reads into a double field (NaN and the infinities)."""
    return isinstance(value, str) and value in NON_NUMERIC


def _fits(schema: DataType, value: Any) -> bool:
    """The non-numeric strings FileSink writes for a double's NaN and infinities, read
    back into a double field, are no conflict (Spark reads them as the double)."""
    return isinstance(schema, FloatType | DoubleType) and fits_double(value)


@dataclass(frozen=True, slots=True)
class Evolution:
    """What a run of lines does to a schema: the schema each line starts a version of
    (by line index, in order), and the lines that conflict with it."""

    versions: tuple[tuple[int, StructType], ...]
    conflicts: dict[int, Conflict]

    @property
    def last(self) -> StructType:
        return self.versions[-1][1]


def evolve(schema: StructType | None, types: Iterable[tuple[int, DataType | Any]],
           conflict: str = ERROR, fixed: bool = False) -> Evolution:
    """Join each line's type into the schema in line order. `types`: (index, type) of the
    lines to look at; a type that is not a struct (a line that is no object) conflicts
    with the schema itself, whatever `conflict` says."""
    current = schema if schema is not None else StructType([])
    versions: list[tuple[int, StructType]] = [(0, current)]
    conflicts: dict[int, Conflict] = {}
    # line types already known to fit the schema, by identity (held, so ids stay theirs)
    seen: dict[int, DataType] = {}
    for i, t in types:
        if id(t) in seen:
            continue
        if not isinstance(t, StructType):
            conflicts[i] = Conflict("", "struct", type_name(t))
            continue
        try:
            new = widen(current, t, conflict, fixed=fixed)
        except Conflict as c:
            conflicts[i] = c
            continue
        if new != current:
            current = new  # type: ignore[assignment]
            versions.append((i, current))
            seen.clear()
        seen[id(t)] = t
    return Evolution(tuple(versions), conflicts)


def _shape(value: Any) -> Any:
    """A cheap hashable stand-in for a value's type: lines of one shape share one type."""
    if isinstance(value, dict):
        return tuple((k, _shape(v)) for k, v in value.items())
    if isinstance(value, list):
        return [_shape(v) for v in value].__repr__() if len(value) > 1 else \
            ("[", _shape(value[0]) if value else None)
    if isinstance(value, int) and not isinstance(value, bool) and \
            not -(2**63) <= value < 2**63:
        return ("big", len(str(abs(value))))
    return type(value)


def json_line_types(texts: Sequence[str | None], schema: DataType | None = None
                    ) -> Iterable[tuple[int, DataType]]:
    """Each valid json line's type (lines json cannot read are left to Spark, which says
    whether they are malformed); lines of one shape give the same type object. A double's
    NaN written as a string stays a double."""
    types: dict[Any, DataType] = {}
    loads = json.loads
    for i, text in enumerate(texts):
        if text is None:
            continue
        try:
            value = loads(text)
        except ValueError:
            continue
        if isinstance(schema, StructType) and isinstance(value, dict):
            value = _doubles_kept(schema, value)
        shape = _shape(value)
        t = types.get(shape)
        if t is None:
            t = types[shape] = json_type(value)
        yield i, t


def _doubles_kept(schema: StructType, value: dict[str, Any]) -> dict[str, Any]:
    out = value
    for f in schema.fields:
        v = value.get(f.name)
        if _fits(f.dataType, v):
            out = {**out, f.name: math.nan}
        elif isinstance(f.dataType, StructType) and isinstance(v, dict):
            kept = _doubles_kept(f.dataType, v)
            if kept is not v:
                out = {**out, f.name: kept}
    return out


def csv_line_types(texts: Sequence[str | None], names: Sequence[str], delimiter: str,
                   schema: StructType | None = None) -> Iterable[tuple[int, DataType]]:
    """Each csv line's type, its values named by the file's header. Text in a column of
    dates, times or booleans is left for Spark to read (it knows their formats)."""
    kept = {f.name for f in (schema.fields if schema is not None else ())
            if isinstance(f.dataType, DateType | TimestampType | TimestampNTZType)}
    types: dict[tuple[DataType, ...], StructType] = {}
    for i, text in enumerate(texts):
        if text is None:
            continue
        values = next(csv.reader([text], delimiter=delimiter), [])
        kinds = []
        for n, v in zip(names, values, strict=False):
            t = csv_type(v)
            kinds.append(NullType() if n in kept and isinstance(t, StringType) else t)
        key = tuple(kinds)
        if key not in types:
            types[key] = StructType([StructField(n, t, True)
                                     for n, t in zip(names, kinds, strict=False)])
        yield i, types[key]


def emitted(t: DataType) -> DataType:
    """The type records carry: fields that were only ever null are left out (a later value
    adds them), and an array that was only ever empty holds strings, as Spark infers."""
    if isinstance(t, StructType):
        return StructType([StructField(f.name, emitted(f.dataType), True)
                           for f in t.fields if not isinstance(f.dataType, NullType)])
    if isinstance(t, ArrayType):
        e = t.elementType
        return ArrayType(StringType() if isinstance(e, NullType) else emitted(e), True)
    return t
