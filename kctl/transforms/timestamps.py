"""TimestampConverter and TimestampRouter, with Java SimpleDateFormat patterns in UTC."""

from __future__ import annotations

import datetime as dt
from typing import Any

from kctl.api.config import NO_DEFAULT, ConfigDef, ConfigType, Importance, ValidString
from kctl.api.data import (
    DATE,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    TIME,
    TIMESTAMP,
    Schema,
    Struct,
    Type,
    date_schema,
    time_schema,
    timestamp_schema,
)
from kctl.api.records import ConnectRecord
from kctl.api.transform import Transformation
from kctl.errors import ConfigError, ConnectError, DataError
from kctl.transforms._base import (
    REPLACE_NULL_DOC,
    ConfiguredTransformation,
    KeyOrValue,
    SchemaCache,
    copy_basics,
    field_value,
    require_map,
    require_struct_or_null,
)
from kctl.transforms._datefmt import format_datetime, parse_datetime, validate_pattern

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_TYPES = ("string", "unix", "Date", "Time", "Timestamp")
_PRECISIONS = ("nanoseconds", "microseconds", "milliseconds", "seconds")
_PER_MILLI = {"seconds": (1000, 1), "milliseconds": (1, 1), "microseconds": (1, 1000),
              "nanoseconds": (1, 1_000_000)}


def _pattern_validator(name: str, value: Any) -> None:
    if value:
        validate_pattern(value)


def _to_millis(v: dt.datetime) -> int:
    d = v - _EPOCH
    return (d.days * 86_400 + d.seconds) * 1000 + d.microseconds // 1000


def _trunc_div(a: int, b: int) -> int:
    """Java's long division (rounds toward zero)."""
    q = abs(a) // b
    return q if a >= 0 else -q


class TimestampConverter(KeyOrValue):
    """Convert a field (or the whole key/value) between string, unix, Date, Time and Timestamp."""

    PURPOSE = "converting timestamp formats"
    CONFIG_DEF = (
        ConfigDef()
        .define("field", ConfigType.STRING, "", None, Importance.HIGH,
                "The field containing the timestamp, or empty if the entire value is a timestamp")
        .define("target.type", ConfigType.STRING, NO_DEFAULT, ValidString.in_(*_TYPES, case_sensitive=True),
                Importance.HIGH,
                "The desired timestamp representation: string, unix, Date, Time, or Timestamp")
        .define("format", ConfigType.STRING, "", _pattern_validator, Importance.MEDIUM,
                "A SimpleDateFormat-compatible format for the timestamp. Used to generate the "
                "output when type=string or used to parse the input if the input is a string.")
        .define("unix.precision", ConfigType.STRING, "milliseconds",
                ValidString.in_(*_PRECISIONS, case_sensitive=True), Importance.LOW,
                "The desired Unix precision for the timestamp: seconds, milliseconds, "
                "microseconds, or nanoseconds. Sub-millisecond components are lost, as in Kafka.")
        .define("replace.null.with.default", ConfigType.BOOLEAN, True, None, Importance.MEDIUM,
                REPLACE_NULL_DOC))

    def configured(self) -> None:
        c = self.cfg
        self.field: str = c["field"]
        self.type: str = c["target.type"]
        self.format: str = c["format"]
        self.precision: str = c["unix.precision"]
        self.replace_null = c["replace.null.with.default"]
        if self.type == "string" and not self.format.strip():
            raise ConfigError("TimestampConverter requires format option to be specified when "
                              "using string timestamps", key="format")
        self._schemas = SchemaCache()

    # -- raw instant <-> representations ---------------------------------------------------
    def _to_raw(self, kind: str, v: Any) -> dt.datetime:
        if kind == "string":
            if not isinstance(v, str):
                raise DataError(f"Expected string timestamp to be a str, but found "
                                f"{type(v).__name__}")
            if not self.format:
                raise DataError("TimestampConverter needs `format` to parse string timestamps")
            return parse_datetime(v, self.format)
        if kind == "unix":
            if not isinstance(v, int) or isinstance(v, bool):
                raise DataError(f"Expected Unix timestamp to be an int, but found "
                                f"{type(v).__name__}")
            mul, div = _PER_MILLI[self.precision]
            return _EPOCH + dt.timedelta(milliseconds=_trunc_div(v * mul, div))
        if kind == "Date":
            if isinstance(v, dt.datetime):
                return v if v.tzinfo else v.replace(tzinfo=dt.UTC)
            if not isinstance(v, dt.date):
                raise DataError(f"Expected Date to be a date, but found {type(v).__name__}")
            return dt.datetime(v.year, v.month, v.day, tzinfo=dt.UTC)
        if kind == "Time":
            if isinstance(v, dt.datetime):
                return v if v.tzinfo else v.replace(tzinfo=dt.UTC)
            if not isinstance(v, dt.time):
                raise DataError(f"Expected Time to be a time, but found {type(v).__name__}")
            return dt.datetime.combine(_EPOCH.date(), v.replace(tzinfo=None), tzinfo=dt.UTC)
        if not isinstance(v, dt.datetime):
            raise DataError(f"Expected Timestamp to be a datetime, but found {type(v).__name__}")
        return v if v.tzinfo else v.replace(tzinfo=dt.UTC)

    def _to_type(self, raw: dt.datetime) -> Any:
        raw = raw.astimezone(dt.UTC)
        t = self.type
        if t == "string":
            return format_datetime(raw, self.format)
        if t == "unix":
            millis = _to_millis(raw)
            mul, div = _PER_MILLI[self.precision]
            return _trunc_div(millis * div, mul)
        if t == "Date":
            return raw.date()
        if t == "Time":
            return raw.time().replace(microsecond=raw.microsecond // 1000 * 1000)
        return raw

    def _type_schema(self, optional: bool) -> Schema:
        t = self.type
        if t == "string":
            return OPTIONAL_STRING_SCHEMA if optional else Schema(Type.STRING)
        if t == "unix":
            return OPTIONAL_INT64_SCHEMA if optional else Schema(Type.INT64)
        if t == "Date":
            return date_schema(optional)
        if t == "Time":
            return time_schema(optional)
        return timestamp_schema(optional)

    @staticmethod
    def _kind_of_schema(schema: Schema) -> str:
        if schema.name == TIMESTAMP:
            return "Timestamp"
        if schema.name == DATE:
            return "Date"
        if schema.name == TIME:
            return "Time"
        if schema.type is Type.STRING:
            return "string"
        if schema.type is Type.INT64:
            return "unix"
        raise ConnectError(f"Schema {schema.type.name} does not correspond to a known timestamp "
                           "type format")

    @staticmethod
    def _infer_kind(v: Any) -> str:
        if isinstance(v, dt.datetime):
            return "Timestamp"
        if isinstance(v, dt.date):
            return "Date"
        if isinstance(v, dt.time):
            return "Time"
        if isinstance(v, int) and not isinstance(v, bool):
            return "unix"
        if isinstance(v, str):
            return "string"
        raise DataError(f"TimestampConverter does not support {type(v).__name__} objects as "
                        "timestamps")

    def convert(self, v: Any, kind: str | None = None) -> Any:
        if v is None:
            return None
        return self._to_type(self._to_raw(kind or self._infer_kind(v), v))

    # -- records ---------------------------------------------------------------------------
    def apply(self, record: ConnectRecord) -> Any:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if schema is None:
            if value is None or not self.field:
                return self.new_record(record, None, self.convert(value))
            m = require_map(value, self.PURPOSE)
            updated = dict(m)
            updated[self.field] = self.convert(m.get(self.field))
            return self.new_record(record, None, updated)
        if not self.field:
            return self.new_record(record, self._type_schema(schema.optional),
                                   self.convert(value, self._kind_of_schema(schema)))
        s = require_struct_or_null(value, self.PURPOSE)
        updated_schema = self._schemas.get_or_build(schema, self._build_schema)
        return self.new_record(record, updated_schema, self._convert_struct(s, updated_schema))

    def _build_schema(self, schema: Schema) -> Schema:
        b = copy_basics(schema, Type.STRUCT)
        for f in schema.fields:
            b.field(f.name, self._type_schema(f.schema.optional) if f.name == self.field
                    else f.schema)
        if schema.optional:
            b.optional()
        if schema.default is not None:
            interim = b.build()
            b.default_value(self._convert_struct(schema.default, interim))
        return b.build()

    def _convert_struct(self, s: Struct | None, updated: Schema) -> Struct | None:
        if s is None:
            return None
        out = Struct(updated)
        for f in s.schema.fields:
            v = field_value(s, f.name, self.replace_null)
            if f.name == self.field:
                v = self.convert(v, self._kind_of_schema(f.schema))
            out.put(f.name, v)
        return out


class TimestampConverterKey(TimestampConverter):
    target = "key"


class TimestampConverterValue(TimestampConverter):
    target = "value"


class TimestampRouter(ConfiguredTransformation, Transformation[Any]):
    """Route to `${topic}-${timestamp}` using the record timestamp (e.g. daily topics)."""

    CONFIG_DEF = (
        ConfigDef()
        .define("topic.format", ConfigType.STRING, "${topic}-${timestamp}", None, Importance.HIGH,
                "Format string which can contain ${topic} and ${timestamp} as placeholders for "
                "the topic and timestamp, respectively.")
        .define("timestamp.format", ConfigType.STRING, "yyyyMMdd", _pattern_validator,
                Importance.HIGH, "Format string for the timestamp that is compatible with "
                "java.text.SimpleDateFormat."))

    def configured(self) -> None:
        self.topic_format = self.cfg["topic.format"]
        self.timestamp_format = self.cfg["timestamp.format"]

    def apply(self, record: ConnectRecord) -> Any:
        if record.timestamp is None:
            raise DataError(f"Timestamp missing on record: {record.topic}/"
                            f"{record.kafka_partition}")
        when = _EPOCH + dt.timedelta(milliseconds=record.timestamp)
        topic = (self.topic_format.replace("${topic}", record.topic)
                 .replace("${timestamp}", format_datetime(when, self.timestamp_format)))
        return record.new_record(topic=topic)
