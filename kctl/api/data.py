"""Kafka Connect's data model: schemas, structs and their validation.

Connectors describe their records with these so converters and transforms can work
on any connector's data without knowing its source format.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from kctl.errors import DataError


def a(word: str) -> str:
    """The word with its indefinite article, for messages: `an array`, `a struct`."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


class Type(Enum):
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    BOOLEAN = "boolean"
    STRING = "string"
    BYTES = "bytes"
    ARRAY = "array"
    MAP = "map"
    STRUCT = "struct"

    @property
    def is_primitive(self) -> bool:
        return self not in (Type.ARRAY, Type.MAP, Type.STRUCT)


_INT_RANGES = {
    Type.INT8: (-(2**7), 2**7 - 1),
    Type.INT16: (-(2**15), 2**15 - 1),
    Type.INT32: (-(2**31), 2**31 - 1),
    Type.INT64: (-(2**63), 2**63 - 1),
}

# Logical type names, identical to Kafka Connect's so JSON envelopes interoperate.
DECIMAL = "org.apache.kafka.connect.data.Decimal"
DATE = "org.apache.kafka.connect.data.Date"
TIME = "org.apache.kafka.connect.data.Time"
TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"

# A decimal whose every value has its own scale (PostgreSQL's unconstrained `numeric`, and
# numerics wider than Arrow's 76 digits): Debezium's VariableScaleDecimal, a struct of the
# scale (int32) and the unscaled value (bytes, big-endian two's complement, as Decimal's),
# so a sink that knows Debezium's types reads it too.
VARIABLE_SCALE_DECIMAL = "io.debezium.data.VariableScaleDecimal"

# Schema parameters that tell a sink which column a value came from (JdbcSource sets them;
# a sink without them keeps Kafka Connect's meaning). `kctl.temporal` is the source
# column's kind: `timestamp` (no time zone), `timestamptz` or `time`. On an INT64 or
# STRING field (JdbcSource's timestamp.granularity other than connect_logical),
# `kctl.temporal.encoding` says how the value holds it: `nanos_long` (epoch nanoseconds,
# for a time nanoseconds of the day), `nanos_string` (the same as decimal text) or
# `nanos_iso_datetime_string` (ISO text, to the nanosecond; a time is HH:MM:SS.nnnnnnnnn).
TEMPORAL_PARAM = "kctl.temporal"
TEMPORAL_ENCODING_PARAM = "kctl.temporal.encoding"
TEMPORAL_KINDS = ("timestamp", "timestamptz", "time")
TEMPORAL_ENCODINGS = ("nanos_long", "nanos_string", "nanos_iso_datetime_string")


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    index: int
    schema: Schema


@dataclass(frozen=True, slots=True, eq=True)
class Schema:
    """An immutable schema; build one with `SchemaBuilder` or the module constants."""

    type: Type
    optional: bool = False
    default: Any = None
    name: str | None = None
    version: int | None = None
    doc: str | None = None
    parameters: Mapping[str, str] | None = None
    fields: tuple[Field, ...] = ()
    key_schema: Schema | None = None
    value_schema: Schema | None = None
    _by_name: Mapping[str, Field] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.type is Type.STRUCT:
            object.__setattr__(self, "_by_name", {f.name: f for f in self.fields})
        if self.default is not None:
            validate_value(self, self.default, "default")

    def field(self, name: str) -> Field | None:
        if self.type is not Type.STRUCT:
            raise DataError(f"cannot look up field {name!r} on {a(self.type.value)} schema")
        return self._by_name.get(name)

    def __hash__(self) -> int:
        return hash((self.type, self.optional, self.name, self.version, self.fields,
                     self.key_schema, self.value_schema))


class SchemaBuilder:
    """Fluent builder, as Kafka Connect's SchemaBuilder."""

    def __init__(self, type_: Type):
        self._type = type_
        self._optional = False
        self._default: Any = None
        self._name: str | None = None
        self._version: int | None = None
        self._doc: str | None = None
        self._params: dict[str, str] = {}
        self._fields: list[Field] = []
        self._key: Schema | None = None
        self._value: Schema | None = None

    @classmethod
    def struct(cls) -> SchemaBuilder:
        return cls(Type.STRUCT)

    @classmethod
    def array(cls, value_schema: Schema) -> SchemaBuilder:
        b = cls(Type.ARRAY)
        b._value = value_schema
        return b

    @classmethod
    def map(cls, key_schema: Schema, value_schema: Schema) -> SchemaBuilder:
        b = cls(Type.MAP)
        b._key, b._value = key_schema, value_schema
        return b

    def optional(self) -> SchemaBuilder:
        self._optional = True
        return self

    def required(self) -> SchemaBuilder:
        self._optional = False
        return self

    def default_value(self, value: Any) -> SchemaBuilder:
        self._default = value
        return self

    def name(self, name: str) -> SchemaBuilder:
        self._name = name
        return self

    def version(self, version: int) -> SchemaBuilder:
        self._version = version
        return self

    def doc(self, doc: str) -> SchemaBuilder:
        self._doc = doc
        return self

    def parameter(self, key: str, value: str) -> SchemaBuilder:
        self._params[key] = value
        return self

    def field(self, name: str, schema: Schema) -> SchemaBuilder:
        if self._type is not Type.STRUCT:
            raise DataError("fields can only be added to struct schemas")
        if any(f.name == name for f in self._fields):
            raise DataError(f"duplicate field {name!r}")
        self._fields.append(Field(name, len(self._fields), schema))
        return self

    def build(self) -> Schema:
        return Schema(
            type=self._type,
            optional=self._optional,
            default=self._default,
            name=self._name,
            version=self._version,
            doc=self._doc,
            parameters=dict(self._params) or None,
            fields=tuple(self._fields),
            key_schema=self._key,
            value_schema=self._value,
        )


def _prim(t: Type, optional: bool = False) -> Schema:
    return Schema(t, optional=optional)


INT8_SCHEMA = _prim(Type.INT8)
INT16_SCHEMA = _prim(Type.INT16)
INT32_SCHEMA = _prim(Type.INT32)
INT64_SCHEMA = _prim(Type.INT64)
FLOAT32_SCHEMA = _prim(Type.FLOAT32)
FLOAT64_SCHEMA = _prim(Type.FLOAT64)
BOOLEAN_SCHEMA = _prim(Type.BOOLEAN)
STRING_SCHEMA = _prim(Type.STRING)
BYTES_SCHEMA = _prim(Type.BYTES)
OPTIONAL_INT8_SCHEMA = _prim(Type.INT8, True)
OPTIONAL_INT16_SCHEMA = _prim(Type.INT16, True)
OPTIONAL_INT32_SCHEMA = _prim(Type.INT32, True)
OPTIONAL_INT64_SCHEMA = _prim(Type.INT64, True)
OPTIONAL_FLOAT32_SCHEMA = _prim(Type.FLOAT32, True)
OPTIONAL_FLOAT64_SCHEMA = _prim(Type.FLOAT64, True)
OPTIONAL_BOOLEAN_SCHEMA = _prim(Type.BOOLEAN, True)
OPTIONAL_STRING_SCHEMA = _prim(Type.STRING, True)
OPTIONAL_BYTES_SCHEMA = _prim(Type.BYTES, True)


def timestamp_schema(optional: bool = False) -> Schema:
    return Schema(Type.INT64, optional=optional, name=TIMESTAMP, version=1)


def date_schema(optional: bool = False) -> Schema:
    return Schema(Type.INT32, optional=optional, name=DATE, version=1)


def time_schema(optional: bool = False) -> Schema:
    return Schema(Type.INT32, optional=optional, name=TIME, version=1)


def decimal_schema(scale: int, optional: bool = False) -> Schema:
    return Schema(Type.BYTES, optional=optional, name=DECIMAL, version=1,
                  parameters={"scale": str(scale)})


def variable_scale_decimal_schema(optional: bool = False) -> Schema:
    """Debezium's VariableScaleDecimal: struct {scale: int32, value: bytes}."""
    return Schema(Type.STRUCT, optional=optional, name=VARIABLE_SCALE_DECIMAL, version=1,
                  doc="Variable scaled decimal",
                  fields=(Field("scale", 0, INT32_SCHEMA), Field("value", 1, BYTES_SCHEMA)))


def temporal_kind(schema: Schema) -> str | None:
    """The source column's kind a schema carries (`kctl.temporal`), if any."""
    kind = (schema.parameters or {}).get(TEMPORAL_PARAM)
    return kind if kind in TEMPORAL_KINDS else None


def temporal_encoding(schema: Schema) -> str | None:
    """How an INT64/STRING field holds a timestamp or time (`kctl.temporal.encoding`)."""
    enc = (schema.parameters or {}).get(TEMPORAL_ENCODING_PARAM)
    if enc in TEMPORAL_ENCODINGS and temporal_kind(schema) and schema.name is None and \
            schema.type is (Type.INT64 if enc == "nanos_long" else Type.STRING):
        return enc
    return None


_PY_TYPES: dict[Type, tuple[type, ...]] = {
    Type.INT8: (int,),
    Type.INT16: (int,),
    Type.INT32: (int,),
    Type.INT64: (int,),
    Type.FLOAT32: (float, int),
    Type.FLOAT64: (float, int),
    Type.BOOLEAN: (bool,),
    Type.STRING: (str,),
    Type.BYTES: (bytes, bytearray, memoryview),
    Type.ARRAY: (list, tuple),
    Type.MAP: (dict, Mapping),
}

_LOGICAL_TYPES: dict[str, tuple[type, ...]] = {
    DECIMAL: (_decimal.Decimal,),
    DATE: (_dt.date,),
    TIME: (_dt.time,),
    TIMESTAMP: (_dt.datetime,),
}


def _same_shape(a: Schema, b: Schema) -> bool:
    """A struct default is built before its schema exists, so it carries the schema
    without the default (and maybe without `optional`): same fields, name and version."""
    return (a.type, a.name, a.version, a.fields) == (b.type, b.name, b.version, b.fields)


def validate_value(schema: Schema, value: Any, where: str = "value") -> None:
    """Raise DataError when `value` does not fit `schema`, naming the path that fails."""
    if value is None:
        if schema.optional or schema.default is not None:
            return
        raise DataError(f"{where}: null for a required {schema.type.value} schema")
    if schema.name in _LOGICAL_TYPES and isinstance(value, _LOGICAL_TYPES[schema.name]):
        return
    if schema.type is Type.STRUCT:
        if not isinstance(value, Struct):
            raise DataError(f"{where}: expected Struct, got {type(value).__name__}")
        if value.schema != schema and not (where == "default" and _same_shape(value.schema, schema)):
            raise DataError(f"{where}: struct schema does not match")
        value.validate()
        return
    ok = _PY_TYPES[schema.type]
    if not isinstance(value, ok) or (schema.type is not Type.BOOLEAN and isinstance(value, bool)
                                     and schema.type in _INT_RANGES):
        raise DataError(f"{where}: expected {schema.type.value}, got {type(value).__name__}")
    rng = _INT_RANGES.get(schema.type)
    if rng and isinstance(value, int) and not rng[0] <= value <= rng[1]:
        raise DataError(f"{where}: {value} out of range for {schema.type.value}")
    if schema.type is Type.ARRAY and schema.value_schema is not None and isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            validate_value(schema.value_schema, v, f"{where}[{i}]")
    elif (schema.type is Type.MAP and schema.key_schema and schema.value_schema
          and isinstance(value, Mapping)):
        for k, v in value.items():
            validate_value(schema.key_schema, k, f"{where} key")
            validate_value(schema.value_schema, v, f"{where}[{k!r}]")


class Struct:
    """A record value with a STRUCT schema; fields are validated on put and on validate()."""

    __slots__ = ("_values", "schema")

    def __init__(self, schema: Schema, values: Mapping[str, Any] | None = None):
        if schema.type is not Type.STRUCT:
            raise DataError(f"Struct needs a struct schema, got {schema.type.value}")
        self.schema = schema
        self._values: list[Any] = [None] * len(schema.fields)
        if values:
            for k, v in values.items():
                self.put(k, v)

    def _field(self, name: str) -> Field:
        f = self.schema.field(name)
        if f is None:
            raise DataError(f"{name!r} is not a field of {self.schema.name or 'this struct'}")
        return f

    def put(self, name: str, value: Any) -> Struct:
        f = self._field(name)
        validate_value(f.schema, value, name)
        self._values[f.index] = value
        return self

    def get(self, name: str) -> Any:
        f = self._field(name)
        v = self._values[f.index]
        return f.schema.default if v is None else v

    def get_without_default(self, name: str) -> Any:
        return self._values[self._field(name).index]

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def __setitem__(self, name: str, value: Any) -> None:
        self.put(name, value)

    def validate(self) -> None:
        for f in self.schema.fields:
            validate_value(f.schema, self._values[f.index], f.name)

    def items(self) -> Iterator[tuple[str, Any]]:
        for f in self.schema.fields:
            yield f.name, self.get(f.name)

    def to_dict(self) -> dict[str, Any]:
        """Plain Python view, nested structs included (for schemaless sinks and tests)."""
        return {k: v.to_dict() if isinstance(v, Struct) else v for k, v in self.items()}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Struct) and self.schema == other.schema and \
            self._values == other._values

    def __hash__(self) -> int:
        return hash((self.schema, tuple(map(repr, self._values))))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.items())
        return f"Struct{{{inner}}}"


@dataclass(frozen=True, slots=True)
class SchemaAndValue:
    schema: Schema | None
    value: Any


NULL_SCHEMA_AND_VALUE = SchemaAndValue(None, None)
