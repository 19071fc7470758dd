"""Schemas as JsonConverter writes them, and values encoded and decoded by schema.

Everything here is looked up in tables keyed by schema type and by logical name (as Kafka's
JsonConverter keys its converters), so a type is one entry per table rather than one more
branch in each of six if-chains. A logical name wins over the type it is carried in.

The converter runs per record, so a schema is compiled once into closures; the tables are
consulted only while compiling, never per value.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
from collections.abc import Callable, Mapping
from typing import Any

from kctl.api.data import DATE, DECIMAL, TIME, TIMESTAMP, Field, Schema, Struct, Type
from kctl.errors import DataError
from kctl.runtime.converters.common import (
    _INT_RANGES,
    _JSON_TO_TYPE,
    _TYPE_TO_JSON,
    Decoder,
    Encoder,
    _decimal_scale,
    _struct_values,
    _tname,
    _typename,
    _unchecked_struct,
    bytes_to_decimal,
    date_to_days,
    days_to_date,
    decimal_to_bytes,
    millis_to_time,
    millis_to_timestamp,
    time_to_millis,
    timestamp_to_millis,
)

__all__ = ["JsonSchemaCodec", "Numeric", "needs_exact_decimals"]


class Numeric:
    """A placeholder the converter writes as a bare JSON number (decimal.format=NUMERIC).

    json.dumps has no hook for raw number text, so the converter swaps these in after dumping.
    """

    __slots__ = ("text",)

    def __init__(self, value: decimal.Decimal):
        if not value.is_finite():
            raise DataError(f"Decimal value {value} is not finite")
        self.text = format(value, "f")


class JsonSchemaCodec:
    """Compiles schemas under one converter's settings (decimal format, null replacement).

    `has_numeric` turns true once any compiled encoder can emit a `Numeric`, so the converter
    pays for the swap pass only when it can matter.
    """

    def __init__(self, numeric_decimals: bool = False, replace_null: bool = True) -> None:
        self.numeric_decimals = numeric_decimals
        self.replace_null = replace_null
        self.has_numeric = False

    # -- values --------------------------------------------------------------------------
    def encoder(self, schema: Schema) -> Encoder:
        """A function from a Connect value of `schema` to a JSON-ready object."""
        make = _LOGICAL_ENCODERS.get(schema.name) or _ENCODERS.get(schema.type)
        if make is None:
            raise DataError(f"Couldn't translate unsupported schema type {schema.type}")
        inner = make(self, schema)
        optional, default, replace = schema.optional, schema.default, self.replace_null
        type_name = _tname(schema.type)

        def encode(v: Any) -> Any:
            if v is None:
                if default is not None and replace:
                    return inner(default)
                if optional:
                    return None
                raise DataError(f"Conversion error: null value for field that is required and "
                                f"has no default value ({type_name})")
            return inner(v)

        return encode

    def decoder(self, schema: Schema) -> Decoder:
        """A function from parsed JSON to the Connect value of `schema`."""
        make = _LOGICAL_DECODERS.get(schema.name) or _DECODERS.get(schema.type)
        if make is None:
            raise DataError(f"Unknown schema type: {schema.type}")
        inner = make(self, schema)
        optional, default, replace = schema.optional, schema.default, self.replace_null
        type_name = _tname(schema.type)

        def decode(v: Any) -> Any:
            if v is None:
                if default is not None and replace:
                    return default
                if optional:
                    return None
                raise DataError(f"Invalid null value for required {type_name} field")
            return inner(v)

        return decode

    # -- schemas -------------------------------------------------------------------------
    def as_json_schema(self, schema: Schema | None) -> dict[str, Any] | None:
        """Kafka's schema JSON, keys in the order Kafka writes them."""
        if schema is None:
            return None
        out: dict[str, Any] = {"type": _TYPE_TO_JSON[schema.type]}
        children = _CHILDREN_TO_JSON.get(schema.type)
        if children is not None:
            children(self, schema, out)
        out["optional"] = schema.optional
        if schema.name is not None:
            out["name"] = schema.name
        if schema.version is not None:
            out["version"] = schema.version
        if schema.doc is not None:
            out["doc"] = schema.doc
        if schema.parameters is not None:
            out["parameters"] = dict(schema.parameters)
        if schema.default is not None:
            out["default"] = self.encoder(schema)(schema.default)
        return out

    def as_connect_schema(self, js: Any) -> Schema | None:
        """Parse Kafka's schema JSON into a Schema."""
        if js is None:
            return None
        if not isinstance(js, dict):
            raise DataError(f"Schema must be a JSON object, got {_typename(js)}")
        tname = js.get("type")
        if not isinstance(tname, str):
            raise DataError("Schema must contain 'type' field")
        t = _JSON_TO_TYPE.get(tname)
        if t is None:
            raise DataError(f"Unknown schema type: {tname}")
        children = _CHILDREN_FROM_JSON.get(t)
        fields, key_schema, value_schema = children(self, js) if children else ((), None, None)
        params = js.get("parameters")
        if params is not None:
            if not isinstance(params, dict):
                params = None
            elif not all(isinstance(v, str) for v in params.values()):
                raise DataError("Schema parameters must have string values.")
        name = js.get("name")
        version = js.get("version")
        doc = js.get("doc")
        schema = Schema(
            type=t,
            optional=js.get("optional") is True,
            name=name if isinstance(name, str) else None,
            version=version if isinstance(version, int) and not isinstance(version, bool) else None,
            doc=doc if isinstance(doc, str) else None,
            parameters=dict(params) if params else None,
            fields=fields, key_schema=key_schema, value_schema=value_schema,
        )
        if js.get("default") is not None:
            default = self.decoder(schema)(js["default"])
            schema = Schema(type=t, optional=schema.optional, default=default, name=schema.name,
                            version=schema.version, doc=schema.doc, parameters=schema.parameters,
                            fields=fields, key_schema=key_schema, value_schema=value_schema)
        return schema


def needs_exact_decimals(schema: Schema | None) -> bool:
    """Whether the payload must be parsed with exact decimals (a Decimal anywhere inside)."""
    if schema is None:
        return False
    if schema.name == DECIMAL:
        return True
    return any(needs_exact_decimals(s) for s in
               (schema.key_schema, schema.value_schema, *(f.schema for f in schema.fields)))


# -- encoders: Connect value -> JSON-ready object ------------------------------------------
EncoderFactory = Callable[[JsonSchemaCodec, Schema], Encoder]


def _enc_decimal(codec: JsonSchemaCodec, schema: Schema) -> Encoder:
    scale = _decimal_scale(schema)
    if codec.numeric_decimals:
        codec.has_numeric = True

        def enc_decimal(v: Any) -> Any:
            if not isinstance(v, decimal.Decimal):
                raise DataError(f"Invalid type for Decimal, expected Decimal but was "
                                f"{_typename(v)}")
            return Numeric(v)
        return enc_decimal

    def enc_decimal_b64(v: Any) -> Any:
        if not isinstance(v, decimal.Decimal):
            raise DataError(f"Invalid type for Decimal, expected Decimal but was "
                            f"{_typename(v)}")
        return base64.b64encode(decimal_to_bytes(v, scale)).decode("ascii")
    return enc_decimal_b64


def _enc_date(codec: JsonSchemaCodec, schema: Schema) -> Encoder:
    def enc_date(v: Any) -> Any:
        if not isinstance(v, dt.date):
            raise DataError(f"Invalid type for Date, expected date but was {_typename(v)}")
        return date_to_days(v)
    return enc_date


def _enc_time(codec: JsonSchemaCodec, schema: Schema) -> Encoder:
    def enc_time(v: Any) -> Any:
        if not isinstance(v, dt.time | dt.datetime):
            raise DataError(f"Invalid type for Time, expected time but was {_typename(v)}")
        return time_to_millis(v)
    return enc_time


def _enc_timestamp(codec: JsonSchemaCodec, schema: Schema) -> Encoder:
    def enc_ts(v: Any) -> Any:
        if not isinstance(v, dt.datetime):
            raise DataError(f"Invalid type for Timestamp, expected datetime but was "
                            f"{_typename(v)}")
        return timestamp_to_millis(v)
    return enc_ts


def _enc_int(codec: JsonSchemaCodec, schema: Schema) -> Encoder:
    lo, hi = _INT_RANGES[schema.type]
    tn = _tname(schema.type)

    def enc_int(v: Any) -> Any:
        if type(v) is not int and (not isinstance(v, int) or isinstance(v, bool)):
            raise DataError(f"Invalid type for {tn}: {_typename(v)}")
        if not lo <= v <= hi:
            raise DataError(f"Value {v} is out of range for {tn}")
        return int(v)
    return enc_int


def _enc_float(codec: JsonSchemaCodec, schema: Schema) -> Encoder:
    tn = _tname(schema.type)

    def enc_float(v: Any) -> Any:
        if type(v) is float:
            return v
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise DataError(f"Invalid type for {tn}: {_typename(v)}")
        return float(v)
    return enc_float


def _enc_bool(codec: JsonSchemaCodec, schema: Schema) -> Encoder:
    def enc_bool(v: Any) -> Any:
        if not isinstance(v, bool):
            raise DataError(f"Invalid type for BOOLEAN: {_typename(v)}")
        return v
    return enc_bool


def _enc_str(codec: JsonSchemaCodec, schema: Schema) -> Encoder:
    def enc_str(v: Any) -> Any:
        if not isinstance(v, str):
            raise DataError(f"Invalid type for STRING: {_typename(v)}")
        return v
    return enc_str


def _enc_bytes(codec: JsonSchemaCodec, schema: Schema) -> Encoder:
    def enc_bytes(v: Any) -> Any:
        if not isinstance(v, bytes | bytearray | memoryview):
            raise DataError(f"Invalid type for bytes type: {_typename(v)}")
        return base64.b64encode(v).decode("ascii")
    return enc_bytes


def _enc_array(codec: JsonSchemaCodec, schema: Schema) -> Encoder:
    if schema.value_schema is None:
        raise DataError("Array schema did not specify the element type")
    elem = codec.encoder(schema.value_schema)

    def enc_array(v: Any) -> Any:
        if not isinstance(v, list | tuple):
            raise DataError(f"Invalid type for ARRAY: {_typename(v)}")
        return [elem(x) for x in v]
    return enc_array


def _enc_map(codec: JsonSchemaCodec, schema: Schema) -> Encoder:
    """String keys make a JSON object; any other key type an array of [key, value] pairs."""
    if schema.key_schema is None or schema.value_schema is None:
        raise DataError("Map schema did not specify the key and value types")
    kenc, venc = codec.encoder(schema.key_schema), codec.encoder(schema.value_schema)
    if schema.key_schema.type is Type.STRING:
        def enc_obj(v: Any) -> Any:
            if not isinstance(v, Mapping):
                raise DataError(f"Invalid type for MAP: {_typename(v)}")
            out = {}
            for k, x in v.items():
                ek = kenc(k)
                out["null" if ek is None else ek] = venc(x)
            return out
        return enc_obj

    def enc_pairs(v: Any) -> Any:
        if not isinstance(v, Mapping):
            raise DataError(f"Invalid type for MAP: {_typename(v)}")
        return [[kenc(k), venc(x)] for k, x in v.items()]
    return enc_pairs


def _enc_struct(codec: JsonSchemaCodec, schema: Schema) -> Encoder:
    fields = [(f.name, f.index, codec.encoder(f.schema)) for f in schema.fields]

    def enc_struct(v: Any) -> Any:
        if not isinstance(v, Struct):
            raise DataError(f"Invalid type for STRUCT: {_typename(v)}")
        if v.schema is not schema and v.schema != schema:
            raise DataError("Mismatching schema: the struct's schema is not the record's "
                            "schema")
        values = _struct_values(v)
        return {n: enc(values[i]) for n, i, enc in fields}
    return enc_struct


_ENCODERS: dict[Type, EncoderFactory] = {
    Type.INT8: _enc_int, Type.INT16: _enc_int, Type.INT32: _enc_int, Type.INT64: _enc_int,
    Type.FLOAT32: _enc_float, Type.FLOAT64: _enc_float,
    Type.BOOLEAN: _enc_bool, Type.STRING: _enc_str, Type.BYTES: _enc_bytes,
    Type.ARRAY: _enc_array, Type.MAP: _enc_map, Type.STRUCT: _enc_struct,
}


_LOGICAL_ENCODERS: dict[str | None, EncoderFactory] = {
    DECIMAL: _enc_decimal, DATE: _enc_date, TIME: _enc_time, TIMESTAMP: _enc_timestamp,
}


# -- decoders: parsed JSON -> Connect value ------------------------------------------------
DecoderFactory = Callable[[JsonSchemaCodec, Schema], Decoder]


def _dec_decimal(codec: JsonSchemaCodec, schema: Schema) -> Decoder:
    """Either format is accepted whatever decimal.format says, as Kafka does."""
    scale = _decimal_scale(schema)

    def dec_decimal(v: Any) -> Any:
        if isinstance(v, decimal.Decimal):
            return v
        if isinstance(v, int | float) and not isinstance(v, bool):
            return decimal.Decimal(str(v))
        if isinstance(v, str):
            try:
                return bytes_to_decimal(base64.b64decode(v, validate=True), scale)
            except (binascii.Error, ValueError) as e:
                raise DataError("Invalid bytes for Decimal field") from e
        raise DataError(f"Invalid type for Decimal, underlying representation should be "
                        f"numeric or bytes but was {_typename(v)}")
    return dec_decimal


def _dec_epoch(convert: Callable[[int], Any]) -> DecoderFactory:
    """Date, Time and Timestamp: an integer count from the epoch, converted by `convert`."""

    def factory(codec: JsonSchemaCodec, schema: Schema) -> Decoder:
        label = (schema.name or "").rsplit(".", 1)[1]

        def dec_logical(v: Any) -> Any:
            if type(v) is not int:
                raise DataError(f"Invalid type for {label}, underlying representation should "
                                f"be integer but was {_typename(v)}")
            try:
                return convert(v)
            except OverflowError as e:
                raise DataError(f"{label} value {v} is out of range") from e
        return dec_logical
    return factory


def _dec_int(codec: JsonSchemaCodec, schema: Schema) -> Decoder:
    lo, hi = _INT_RANGES[schema.type]
    tn = _tname(schema.type)

    def dec_int(v: Any) -> Any:
        if type(v) is not int:
            if type(v) is float and v.is_integer():
                v = int(v)
            else:
                raise DataError(f"Invalid value for {tn} field: {v!r}")
        if not lo <= v <= hi:
            raise DataError(f"Value {v} is out of range for {tn}")
        return v
    return dec_int


def _dec_float(codec: JsonSchemaCodec, schema: Schema) -> Decoder:
    tn = _tname(schema.type)

    def dec_float(v: Any) -> Any:
        if type(v) is float:
            return v
        if isinstance(v, bool) or not isinstance(v, int | float | decimal.Decimal):
            raise DataError(f"Invalid value for {tn} field: {v!r}")
        return float(v)
    return dec_float


def _dec_bool(codec: JsonSchemaCodec, schema: Schema) -> Decoder:
    def dec_bool(v: Any) -> Any:
        if type(v) is not bool:
            raise DataError(f"Invalid value for BOOLEAN field: {v!r}")
        return v
    return dec_bool


def _dec_str(codec: JsonSchemaCodec, schema: Schema) -> Decoder:
    def dec_str(v: Any) -> Any:
        if type(v) is not str:
            raise DataError(f"Invalid value for STRING field: {v!r}")
        return v
    return dec_str


def _dec_bytes(codec: JsonSchemaCodec, schema: Schema) -> Decoder:
    def dec_bytes(v: Any) -> Any:
        if type(v) is not str:
            raise DataError(f"Invalid bytes field: expected a base64 string, got {v!r}")
        try:
            return base64.b64decode(v, validate=True)
        except (binascii.Error, ValueError) as e:
            raise DataError(f"Invalid bytes field: {e}") from e
    return dec_bytes


def _dec_array(codec: JsonSchemaCodec, schema: Schema) -> Decoder:
    assert schema.value_schema is not None
    elem = codec.decoder(schema.value_schema)

    def dec_array(v: Any) -> Any:
        if type(v) is not list:
            raise DataError(f"Arrays should be encoded as JSON arrays, but found "
                            f"{_typename(v)}")
        return [elem(x) for x in v]
    return dec_array


def _dec_map(codec: JsonSchemaCodec, schema: Schema) -> Decoder:
    assert schema.key_schema is not None and schema.value_schema is not None
    kdec, vdec = codec.decoder(schema.key_schema), codec.decoder(schema.value_schema)
    if schema.key_schema.type is Type.STRING:
        def dec_obj(v: Any) -> Any:
            if type(v) is not dict:
                raise DataError(f"Maps with string fields should be encoded as JSON "
                                f"objects, but found {_typename(v)}")
            return {k: vdec(x) for k, x in v.items()}
        return dec_obj

    def dec_pairs(v: Any) -> Any:
        if type(v) is not list:
            raise DataError(f"Maps with non-string fields should be encoded as JSON array "
                            f"of tuples, but found {_typename(v)}")
        out = {}
        for entry in v:
            if type(entry) is not list:
                raise DataError(f"Found invalid map entry instead of array tuple: "
                                f"{_typename(entry)}")
            if len(entry) != 2:
                raise DataError(f"Found invalid map entry, expected length 2 but found "
                                f":{len(entry)}")
            out[kdec(entry[0])] = vdec(entry[1])
        return out
    return dec_pairs


def _dec_struct(codec: JsonSchemaCodec, schema: Schema) -> Decoder:
    fields = [(f.name, codec.decoder(f.schema)) for f in schema.fields]

    def dec_struct(v: Any) -> Any:
        if type(v) is not dict:
            raise DataError(f"Structs should be encoded as JSON objects, but found "
                            f"{_typename(v)}")
        get = v.get
        try:
            return _unchecked_struct(schema, [dec(get(n)) for n, dec in fields])
        except DataError as e:
            raise DataError(f"{e} (in struct {schema.name or ''})".replace(" ()", "")) from e
    return dec_struct


_DECODERS: dict[Type, DecoderFactory] = {
    Type.INT8: _dec_int, Type.INT16: _dec_int, Type.INT32: _dec_int, Type.INT64: _dec_int,
    Type.FLOAT32: _dec_float, Type.FLOAT64: _dec_float,
    Type.BOOLEAN: _dec_bool, Type.STRING: _dec_str, Type.BYTES: _dec_bytes,
    Type.ARRAY: _dec_array, Type.MAP: _dec_map, Type.STRUCT: _dec_struct,
}


_LOGICAL_DECODERS: dict[str | None, DecoderFactory] = {
    DECIMAL: _dec_decimal,
    DATE: _dec_epoch(days_to_date),
    TIME: _dec_epoch(millis_to_time),
    TIMESTAMP: _dec_epoch(millis_to_timestamp),
}


# -- schema JSON: the parts only containers have -------------------------------------------
def _array_to_json(codec: JsonSchemaCodec, schema: Schema, out: dict[str, Any]) -> None:
    out["items"] = codec.as_json_schema(schema.value_schema)


def _map_to_json(codec: JsonSchemaCodec, schema: Schema, out: dict[str, Any]) -> None:
    out["keys"] = codec.as_json_schema(schema.key_schema)
    out["values"] = codec.as_json_schema(schema.value_schema)


def _struct_to_json(codec: JsonSchemaCodec, schema: Schema, out: dict[str, Any]) -> None:
    fields = []
    for f in schema.fields:
        fj = dict(codec.as_json_schema(f.schema) or {})
        fj["field"] = f.name
        fields.append(fj)
    out["fields"] = fields


_CHILDREN_TO_JSON: dict[Type, Callable[[JsonSchemaCodec, Schema, dict[str, Any]], None]] = {
    Type.ARRAY: _array_to_json, Type.MAP: _map_to_json, Type.STRUCT: _struct_to_json,
}


Children = tuple[tuple[Field, ...], Schema | None, Schema | None]


def _array_from_json(codec: JsonSchemaCodec, js: dict[str, Any]) -> Children:
    if js.get("items") is None:
        raise DataError("Array schema did not specify the element type")
    return (), None, codec.as_connect_schema(js["items"])


def _map_from_json(codec: JsonSchemaCodec, js: dict[str, Any]) -> Children:
    if "keys" not in js:
        raise DataError("Map schema did not specify the key type")
    if "values" not in js:
        raise DataError("Map schema did not specify the value type")
    return (), codec.as_connect_schema(js["keys"]), codec.as_connect_schema(js["values"])


def _struct_from_json(codec: JsonSchemaCodec, js: dict[str, Any]) -> Children:
    fj = js.get("fields")
    if not isinstance(fj, list):
        raise DataError("Struct schema's \"fields\" argument is not an array.")
    out = []
    seen = set()
    for i, f in enumerate(fj):
        fname = f.get("field") if isinstance(f, dict) else None
        if not isinstance(fname, str):
            raise DataError("Struct schema's field name not specified properly")
        if fname in seen:
            raise DataError(f"Struct schema has a duplicate field {fname!r}")
        seen.add(fname)
        fs = codec.as_connect_schema(f)
        assert fs is not None
        out.append(Field(fname, i, fs))
    return tuple(out), None, None


_CHILDREN_FROM_JSON: dict[Type, Callable[[JsonSchemaCodec, dict[str, Any]], Children]] = {
    Type.ARRAY: _array_from_json, Type.MAP: _map_from_json, Type.STRUCT: _struct_from_json,
}
