"""Kafka Connect's JsonConverter: the envelope, schemas.enable, decimal.format and the caches.

It writes exactly what Kafka Connect's JsonConverter writes (the
`{"schema": ..., "payload": ...}` envelope, Kafka's schema JSON, logical types, maps with
non-string keys as arrays of pairs), so topics can be shared with Java Connect workers.

It runs once per record, so each schema is compiled once (by `json_schema`) into an encoder
and a decoder closure and cached here; envelopes whose schema text was seen before skip
schema parsing entirely. Whole Arrow columns go through `columns`.
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
from kctl.api.data import Schema, SchemaAndValue, Struct
from kctl.api.records import Headers
from kctl.errors import DataError
from kctl.runtime.converters.common import (
    _NULL,
    _PLAIN,
    Decoder,
    Encoder,
    _dumps,
    _exact_decoder,
    _loads,
    _parse_converter_config,
    _raw_decode,
    _typename,
    date_to_days,
    time_to_millis,
    timestamp_to_millis,
)
from kctl.runtime.converters.json_schema import JsonSchemaCodec, Numeric, needs_exact_decimals

if TYPE_CHECKING:
    import pyarrow as pa

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
        self._codec = JsonSchemaCodec(self.numeric_decimals, self.replace_null)
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
        if self._codec.has_numeric:
            text = _dumps(self._mark_numeric(payload))
            text = text.replace(f'"\\u0000{self._nonce}', "").replace(f'{self._nonce}\\u0000"', "")
            return text.encode()
        return _dumps(payload).encode()

    def _mark_numeric(self, v: Any) -> Any:
        if isinstance(v, Numeric):
            return f"\x00{self._nonce}{v.text}{self._nonce}\x00"
        if isinstance(v, dict):
            return {k: self._mark_numeric(x) for k, x in v.items()}
        if isinstance(v, list):
            return [self._mark_numeric(x) for x in v]
        return v

    def _compile_encoder(self, schema: Schema) -> tuple[Encoder, bytes]:
        encoder = self._codec.encoder(schema)
        prefix = b'{"schema":' + _dumps(self.as_json_schema(schema)).encode() + b',"payload":'
        entry = (encoder, prefix)
        self._encoders.put(schema, entry)
        return entry

    def as_json_schema(self, schema: Schema | None) -> dict[str, Any] | None:
        """Kafka's schema JSON, keys in the order Kafka writes them."""
        return self._codec.as_json_schema(schema)

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
            self._codec.has_numeric = True
            return Numeric(v)
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
        return self._codec.decoder(schema), needs_exact_decimals(schema)

    @staticmethod
    def numeric_decimals_in(schema: Schema | None) -> bool:
        """Whether the payload must be parsed with exact decimals (a Decimal anywhere inside)."""
        return needs_exact_decimals(schema)

    def as_connect_schema(self, js: Any) -> Schema | None:
        """Parse Kafka's schema JSON into a Schema."""
        return self._codec.as_connect_schema(js)

    # -- whole columns (the `columns` module) ----------------------------------------------
    # Both return exactly what the per-record methods give, or None whenever that cannot be
    # guaranteed (unsupported schema, bad or unusual data); the runtime then converts record
    # by record and that path raises the precise error. pyarrow is imported only here.
    # Any failure in them means "not columnar": they never raise.

    def from_arrow(self, topic: str, schema: Schema, values: pa.Array) -> pa.Array | None:
        """Each row of `values` as `from_connect_data` encodes it (a binary array), or None."""
        if schema is None:
            return None
        from kctl.runtime.converters import columns
        try:
            if not columns.supported(schema, logical=True):
                return None
            prefix = None
            if self.schemas_enabled:
                entry = self._encoders.get(schema) or self._compile_encoder(schema)
                prefix = entry[1]
            return columns.encode_column(values, schema, prefix, self.numeric_decimals)
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
        from kctl.runtime.converters import columns
        try:
            found = columns.envelope_prefix(bytes(first))
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
            column = columns.decode_envelopes(values, prefix, schema)
        except Exception:
            return None
        return None if column is None else (schema, column)

    # -- headers ---------------------------------------------------------------------------
    def from_connect_header(self, topic: str, key: str, schema: Schema | None,
                            value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, key: str, value: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, value)

