"""Field-level SMTs: InsertField, ReplaceField, MaskField, Cast, ValueToKey, ExtractField,
HoistField and Flatten, each with Kafka Connect's config names and semantics.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import struct as _struct
from collections.abc import Mapping
from typing import Any

from kctl.api.config import NO_DEFAULT, ConfigDef, ConfigType, Importance, NonEmptyString
from kctl.api.data import (
    DATE,
    DECIMAL,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    TIME,
    TIMESTAMP,
    Schema,
    SchemaBuilder,
    Struct,
    Type,
    timestamp_schema,
)
from kctl.api.records import ConnectRecord
from kctl.errors import ConfigError, DataError
from kctl.transforms._base import (
    REPLACE_NULL_DOC,
    KeyOrValue,
    SchemaCache,
    copy_basics,
    field_value,
    require_map,
    require_map_or_null,
    require_sink_record,
    require_struct,
    require_struct_or_null,
)


def _non_empty_list(name: str, value: Any) -> None:
    if not value:
        raise ConfigError("Empty list", key=name)


def _replace_null(cd: ConfigDef) -> ConfigDef:
    return cd.define("replace.null.with.default", ConfigType.BOOLEAN, True, None,
                     Importance.MEDIUM, REPLACE_NULL_DOC)


# --- InsertField ------------------------------------------------------------------------------

_OPT_DOC = "Suffix with ! to make this a required field, or ? to keep it optional (the default)."


def _insertion_spec(spec: str | None) -> tuple[str, bool] | None:
    if spec is None:
        return None
    if spec.endswith("?"):
        return spec[:-1], True
    if spec.endswith("!"):
        return spec[:-1], False
    return spec, True


class InsertField(KeyOrValue):
    """Insert the topic, partition, offset, timestamp or a static value as a field."""

    PURPOSE = "field insertion"
    CONFIG_DEF = _replace_null(
        ConfigDef()
        .define("topic.field", ConfigType.STRING, None, None, Importance.MEDIUM,
                "Field name for Kafka topic. " + _OPT_DOC)
        .define("partition.field", ConfigType.STRING, None, None, Importance.MEDIUM,
                "Field name for Kafka partition. " + _OPT_DOC)
        .define("offset.field", ConfigType.STRING, None, None, Importance.MEDIUM,
                "Field name for Kafka offset - only applicable to sink connectors. " + _OPT_DOC)
        .define("timestamp.field", ConfigType.STRING, None, None, Importance.MEDIUM,
                "Field name for record timestamp. " + _OPT_DOC)
        .define("static.field", ConfigType.STRING, None, None, Importance.MEDIUM,
                "Field name for static data field. " + _OPT_DOC)
        .define("static.value", ConfigType.STRING, None, None, Importance.MEDIUM,
                "Static field value, if field name configured."))

    def configured(self) -> None:
        c = self.cfg
        self.topic_field = _insertion_spec(c["topic.field"])
        self.partition_field = _insertion_spec(c["partition.field"])
        self.offset_field = _insertion_spec(c["offset.field"])
        self.timestamp_field = _insertion_spec(c["timestamp.field"])
        self.static_field = _insertion_spec(c["static.field"])
        self.static_value = c["static.value"]
        self.replace_null = c["replace.null.with.default"]
        if not any((self.topic_field, self.partition_field, self.offset_field,
                    self.timestamp_field, self.static_field)):
            raise ConfigError("No field insertion configured", key="topic.field")
        if self.static_field and self.static_value is None:
            raise ConfigError(f"No value specified for static field: {self.static_field[0]}",
                              key="static.value")
        self._schemas = SchemaCache()

    def apply(self, record: ConnectRecord) -> Any:
        value = self.operating_value(record)
        if value is None:
            return record
        if self.operating_schema(record) is None:
            return self._schemaless(record, require_map(value, self.PURPOSE))
        return self._with_schema(record, require_struct(value, self.PURPOSE))

    def _inserts(self, record: ConnectRecord, with_schema: bool) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        if self.topic_field:
            out.append((self.topic_field[0], record.topic))
        if self.partition_field and record.kafka_partition is not None:
            out.append((self.partition_field[0], record.kafka_partition))
        if self.offset_field:
            out.append((self.offset_field[0],
                        require_sink_record(record, self.PURPOSE).kafka_offset))
        if self.timestamp_field and record.timestamp is not None:
            ts: Any = record.timestamp
            if with_schema:
                ts = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ts)
            out.append((self.timestamp_field[0], ts))
        if self.static_field and self.static_value is not None:
            out.append((self.static_field[0], self.static_value))
        return out

    def _schemaless(self, record: ConnectRecord, value: Mapping[str, Any]) -> Any:
        updated = dict(value)
        updated.update(self._inserts(record, False))
        return self.new_record(record, None, updated)

    def _build_schema(self, schema: Schema) -> Schema:
        b = copy_basics(schema, Type.STRUCT)
        for f in schema.fields:
            b.field(f.name, f.schema)
        for spec, opt_schema, req_schema in (
            (self.topic_field, OPTIONAL_STRING_SCHEMA, Schema(Type.STRING)),
            (self.partition_field, OPTIONAL_INT32_SCHEMA, Schema(Type.INT32)),
            (self.offset_field, OPTIONAL_INT64_SCHEMA, Schema(Type.INT64)),
            (self.timestamp_field, timestamp_schema(True), timestamp_schema()),
            (self.static_field, OPTIONAL_STRING_SCHEMA, Schema(Type.STRING)),
        ):
            if spec:
                b.field(spec[0], opt_schema if spec[1] else req_schema)
        if schema.optional:
            b.optional()
        return b.build()

    def _with_schema(self, record: ConnectRecord, value: Struct) -> Any:
        schema = self._schemas.get_or_build(value.schema, self._build_schema)
        updated = Struct(schema)
        for f in value.schema.fields:
            updated.put(f.name, field_value(value, f.name, self.replace_null))
        for name, v in self._inserts(record, True):
            updated.put(name, v)
        return self.new_record(record, schema, updated)


class InsertFieldKey(InsertField):
    target = "key"


class InsertFieldValue(InsertField):
    target = "value"


# --- ReplaceField -----------------------------------------------------------------------------


def _parse_renames(name: str, mappings: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in mappings:
        parts = m.split(":")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise ConfigError(f"Invalid rename mapping: {m}", key=name)
        out[parts[0]] = parts[1]
    return out


class ReplaceField(KeyOrValue):
    """Keep (`include`), drop (`exclude`) or rename (`renames=old:new`) fields."""

    PURPOSE = "field replacement"
    CONFIG_DEF = _replace_null(
        ConfigDef()
        .define("exclude", ConfigType.LIST, [], None, Importance.MEDIUM,
                "Fields to exclude. This takes precedence over the fields to include.")
        .define("include", ConfigType.LIST, [], None, Importance.MEDIUM,
                "Fields to include. If specified, only these fields will be used.")
        .define("renames", ConfigType.LIST, [], _parse_renames, Importance.MEDIUM,
                "Field rename mappings, e.g. foo:bar,abc:xyz."))

    def configured(self) -> None:
        self.exclude = set(self.cfg["exclude"])
        self.include = set(self.cfg["include"])
        self.renames = _parse_renames("renames", self.cfg["renames"])
        self.replace_null = self.cfg["replace.null.with.default"]
        self._schemas = SchemaCache()

    def _keep(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def apply(self, record: ConnectRecord) -> Any:
        value = self.operating_value(record)
        if value is None:
            return record
        if self.operating_schema(record) is None:
            m = require_map(value, self.PURPOSE)
            updated = {self.renames.get(k, k): v for k, v in m.items() if self._keep(k)}
            return self.new_record(record, None, updated)
        s = require_struct(value, self.PURPOSE)
        schema = self._schemas.get_or_build(s.schema, self._build_schema)
        updated_struct = Struct(schema)
        for f in s.schema.fields:
            if self._keep(f.name):
                updated_struct.put(self.renames.get(f.name, f.name),
                                   field_value(s, f.name, self.replace_null))
        return self.new_record(record, schema, updated_struct)

    def _build_schema(self, schema: Schema) -> Schema:
        b = copy_basics(schema, Type.STRUCT)
        for f in schema.fields:
            if self._keep(f.name):
                b.field(self.renames.get(f.name, f.name), f.schema)
        if schema.optional:
            b.optional()
        return b.build()


class ReplaceFieldKey(ReplaceField):
    target = "key"


class ReplaceFieldValue(ReplaceField):
    target = "value"


# --- MaskField --------------------------------------------------------------------------------

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _mask_null(value: Any) -> Any:
    """The 'empty' value of the same type, as Kafka's MaskField without a replacement."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0
    if isinstance(value, float):
        return 0.0
    if isinstance(value, decimal.Decimal):
        return decimal.Decimal(0)
    if isinstance(value, dt.datetime):
        return _EPOCH if value.tzinfo else _EPOCH.replace(tzinfo=None)
    if isinstance(value, dt.date):
        return dt.date(1970, 1, 1)
    if isinstance(value, dt.time):
        return dt.time(0)
    if isinstance(value, str):
        return ""
    if isinstance(value, list | tuple):
        return []
    if isinstance(value, Mapping):
        return {}
    raise DataError(f"Cannot mask value of type: {type(value).__name__}")


def _mask_with(value: Any, replacement: str) -> Any:
    try:
        if isinstance(value, bool):
            raise DataError("Cannot mask value of type bool with custom replacement.")
        if isinstance(value, int):
            return int(replacement)
        if isinstance(value, float):
            return float(replacement)
        if isinstance(value, decimal.Decimal):
            return decimal.Decimal(replacement)
        if isinstance(value, str):
            return replacement
    except (ValueError, decimal.InvalidOperation) as e:
        raise DataError(f"Unable to convert {replacement} (str) to number") from e
    raise DataError(f"Cannot mask value of type {type(value).__name__} with custom replacement.")


_FLOATS = (Type.FLOAT32, Type.FLOAT64)


class MaskField(KeyOrValue):
    """Replace field values with their type's empty value, or with `replacement`."""

    PURPOSE = "mask fields"
    CONFIG_DEF = _replace_null(
        ConfigDef()
        .define("fields", ConfigType.LIST, NO_DEFAULT, _non_empty_list, Importance.HIGH,
                "Names of fields to mask.")
        .define("replacement", ConfigType.STRING, None, NonEmptyString(), Importance.LOW,
                "Custom value replacement, that will be applied to all 'fields' values "
                "(numeric or non-empty string values only)."))

    def configured(self) -> None:
        if not self.cfg["fields"]:
            raise ConfigError("Missing required configuration \"fields\" which has no default "
                              "value.", key="fields")
        self.fields = set(self.cfg["fields"])
        self.replacement = self.cfg["replacement"]
        self.replace_null = self.cfg["replace.null.with.default"]

    def _masked(self, v: Any) -> Any:
        if v is None:
            return None
        return _mask_null(v) if self.replacement is None else _mask_with(v, self.replacement)

    def apply(self, record: ConnectRecord) -> Any:
        value = self.operating_value(record)
        if self.operating_schema(record) is None:
            m = require_map(value, self.PURPOSE)
            updated = dict(m)
            for f in self.fields:
                updated[f] = self._masked(m.get(f))
            return self.new_record(record, None, updated)
        s = require_struct(value, self.PURPOSE)
        out = Struct(s.schema)
        for f in s.schema.fields:
            v = field_value(s, f.name, self.replace_null)
            if f.name in self.fields:
                if f.schema.type in _FLOATS and isinstance(v, int) and not isinstance(v, bool):
                    v = float(v)  # a float field may hold an int: mask it as the float it is
                v = self._masked(v)
            out.put(f.name, v)
        return self.new_record(record, s.schema, out)


class MaskFieldKey(MaskField):
    target = "key"


class MaskFieldValue(MaskField):
    target = "value"


# --- Cast -------------------------------------------------------------------------------------

_CAST_IN = {Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.FLOAT32, Type.FLOAT64,
            Type.BOOLEAN, Type.STRING, Type.BYTES}
_CAST_OUT = _CAST_IN - {Type.BYTES}
_LOGICAL_NAMES = {DATE, TIME, TIMESTAMP, DECIMAL}
_BITS = {Type.INT8: 8, Type.INT16: 16, Type.INT32: 32, Type.INT64: 64}


def _parse_cast_spec(name: str, mappings: list[str]) -> dict[str | None, Type]:
    if not mappings:
        raise ConfigError("Must specify at least one field to cast.", key=name)
    out: dict[str | None, Type] = {}
    whole = False
    for m in mappings:
        parts = m.split(":")
        if len(parts) > 2:
            raise ConfigError(f"Invalid cast mapping: {m}", key=name)
        type_name = parts[-1].strip()
        try:
            t = Type[type_name.upper()]
        except KeyError:
            raise ConfigError(f"Invalid type found in casting spec: {type_name}", key=name) from None
        if t not in _CAST_OUT:
            raise ConfigError(f"Cast transformation does not support casting to {t.name}; "
                              f"supported types are {sorted(x.name for x in _CAST_OUT)}", key=name)
        if len(parts) == 1:
            whole = True
            out[None] = t
        else:
            out[parts[0].strip()] = t
    if whole and len(mappings) > 1:
        raise ConfigError("Cast transformations that specify a type to cast the entire value to "
                          "may only specify a single cast in their spec", key=name)
    return out


def _infer_type(value: Any) -> Type | None:
    if isinstance(value, bool):
        return Type.BOOLEAN
    if isinstance(value, int):
        return Type.INT64
    if isinstance(value, float | decimal.Decimal):
        return Type.FLOAT64
    if isinstance(value, str):
        return Type.STRING
    if isinstance(value, bytes | bytearray | memoryview):
        return Type.BYTES
    if isinstance(value, dt.date | dt.time):
        return Type.INT64
    if isinstance(value, list | tuple):
        return Type.ARRAY
    if isinstance(value, Mapping):
        return Type.MAP
    if isinstance(value, Struct):
        return Type.STRUCT
    return None


def _wrap(n: int, bits: int) -> int:
    """Java's narrowing conversion: keep the low bits, two's complement."""
    n &= (1 << bits) - 1
    return n - (1 << bits) if n >> (bits - 1) else n


def _logical_to_number(schema: Schema | None, value: Any) -> Any:
    name = schema.name if schema is not None else None
    if name == DATE and isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days
    if name == TIME and isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    if name == TIMESTAMP and isinstance(value, dt.datetime):
        v = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        d = v - _EPOCH
        return (d.days * 86_400 + d.seconds) * 1000 + d.microseconds // 1000
    return value


def _to_string(value: Any, schema: Schema | None) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        v = value.astimezone(dt.UTC) if value.tzinfo else value
        return v.strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond // 1000:03d}Z"
    if isinstance(value, dt.date):
        return value.strftime("%Y-%m-%d")
    if isinstance(value, dt.time):
        return value.strftime("%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(value).decode("ascii")
    return str(value)


_TS_SCHEMA = Schema(Type.INT64, name=TIMESTAMP)
_DATE_SCHEMA = Schema(Type.INT32, name=DATE)
_TIME_SCHEMA = Schema(Type.INT32, name=TIME)


def cast_value(schema: Schema | None, value: Any, target: Type) -> Any:
    """Cast one value as Kafka's Cast does (Java narrowing for numbers, base64 for bytes)."""
    if value is None:
        return None
    inferred = schema.type if schema is not None else _infer_type(value)
    if inferred is None:
        raise DataError(f"Cast transformation was passed a value of type {type(value).__name__} "
                        "which is not supported by Connect's data API")
    if inferred not in _CAST_IN:
        raise DataError(f"Cast transformation does not support casting from {inferred.name}; "
                        f"supported types are {sorted(x.name for x in _CAST_IN)}")
    if inferred in _FLOATS and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)  # a float field may hold an int: cast it as the float it is
    if target is Type.STRING:
        return _to_string(value, schema)
    if schema is not None:
        value = _logical_to_number(schema, value)
    elif isinstance(value, dt.datetime):
        value = _logical_to_number(_TS_SCHEMA, value)
    elif isinstance(value, dt.date):
        value = _logical_to_number(_DATE_SCHEMA, value)
    elif isinstance(value, dt.time):
        value = _logical_to_number(_TIME_SCHEMA, value)
    try:
        if target in _BITS:
            if isinstance(value, bool):
                return int(value)
            if isinstance(value, str):
                n = int(value.strip())
                lo, hi = -(1 << (_BITS[target] - 1)), (1 << (_BITS[target] - 1)) - 1
                if not lo <= n <= hi:
                    raise ValueError(f"{n} out of range")
                return n
            if isinstance(value, int | float | decimal.Decimal):
                return _wrap(int(value), _BITS[target])
        elif target in (Type.FLOAT32, Type.FLOAT64):
            if isinstance(value, bool):
                return 1.0 if value else 0.0
            if isinstance(value, int | float | decimal.Decimal | str):
                f = float(value)
                if target is Type.FLOAT32:
                    f = _struct.unpack("f", _struct.pack("f", f))[0]
                return f
        elif target is Type.BOOLEAN:
            if isinstance(value, bool):
                return value
            if isinstance(value, int | float | decimal.Decimal):
                return int(value) != 0
            if isinstance(value, str):
                return value.strip().lower() == "true"
    except (ValueError, OverflowError, _struct.error) as e:
        raise DataError(f"Value ({value}) was out of range for requested data type") from e
    raise DataError(f"Unexpected type in Cast transformation: {type(value).__name__}")


class Cast(KeyOrValue):
    """Cast fields (`spec=f1:int32,f2:string`) or the whole key/value (`spec=int64`)."""

    PURPOSE = "cast types"
    CONFIG_DEF = _replace_null(
        ConfigDef()
        .define("spec", ConfigType.LIST, NO_DEFAULT, _parse_cast_spec, Importance.HIGH,
                "List of fields and the type to cast them to of the form field1:type,field2:type "
                "to cast fields of Maps or Structs. A single type to cast the entire value. Valid "
                "types are int8, int16, int32, int64, float32, float64, boolean, and string. "
                "Binary fields can only be cast to string."))

    def configured(self) -> None:
        self.casts = _parse_cast_spec("spec", self.cfg["spec"] or [])
        self.whole = self.casts.get(None)
        self.replace_null = self.cfg["replace.null.with.default"]
        self._schemas = SchemaCache()

    def apply(self, record: ConnectRecord) -> Any:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            if self.whole is not None:
                return self.new_record(record, None, cast_value(None, value, self.whole))
            m = require_map(value, self.PURPOSE)
            updated = dict(m)
            for f, t in self.casts.items():
                if f is not None:
                    updated[f] = cast_value(None, m.get(f), t)
            return self.new_record(record, None, updated)
        updated_schema = self._schemas.get_or_build(schema, self._build_schema)
        if self.whole is not None:
            return self.new_record(record, updated_schema, cast_value(schema, value, self.whole))
        s = require_struct(value, self.PURPOSE)
        out = Struct(updated_schema)
        for f in s.schema.fields:
            v = field_value(s, f.name, self.replace_null)
            t = self.casts.get(f.name)
            out.put(f.name, cast_value(f.schema, v, t) if t is not None else v)
        return self.new_record(record, updated_schema, out)

    def _build_schema(self, schema: Schema) -> Schema:
        if self.whole is not None:
            # The cast value is no longer a Date/Time/Timestamp/Decimal: keeping the logical
            # name (as Kafka's copySchemaBasics does) gives e.g. a Timestamp schema holding an
            # int, which converters reject. Schemas without a logical name keep their basics.
            b = (SchemaBuilder(self.whole) if schema.name in _LOGICAL_NAMES
                 else copy_basics(schema, self.whole))
            target = self.whole
        else:
            if schema.type is not Type.STRUCT:
                raise DataError(f"Only Struct objects supported for [{self.PURPOSE}], found: "
                                f"{schema.type.name}")
            b = copy_basics(schema, Type.STRUCT)
            for f in schema.fields:
                t = self.casts.get(f.name)
                if t is None:
                    b.field(f.name, f.schema)
                    continue
                fb = SchemaBuilder(t)
                if f.schema.optional:
                    fb.optional()
                if f.schema.default is not None:
                    fb.default_value(cast_value(f.schema, f.schema.default, t))
                b.field(f.name, fb.build())
            target = Type.STRUCT
        if schema.optional:
            b.optional()
        if schema.default is not None and target is not Type.STRUCT:
            b.default_value(cast_value(schema, schema.default, target))
        return b.build()


class CastKey(Cast):
    target = "key"


class CastValue(Cast):
    target = "value"


# --- ValueToKey -------------------------------------------------------------------------------


class ValueToKey(KeyOrValue):
    """Replace the key with a struct (or map) of some of the value's fields."""

    PURPOSE = "copying fields from value to key"
    target = "value"
    CONFIG_DEF = _replace_null(
        ConfigDef()
        .define("fields", ConfigType.LIST, NO_DEFAULT, _non_empty_list, Importance.HIGH,
                "Field names on the record value to extract as the record key."))

    def configured(self) -> None:
        self.fields = list(self.cfg["fields"] or [])
        if not self.fields:
            raise ConfigError("Missing required configuration \"fields\" which has no default "
                              "value.", key="fields")
        self.replace_null = self.cfg["replace.null.with.default"]
        self._schemas = SchemaCache()

    def apply(self, record: ConnectRecord) -> Any:
        if record.value_schema is None:
            m = require_map(record.value, self.PURPOSE)
            key = {f: m.get(f) for f in self.fields}
            return record.new_record(key_schema=None, key=key)
        s = require_struct(record.value, self.PURPOSE)
        key_schema = self._schemas.get_or_build(s.schema, self._build_schema)
        key_struct = Struct(key_schema)
        for f in self.fields:
            key_struct.put(f, field_value(s, f, self.replace_null))
        return record.new_record(key_schema=key_schema, key=key_struct)

    def _build_schema(self, schema: Schema) -> Schema:
        b = SchemaBuilder.struct()
        for name in self.fields:
            f = schema.field(name)
            if f is None:
                raise DataError(f"Field does not exist: {name}")
            b.field(name, f.schema)
        return b.build()


# --- ExtractField -----------------------------------------------------------------------------


class ExtractField(KeyOrValue):
    """Replace the key/value with one of its fields."""

    PURPOSE = "field extraction"
    CONFIG_DEF = _replace_null(
        ConfigDef()
        .define("field", ConfigType.STRING, NO_DEFAULT, NonEmptyString(), Importance.MEDIUM,
                "Field name to extract."))

    def configured(self) -> None:
        if not self.cfg["field"]:
            raise ConfigError("Missing required configuration \"field\" which has no default "
                              "value.", key="field")
        self.field = self.cfg["field"]
        self.replace_null = self.cfg["replace.null.with.default"]

    def apply(self, record: ConnectRecord) -> Any:
        schema = self.operating_schema(record)
        if schema is None:
            m = require_map_or_null(self.operating_value(record), self.PURPOSE)
            return self.new_record(record, None, None if m is None else m.get(self.field))
        s = require_struct_or_null(self.operating_value(record), self.PURPOSE)
        if schema.type is not Type.STRUCT:
            raise DataError(f"Only Struct objects supported for [{self.PURPOSE}], found: "
                            f"{schema.type.name}")
        f = schema.field(self.field)
        if f is None:
            raise DataError(f"Unknown field: {self.field}")
        return self.new_record(record, f.schema,
                               None if s is None else field_value(s, self.field, self.replace_null))


class ExtractFieldKey(ExtractField):
    target = "key"


class ExtractFieldValue(ExtractField):
    target = "value"


# --- HoistField -------------------------------------------------------------------------------


class HoistField(KeyOrValue):
    """Wrap the key/value in a struct (or map) with a single field."""

    CONFIG_DEF = (
        ConfigDef()
        .define("field", ConfigType.STRING, NO_DEFAULT, NonEmptyString(), Importance.MEDIUM,
                "Field name for the single field that will be created in the resulting Struct "
                "or Map."))

    def configured(self) -> None:
        if not self.cfg["field"]:
            raise ConfigError("Missing required configuration \"field\" which has no default "
                              "value.", key="field")
        self.field = self.cfg["field"]
        self._schemas = SchemaCache()

    def apply(self, record: ConnectRecord) -> Any:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if schema is None:
            return self.new_record(record, None, {self.field: value})
        updated = self._schemas.get_or_build(
            schema, lambda s: SchemaBuilder.struct().field(self.field, s).build())
        return self.new_record(record, updated, Struct(updated, {self.field: value}))


class HoistFieldKey(HoistField):
    target = "key"


class HoistFieldValue(HoistField):
    target = "value"


# --- Flatten ----------------------------------------------------------------------------------

_FLAT_LEAVES = {Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.FLOAT32, Type.FLOAT64,
                Type.BOOLEAN, Type.STRING, Type.BYTES, Type.ARRAY}


class Flatten(KeyOrValue):
    """Flatten nested structs (or maps) into one level, joining names with `delimiter`."""

    PURPOSE = "flattening"
    CONFIG_DEF = (
        ConfigDef()
        .define("delimiter", ConfigType.STRING, ".", None, Importance.MEDIUM,
                "Delimiter to insert between field names from the input record when generating "
                "field names for the output record"))

    def configured(self) -> None:
        self.delimiter = self.cfg["delimiter"]
        self._schemas = SchemaCache()

    def _name(self, prefix: str, name: str) -> str:
        return name if not prefix else prefix + self.delimiter + name

    def apply(self, record: ConnectRecord) -> Any:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            out: dict[str, Any] = {}
            self._flatten_map(require_map(value, self.PURPOSE), "", out)
            return self.new_record(record, None, out)
        s = require_struct_or_null(value, self.PURPOSE)
        updated = self._schemas.get_or_build(schema, self._build_schema)
        if s is None:
            return self.new_record(record, updated, None)
        out_struct = Struct(updated)
        self._flatten_struct(s, "", out_struct)
        return self.new_record(record, updated, out_struct)

    def _flatten_map(self, m: Mapping[str, Any], prefix: str, out: dict[str, Any]) -> None:
        for k, v in m.items():
            name = self._name(prefix, str(k))
            if v is None or isinstance(v, bool | int | float | str | bytes | bytearray | list
                                       | tuple | decimal.Decimal | dt.date | dt.time):
                out[name] = v
            elif isinstance(v, Mapping):
                self._flatten_map(v, name, out)
            else:
                raise DataError(f"Flatten transformation does not support {type(v).__name__} for "
                                f"record without schemas (for field {name}).")

    def _build_schema(self, schema: Schema) -> Schema:
        b = copy_basics(schema, Type.STRUCT)
        self._add_fields(schema, "", b, schema.optional, schema.default)
        if schema.optional:
            b.optional()
        return b.build()

    def _add_fields(self, schema: Schema, prefix: str, b: SchemaBuilder, optional: bool,
                    parent_default: Struct | None) -> None:
        for f in schema.fields:
            name = self._name(prefix, f.name)
            f_optional = optional or f.schema.optional
            default = f.schema.default
            if default is None and parent_default is not None:
                default = parent_default.get(f.name)
            if f.schema.type in _FLAT_LEAVES:
                fs = f.schema
                b.field(name, Schema(type=fs.type, optional=f_optional, default=default,
                                     name=fs.name, version=fs.version, doc=fs.doc,
                                     parameters=fs.parameters, key_schema=fs.key_schema,
                                     value_schema=fs.value_schema))
            elif f.schema.type is Type.STRUCT:
                self._add_fields(f.schema, name, b, f_optional, default)
            else:
                raise DataError(f"Flatten transformation does not support {f.schema.type.name} "
                                f"for record with schemas (for field {name}).")

    def _flatten_struct(self, s: Struct | None, prefix: str, out: Struct) -> None:
        if s is None:
            return
        for f in s.schema.fields:
            name = self._name(prefix, f.name)
            if f.schema.type is Type.STRUCT:
                self._flatten_struct(s.get(f.name), name, out)
            else:
                out.put(name, s.get(f.name))


class FlattenKey(Flatten):
    target = "key"


class FlattenValue(Flatten):
    target = "value"


__all__ = [
    "Cast", "CastKey", "CastValue", "ExtractField", "ExtractFieldKey", "ExtractFieldValue",
    "Flatten", "FlattenKey", "FlattenValue", "HoistField", "HoistFieldKey", "HoistFieldValue",
    "InsertField", "InsertFieldKey", "InsertFieldValue", "MaskField", "MaskFieldKey",
    "MaskFieldValue", "ReplaceField", "ReplaceFieldKey", "ReplaceFieldValue", "ValueToKey",
    "cast_value",
]
