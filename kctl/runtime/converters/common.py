"""Values and JSON helpers the converters share: logical types as Kafka Connect encodes them
(decimals as scaled bytes, timestamps as epoch millis, dates as epoch days), JSON text I/O.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Callable, Mapping
from typing import Any

from kctl.api.config import ConfigDef
from kctl.api.data import (
    Schema,
    SchemaAndValue,
    Struct,
    Type,
)
from kctl.errors import ConfigError, DataError

Encoder = Callable[[Any], Any]


Decoder = Callable[[Any], Any]


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


_EPOCH_DATE = dt.date(1970, 1, 1)


_NULL = SchemaAndValue(None, None)


# Kafka's JSON names for schema types; float32/float64 are "float"/"double" on the wire.
_TYPE_TO_JSON = {
    Type.INT8: "int8", Type.INT16: "int16", Type.INT32: "int32", Type.INT64: "int64",
    Type.FLOAT32: "float", Type.FLOAT64: "double", Type.BOOLEAN: "boolean",
    Type.STRING: "string", Type.BYTES: "bytes", Type.ARRAY: "array", Type.MAP: "map",
    Type.STRUCT: "struct",
}


_JSON_TO_TYPE = {v: k for k, v in _TYPE_TO_JSON.items()}


_INT_RANGES = {
    Type.INT8: (-(2**7), 2**7 - 1),
    Type.INT16: (-(2**15), 2**15 - 1),
    Type.INT32: (-(2**31), 2**31 - 1),
    Type.INT64: (-(2**63), 2**63 - 1),
}


_PLAIN = (str, int, float, bool)


_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


_loads = json.loads


_raw_decode = json.JSONDecoder().raw_decode


_exact_decoder = json.JSONDecoder(parse_float=decimal.Decimal)


def _unchecked_struct(schema: Schema, values: list[Any]) -> Struct:
    """A Struct from values the decoder already checked field by field (skips re-validation)."""
    s = Struct.__new__(Struct)
    s.schema = schema
    s._values = values
    return s


def _struct_values(struct: Struct) -> list[Any]:
    return struct._values


def _tname(t: Type) -> str:
    return t.name


def _typename(v: Any) -> str:
    return type(v).__name__


def _decimal_scale(schema: Schema) -> int:
    try:
        return int((schema.parameters or {})["scale"])
    except (KeyError, ValueError) as e:
        raise DataError("Invalid Decimal schema: scale parameter not found or not an integer") from e


# Exact decimal arithmetic: the default context keeps 28 digits and rounded longer values;
# scaleb (a shift of the exponent) under this one never rounds, at any size.
_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def decimal_to_bytes(value: decimal.Decimal, scale: int) -> bytes:
    """Kafka's Decimal.fromLogical: the unscaled value as big-endian two's complement,
    exact at any precision; a value with more fraction than `scale` is refused."""
    if not value.is_finite():
        raise DataError(f"Decimal value {value} is not finite")
    shifted = value.scaleb(scale, _EXACT)
    if shifted.as_tuple().exponent < 0 and shifted != shifted.to_integral_value(context=_EXACT):
        raise DataError(f"BigDecimal has mismatching scale value for given Decimal schema: "
                        f"{value} does not fit scale {scale}")
    unscaled = int(shifted)
    length = max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1)
    return unscaled.to_bytes(length, "big", signed=True)


def bytes_to_decimal(raw: bytes, scale: int) -> decimal.Decimal:
    """Kafka's Decimal.toLogical, exact at any precision."""
    return unscaled_to_decimal(int.from_bytes(raw, "big", signed=True), scale)


def unscaled_to_decimal(unscaled: int, scale: int) -> decimal.Decimal:
    """unscaled * 10**-scale, exactly (Decimal(int).scaleb rounds to the context's 28 digits)."""
    return decimal.Decimal(unscaled).scaleb(-scale, _EXACT)


def timestamp_to_millis(value: dt.datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def millis_to_timestamp(ms: int) -> dt.datetime:
    return _EPOCH + dt.timedelta(milliseconds=ms)


def date_to_days(value: dt.date) -> int:
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC)
        if value.time() != dt.time(0):
            raise DataError("Kafka Connect Date type should not have any time fields set to "
                            "non-zero values.")
        value = value.date()
    return (value - _EPOCH_DATE).days


def days_to_date(days: int) -> dt.date:
    return _EPOCH_DATE + dt.timedelta(days=days)


def time_to_millis(value: dt.time | dt.datetime) -> int:
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC)
        if value.date() != _EPOCH_DATE:
            raise DataError("Kafka Connect Time type should not have any date fields set to "
                            "non-zero values.")
        value = value.time()
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000


def millis_to_time(ms: int) -> dt.time:
    if not 0 <= ms < 86_400_000:
        raise DataError(f"Time value {ms} is outside of one day (0..86399999 ms)")
    s, milli = divmod(ms, 1000)
    m, sec = divmod(s, 60)
    h, minute = divmod(m, 60)
    return dt.time(h, minute, sec, milli * 1000)


def _parse_converter_config(definition: ConfigDef, configs: Mapping[str, Any],
                            is_key: bool) -> dict[str, Any]:
    """Parse a converter's own keys; errors name the key as the worker config spells it."""
    prefix = "key.converter." if is_key else "value.converter."
    for cv in definition.validate(configs):
        if cv.errors:
            raise ConfigError(f"Invalid converter configuration {prefix}{cv.name}: {cv.errors[0]}",
                              key=prefix + cv.name)
    return definition.parse(configs)

