"""Kafka Connect's JsonConverter.

It writes exactly what Kafka Connect's JsonConverter writes (the
`{"schema": ..., "payload": ...}` envelope, Kafka's schema JSON, logical types, maps with
non-string keys as arrays of pairs), so topics can be shared with Java Connect workers.

It runs once per record, so each schema is compiled once into an encoder and a decoder
closure; envelopes whose schema text was seen before skip schema parsing entirely.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kctl.api.config import ConfigDef, ConfigType, Importance, Range, ValidString
from kctl.api.converter import Converter, HeaderConverter
from kctl.api.data import (
    DATE,
    DECIMAL,
    TIME,
    TIMESTAMP,
    Field,
    Schema,
    SchemaAndValue,
    Struct,
    Type,
)
from kctl.api.records import Headers
from kctl.errors import DataError

if TYPE_CHECKING:
    import pyarrow as pa
from kctl.runtime.converters.common import (
    _INT_RANGES,
    _JSON_TO_TYPE,
    _NULL,
    _PLAIN,
    _TYPE_TO_JSON,
    Decoder,
    Encoder,
    _decimal_scale,
    _dumps,
    _exact_decoder,
    _loads,
    _parse_converter_config,
    _raw_decode,
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

JSON_CONFIG_DEF = (
    ConfigDef()
    .define("schemas.enable", ConfigType.BOOLEAN, True, None, Importance.HIGH,
            "Include schemas within each of the serialized values and keys.")
    .define("schemas.cache.size", ConfigType.INT, 1000, Range.at_least(0), Importance.HIGH,
            "The maximum number of schemas that can be cached in this converter instance.")
    .define("decimal.format", ConfigType.STRING, "BASE64",
            ValidString.in_("BASE64", "NUMERIC"), Importance.LOW,
            "Controls which format this converter will serialize decimals in: BASE64 (the "
            "unscaled bytes, base64-encoded) or NUMERIC (a JSON number).")
    .define("replace.null.with.default", ConfigType.BOOLEAN, True, None, Importance.LOW,
            "Whether to replace fields that have a default value and that are null to the "
            "default value. When set to true, the default value is used, otherwise null is used.")
    .define("converter.type", ConfigType.STRING, None, ValidString.in_("key", "value", "header"),
            Importance.LOW, "Set by the worker: whether this converter is for keys, values or headers.")
)


class _Numeric:
    """A placeholder that the encoder turns into a bare JSON number (decimal.format=NUMERIC)."""

    __slots__ = ("text",)

    def __init__(self, value: decimal.Decimal):
        if not value.is_finite():
            raise DataError(f"Decimal value {value} is not finite")
        self.text = format(value, "f")


class _SchemaCache:
    """Identity first (no hashing of deep schemas per record), then equality for equal copies."""

    def __init__(self, size: int):
        self.size = max(size, 1)
        self.entries: dict[int, tuple[Schema, Any]] = {}
        self.by_value: dict[Schema, Any] = {}

    def get(self, schema: Schema) -> Any:
        e = self.entries.get(id(schema))
        if e is not None and e[0] is schema:
            return e[1]
        found = self.by_value.get(schema)
        if found is not None:
            self._remember(schema, found)
        return found

    def _remember(self, schema: Schema, value: Any) -> None:
        if len(self.entries) >= self.size:
            self.entries.clear()
        self.entries[id(schema)] = (schema, value)

    def put(self, schema: Schema, value: Any) -> None:
        if len(self.by_value) >= self.size:
            self.by_value.clear()
        self.by_value[schema] = value
        self._remember(schema, value)


class JsonConverter(Converter, HeaderConverter):
    """Kafka Connect's JsonConverter, byte-compatible on the wire."""

    def __init__(self) -> None:
        self.configure({}, False)

    def config(self) -> ConfigDef:
        return JSON_CONFIG_DEF

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        parsed = _parse_converter_config(JSON_CONFIG_DEF, configs, is_key)
        self.schemas_enabled: bool = parsed["schemas.enable"]
        self.numeric_decimals = parsed["decimal.format"].upper() == "NUMERIC"
        self.replace_null = parsed["replace.null.with.default"]
        self.is_key = is_key
        size = parsed["schemas.cache.size"]
        self._encoders = _SchemaCache(size)  # schema -> (encoder, envelope prefix bytes)
        self._decoders: dict[bytes, tuple[Schema | None, Decoder, bool]] = {}
        self._cache_size = max(size, 1)
        self._last_prefix: bytes | None = None
        self._nonce = binascii.hexlify(os.urandom(6)).decode()

    # -- Connect data -> bytes -------------------------------------------------------------
    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Headers | None = None) -> bytes | None:
        if schema is None and value is None:
            return None
        try:
            if schema is None:
                payload = self._encode_schemaless(value)
                body = self._serialize(payload)
                return b'{"schema":null,"payload":' + body + b"}" if self.schemas_enabled else body
            entry = self._encoders.get(schema)
            if entry is None:
                entry = self._compile_encoder(schema)
            encoder, prefix = entry
            body = self._serialize(encoder(value))
            return prefix + body + b"}" if self.schemas_enabled else body
        except DataError:
            raise
        except (TypeError, ValueError, OverflowError) as e:
            raise DataError(f"Converting Kafka Connect data to byte[] failed for topic {topic}: "
                            f"{e}") from e

    def _serialize(self, payload: Any) -> bytes:
        if self._has_numeric:
            text = _dumps(self._mark_numeric(payload))
            text = text.replace(f'"\\u0000{self._nonce}', "").replace(f'{self._nonce}\\u0000"', "")
            return text.encode()
        return _dumps(payload).encode()

    _has_numeric = False

    def _mark_numeric(self, v: Any) -> Any:
        if isinstance(v, _Numeric):
            return f"\x00{self._nonce}{v.text}{self._nonce}\x00"
        if isinstance(v, dict):
            return {k: self._mark_numeric(x) for k, x in v.items()}
        if isinstance(v, list):
            return [self._mark_numeric(x) for x in v]
        return v

    def _compile_encoder(self, schema: Schema) -> tuple[Encoder, bytes]:
        encoder = self._encoder(schema)
        prefix = b'{"schema":' + _dumps(self.as_json_schema(schema)).encode() + b',"payload":'
        entry = (encoder, prefix)
        self._encoders.put(schema, entry)
        return entry

    def as_json_schema(self, schema: Schema | None) -> dict[str, Any] | None:
        """Kafka's schema JSON, keys in the order Kafka writes them."""
        if schema is None:
            return None
        out: dict[str, Any] = {"type": _TYPE_TO_JSON[schema.type]}
        if schema.type is Type.ARRAY:
            out["items"] = self.as_json_schema(schema.value_schema)
        elif schema.type is Type.MAP:
            out["keys"] = self.as_json_schema(schema.key_schema)
            out["values"] = self.as_json_schema(schema.value_schema)
        elif schema.type is Type.STRUCT:
            fields = []
            for f in schema.fields:
                fj = dict(self.as_json_schema(f.schema) or {})
                fj["field"] = f.name
                fields.append(fj)
            out["fields"] = fields
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
            out["default"] = self._encoder(schema)(schema.default)
        return out

    def _encoder(self, schema: Schema) -> Encoder:
        """Compile `schema` into a function from a Connect value to a JSON-ready object."""
        inner = self._value_encoder(schema)
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

    def _value_encoder(self, schema: Schema) -> Encoder:
        t = schema.type
        name = schema.name
        if name == DECIMAL:
            scale = _decimal_scale(schema)
            if self.numeric_decimals:
                self._has_numeric = True

                def enc_decimal(v: Any) -> Any:
                    if not isinstance(v, decimal.Decimal):
                        raise DataError(f"Invalid type for Decimal, expected Decimal but was "
                                        f"{_typename(v)}")
                    return _Numeric(v)
                return enc_decimal

            def enc_decimal_b64(v: Any) -> Any:
                if not isinstance(v, decimal.Decimal):
                    raise DataError(f"Invalid type for Decimal, expected Decimal but was "
                                    f"{_typename(v)}")
                return base64.b64encode(decimal_to_bytes(v, scale)).decode("ascii")
            return enc_decimal_b64
        if name == DATE:
            def enc_date(v: Any) -> Any:
                if not isinstance(v, dt.date):
                    raise DataError(f"Invalid type for Date, expected date but was {_typename(v)}")
                return date_to_days(v)
            return enc_date
        if name == TIME:
            def enc_time(v: Any) -> Any:
                if not isinstance(v, dt.time | dt.datetime):
                    raise DataError(f"Invalid type for Time, expected time but was {_typename(v)}")
                return time_to_millis(v)
            return enc_time
        if name == TIMESTAMP:
            def enc_ts(v: Any) -> Any:
                if not isinstance(v, dt.datetime):
                    raise DataError(f"Invalid type for Timestamp, expected datetime but was "
                                    f"{_typename(v)}")
                return timestamp_to_millis(v)
            return enc_ts
        if t in _INT_RANGES:
            lo, hi = _INT_RANGES[t]
            tn = _tname(t)

            def enc_int(v: Any) -> Any:
                if type(v) is not int and (not isinstance(v, int) or isinstance(v, bool)):
                    raise DataError(f"Invalid type for {tn}: {_typename(v)}")
                if not lo <= v <= hi:
                    raise DataError(f"Value {v} is out of range for {tn}")
                return int(v)
            return enc_int
        if t in (Type.FLOAT32, Type.FLOAT64):
            tn = _tname(t)

            def enc_float(v: Any) -> Any:
                if type(v) is float:
                    return v
                if isinstance(v, bool) or not isinstance(v, int | float):
                    raise DataError(f"Invalid type for {tn}: {_typename(v)}")
                return float(v)
            return enc_float
        if t is Type.BOOLEAN:
            def enc_bool(v: Any) -> Any:
                if not isinstance(v, bool):
                    raise DataError(f"Invalid type for BOOLEAN: {_typename(v)}")
                return v
            return enc_bool
        if t is Type.STRING:
            def enc_str(v: Any) -> Any:
                if not isinstance(v, str):
                    raise DataError(f"Invalid type for STRING: {_typename(v)}")
                return v
            return enc_str
        if t is Type.BYTES:
            def enc_bytes(v: Any) -> Any:
                if not isinstance(v, bytes | bytearray | memoryview):
                    raise DataError(f"Invalid type for bytes type: {_typename(v)}")
                return base64.b64encode(v).decode("ascii")
            return enc_bytes
        if t is Type.ARRAY:
            if schema.value_schema is None:
                raise DataError("Array schema did not specify the element type")
            elem = self._encoder(schema.value_schema)

            def enc_array(v: Any) -> Any:
                if not isinstance(v, list | tuple):
                    raise DataError(f"Invalid type for ARRAY: {_typename(v)}")
                return [elem(x) for x in v]
            return enc_array
        if t is Type.MAP:
            if schema.key_schema is None or schema.value_schema is None:
                raise DataError("Map schema did not specify the key and value types")
            kenc, venc = self._encoder(schema.key_schema), self._encoder(schema.value_schema)
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
        if t is Type.STRUCT:
            fields = [(f.name, f.index, self._encoder(f.schema)) for f in schema.fields]

            def enc_struct(v: Any) -> Any:
                if not isinstance(v, Struct):
                    raise DataError(f"Invalid type for STRUCT: {_typename(v)}")
                if v.schema is not schema and v.schema != schema:
                    raise DataError("Mismatching schema: the struct's schema is not the record's "
                                    "schema")
                values = _struct_values(v)
                return {n: enc(values[i]) for n, i, enc in fields}
            return enc_struct
        raise DataError(f"Couldn't translate unsupported schema type {t}")

    def _encode_schemaless(self, v: Any) -> Any:
        """Infer the JSON form from the Python type, as Kafka does for schemaless data."""
        if v is None or isinstance(v, str | bool | int | float):
            return v
        if type(v) is dict:
            for k, x in v.items():
                if type(k) is not str or (x is not None and type(x) not in _PLAIN):
                    break
            else:
                return v  # flat and already JSON-ready: the common case, no copy
        if isinstance(v, Mapping):
            if all(isinstance(k, str) for k in v):
                return {k: self._encode_schemaless(x) for k, x in v.items()}
            return [[self._encode_schemaless(k), self._encode_schemaless(x)] for k, x in v.items()]
        if isinstance(v, list | tuple):
            return [self._encode_schemaless(x) for x in v]
        if isinstance(v, bytes | bytearray | memoryview):
            return base64.b64encode(v).decode("ascii")
        if isinstance(v, Struct):
            entry = self._encoders.get(v.schema) or self._compile_encoder(v.schema)
            return entry[0](v)
        if isinstance(v, decimal.Decimal):
            self._has_numeric = True
            return _Numeric(v)
        if isinstance(v, dt.datetime):
            return timestamp_to_millis(v)
        if isinstance(v, dt.date):
            return date_to_days(v)
        if isinstance(v, dt.time):
            return time_to_millis(v)
        raise DataError(f"Python type {_typename(v)} does not have a corresponding schema type")

    # -- bytes -> Connect data -------------------------------------------------------------
    def to_connect_data(self, topic: str, value: bytes | None,
                        headers: Headers | None = None) -> SchemaAndValue:
        if value is None:
            return _NULL
        if not self.schemas_enabled:
            try:
                return SchemaAndValue(None, _loads(value))
            except (ValueError, TypeError) as e:
                raise DataError(f"Converting byte[] to Kafka Connect data failed due to "
                                f"serialization error (topic {topic}): {e}") from e
        value = bytes(value)
        prefix = self._last_prefix
        if prefix is None or not value.startswith(prefix):
            prefix = next((p for p in self._decoders if value.startswith(p)), None)
        if prefix is not None:
            schema, decoder, exact = self._decoders[prefix]
            body = value[len(prefix):].rstrip()
            if body.endswith(b"}"):
                try:
                    payload = (_exact_decoder.decode(body[:-1].decode()) if exact
                               else _loads(body[:-1]))
                except (ValueError, UnicodeDecodeError):
                    pass  # not the compact layout after all: take the general path
                else:
                    self._last_prefix = prefix
                    return SchemaAndValue(schema, decoder(payload))
        return self._to_connect_general(topic, value)

    def _to_connect_general(self, topic: str, value: bytes) -> SchemaAndValue:
        try:
            text = value.decode("utf-8")
            envelope = _loads(text)
        except (ValueError, UnicodeDecodeError) as e:
            raise DataError(f"Converting byte[] to Kafka Connect data failed due to serialization "
                            f"error (topic {topic}): {e}") from e
        if not (isinstance(envelope, dict) and len(envelope) == 2 and "schema" in envelope
                and "payload" in envelope):
            raise DataError('JsonConverter with schemas.enable requires "schema" and "payload" '
                            "fields and may not contain additional fields. If you are trying to "
                            "deserialize plain JSON data, set schemas.enable=false in your "
                            "converter configuration.")
        schema_json = envelope["schema"]
        schema = self.as_connect_schema(schema_json)
        decoder, exact = self._decoder_for(schema)
        payload = envelope["payload"]
        if exact:
            payload = _exact_decoder.decode(text)["payload"]
        self._learn_prefix(text, schema, decoder, exact)
        return SchemaAndValue(schema, decoder(payload))

    def _learn_prefix(self, text: str, schema: Schema | None, decoder: Decoder,
                      exact: bool) -> None:
        """Remember the envelope's exact schema text so the next record skips parsing it."""
        head = '{"schema":'
        if not text.startswith(head):
            return
        try:
            _, end = _raw_decode(text, len(head))
        except ValueError:
            return
        if text.startswith(',"payload":', end):
            if len(self._decoders) >= self._cache_size:
                self._decoders.clear()
                self._last_prefix = None
            prefix = text[: end + len(',"payload":')].encode()
            self._decoders[prefix] = (schema, decoder, exact)
            self._last_prefix = prefix

    def _decoder_for(self, schema: Schema | None) -> tuple[Decoder, bool]:
        if schema is None:
            return (lambda v: v), False
        exact = self.numeric_decimals_in(schema)
        return self._decoder(schema), exact

    @staticmethod
    def numeric_decimals_in(schema: Schema | None) -> bool:
        """Whether the payload must be parsed with exact decimals (a Decimal anywhere inside)."""
        if schema is None:
            return False
        if schema.name == DECIMAL:
            return True
        return any(JsonConverter.numeric_decimals_in(s) for s in
                   (schema.key_schema, schema.value_schema, *(f.schema for f in schema.fields)))

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
        fields: tuple[Field, ...] = ()
        key_schema = value_schema = None
        if t is Type.ARRAY:
            if js.get("items") is None:
                raise DataError("Array schema did not specify the element type")
            value_schema = self.as_connect_schema(js["items"])
        elif t is Type.MAP:
            if "keys" not in js:
                raise DataError("Map schema did not specify the key type")
            if "values" not in js:
                raise DataError("Map schema did not specify the value type")
            key_schema = self.as_connect_schema(js["keys"])
            value_schema = self.as_connect_schema(js["values"])
        elif t is Type.STRUCT:
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
                fs = self.as_connect_schema(f)
                assert fs is not None
                out.append(Field(fname, i, fs))
            fields = tuple(out)
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
            default = self._decoder(schema)(js["default"])
            schema = Schema(type=t, optional=schema.optional, default=default, name=schema.name,
                            version=schema.version, doc=schema.doc, parameters=schema.parameters,
                            fields=fields, key_schema=key_schema, value_schema=value_schema)
        return schema

    def _decoder(self, schema: Schema) -> Decoder:
        inner = self._value_decoder(schema)
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

    def _value_decoder(self, schema: Schema) -> Decoder:
        t = schema.type
        name = schema.name
        if name == DECIMAL:
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
        if name in (DATE, TIME, TIMESTAMP):
            convert = {DATE: days_to_date, TIME: millis_to_time, TIMESTAMP: millis_to_timestamp}[name]
            label = name.rsplit(".", 1)[1]

            def dec_logical(v: Any) -> Any:
                if type(v) is not int:
                    raise DataError(f"Invalid type for {label}, underlying representation should "
                                    f"be integer but was {_typename(v)}")
                try:
                    return convert(v)
                except OverflowError as e:
                    raise DataError(f"{label} value {v} is out of range") from e
            return dec_logical
        if t in _INT_RANGES:
            lo, hi = _INT_RANGES[t]
            tn = _tname(t)

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
        if t in (Type.FLOAT32, Type.FLOAT64):
            tn = _tname(t)

            def dec_float(v: Any) -> Any:
                if type(v) is float:
                    return v
                if isinstance(v, bool) or not isinstance(v, int | float | decimal.Decimal):
                    raise DataError(f"Invalid value for {tn} field: {v!r}")
                return float(v)
            return dec_float
        if t is Type.BOOLEAN:
            def dec_bool(v: Any) -> Any:
                if type(v) is not bool:
                    raise DataError(f"Invalid value for BOOLEAN field: {v!r}")
                return v
            return dec_bool
        if t is Type.STRING:
            def dec_str(v: Any) -> Any:
                if type(v) is not str:
                    raise DataError(f"Invalid value for STRING field: {v!r}")
                return v
            return dec_str
        if t is Type.BYTES:
            def dec_bytes(v: Any) -> Any:
                if type(v) is not str:
                    raise DataError(f"Invalid bytes field: expected a base64 string, got {v!r}")
                try:
                    return base64.b64decode(v, validate=True)
                except (binascii.Error, ValueError) as e:
                    raise DataError(f"Invalid bytes field: {e}") from e
            return dec_bytes
        if t is Type.ARRAY:
            assert schema.value_schema is not None
            elem = self._decoder(schema.value_schema)

            def dec_array(v: Any) -> Any:
                if type(v) is not list:
                    raise DataError(f"Arrays should be encoded as JSON arrays, but found "
                                    f"{_typename(v)}")
                return [elem(x) for x in v]
            return dec_array
        if t is Type.MAP:
            assert schema.key_schema is not None and schema.value_schema is not None
            kdec, vdec = self._decoder(schema.key_schema), self._decoder(schema.value_schema)
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
        if t is Type.STRUCT:
            fields = [(f.name, self._decoder(f.schema)) for f in schema.fields]

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
        raise DataError(f"Unknown schema type: {t}")

    # -- whole columns (kctl/runtime/json_columns.py) --------------------------------------
    # Both return exactly what the per-record methods give, or None whenever that cannot be
    # guaranteed (unsupported schema, bad or unusual data); the runtime then converts record
    # by record and that path raises the precise error. pyarrow is imported only here.
    # Any failure in them means "not columnar": they never raise.

    def from_arrow(self, topic: str, schema: Schema, values: pa.Array) -> pa.Array | None:
        """Each row of `values` as `from_connect_data` encodes it (a binary array), or None."""
        if schema is None:
            return None
        from kctl.runtime import json_columns
        try:
            if not json_columns.supported(schema):
                return None
            prefix = None
            if self.schemas_enabled:
                entry = self._encoders.get(schema) or self._compile_encoder(schema)
                prefix = entry[1]
            return json_columns.encode_column(values, schema, prefix)
        except Exception:
            return None

    def to_arrow(self, topic: str, values: pa.Array | Sequence[bytes | None]
                 ) -> tuple[Schema, pa.Array] | None:
        """Envelopes that all carry one STRUCT schema, decoded into one column, or None."""
        if not self.schemas_enabled or len(values) == 0:
            return None
        import pyarrow as pa

        first = values[0].as_py() if isinstance(values, pa.Array) else values[0]
        if first is None:
            return None
        from kctl.runtime import json_columns
        try:
            found = json_columns.envelope_prefix(bytes(first))
            if found is None:
                return None
            prefix, schema_text = found
            schemas = self.__dict__.setdefault("_column_schemas", {})
            if prefix in schemas:
                schema = schemas[prefix]
            else:
                try:
                    schema = self.as_connect_schema(_loads(schema_text))
                except Exception:
                    schema = None
                if len(schemas) >= self._cache_size:
                    schemas.clear()
                schemas[prefix] = schema
            if schema is None:
                return None
            column = json_columns.decode_envelopes(values, prefix, schema)
        except Exception:
            return None
        return None if column is None else (schema, column)

    # -- headers ---------------------------------------------------------------------------
    def from_connect_header(self, topic: str, key: str, schema: Schema | None,
                            value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, key: str, value: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, value)

