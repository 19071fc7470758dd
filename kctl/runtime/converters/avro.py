"""Confluent's AvroConverter: Connect data as Avro in Confluent's wire format (a zero
byte, the schema's id in four bytes, the Avro binary), with the schema in a Schema
Registry: the one `schema.registry.url` names, or else the worker's own."""

from __future__ import annotations

import io
import json
import struct
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kctl.api.config import ConfigDef, ConfigType, Importance, ValidString
from kctl.api.converter import Converter
from kctl.api.data import Schema, SchemaAndValue
from kctl.api.records import Headers
from kctl.errors import ConfigError, DataError
from kctl.runtime.converters.avro_data import AvroData
from kctl.runtime.converters.registry_client import (
    HttpRegistryClient,
    LocalRegistryClient,
    RegistryClient,
)

if TYPE_CHECKING:
    import pyarrow as pa

MAGIC = 0
_HEADER = struct.Struct(">bI")
# The worker hands its own registry to converters under this key (not a user setting).
LOCAL_REGISTRY = "kctl.schema.registry"

STRATEGIES = {
    "TopicNameStrategy": "topic",
    "io.confluent.kafka.serializers.subject.TopicNameStrategy": "topic",
    "RecordNameStrategy": "record",
    "io.confluent.kafka.serializers.subject.RecordNameStrategy": "record",
    "TopicRecordNameStrategy": "topic_record",
    "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy": "topic_record",
}

_STRATEGY = ValidString(tuple(STRATEGIES), case_sensitive=True)

REGISTRY_CONFIG_DEF = (
    ConfigDef()
    .define("schema.registry.url", ConfigType.LIST, "", importance=Importance.HIGH,
            doc="Comma-separated URLs of the Schema Registry. Empty: the worker's own registry "
                "(schema.registry.enable), served at <listener>/schema-registry.")
    .define("auto.register.schemas", ConfigType.BOOLEAN, True, importance=Importance.MEDIUM,
            doc="Register a record's schema when it is new to its subject; false: look it up "
                "and fail the record when it is not there.")
    .define("use.latest.version", ConfigType.BOOLEAN, False, importance=Importance.LOW,
            doc="Serialize with the subject's latest schema instead of the record's own (with "
                "auto.register.schemas=false).")
    .define("key.subject.name.strategy", ConfigType.STRING, "TopicNameStrategy", _STRATEGY,
            Importance.MEDIUM, "How a key's subject is named: TopicNameStrategy (<topic>-key), "
            "RecordNameStrategy (the record's full name) or TopicRecordNameStrategy "
            "(<topic>-<record name>); Confluent's class names are accepted.")
    .define("value.subject.name.strategy", ConfigType.STRING, "TopicNameStrategy", _STRATEGY,
            Importance.MEDIUM, "How a value's subject is named, as key.subject.name.strategy.")
    .define("basic.auth.credentials.source", ConfigType.STRING, "USER_INFO",
            ValidString.in_("USER_INFO", "URL", "SASL_INHERIT"), Importance.LOW,
            "Where the registry's Basic credentials come from: USER_INFO "
            "(basic.auth.user.info) or URL (user:password@ in the URL).")
    .define("basic.auth.user.info", ConfigType.PASSWORD, None, importance=Importance.LOW,
            doc="USER:PASSWORD for the registry's Basic authentication.")
    .define("schema.registry.ssl.truststore.location", ConfigType.STRING, None,
            importance=Importance.LOW,
            doc="PEM file of the CAs that sign the registry's certificate (https URLs).")
    .define("schema.registry.ssl.keystore.location", ConfigType.STRING, None,
            importance=Importance.LOW,
            doc="PEM file with a client certificate and its key for the registry.")
    .define("connect.meta.data", ConfigType.BOOLEAN, True, importance=Importance.LOW,
            doc="Write connect.name, connect.version, connect.doc and connect.parameters "
                "into Avro schemas, so Connect schemas survive the round trip.")
    .define("enhanced.avro.schema.support", ConfigType.BOOLEAN, False, importance=Importance.LOW,
            doc="Accepted for Confluent's configurations: enums and fixed types always keep "
                "their names, symbols and sizes in Connect schema parameters "
                "(io.confluent.connect.avro.Enum, connect.fixed.size).")
)


def _subject(strategy: str, topic: str, is_key: bool, record_name: str | None) -> str:
    kind = STRATEGIES[strategy]
    if kind == "topic" or not record_name:
        return f"{topic}-{'key' if is_key else 'value'}"
    return record_name if kind == "record" else f"{topic}-{record_name}"


class SchemaRegistryConverter(Converter):
    """What Confluent's registry-backed converters share: the registry (the URL's, else the
    worker's own), subject names, schema ids cached both ways, and the wire format's
    header."""

    uses_schema_registry = True  # the worker hands it its own registry when no URL is set
    schema_type = "AVRO"

    def __init__(self) -> None:
        self._settings: dict[str, Any] = {}
        self._client: RegistryClient | None = None
        self._local: Any = None
        self._is_key = False
        self._urls: list[str] = []
        self._values: dict[str, Any] = REGISTRY_CONFIG_DEF.parse({})
        self._lock = threading.Lock()
        self._ids: dict[tuple[str, Schema], tuple[int, Any]] = {}
        self._by_id: dict[int, Any] = {}

    def config(self) -> ConfigDef:
        return REGISTRY_CONFIG_DEF

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        settings = dict(configs)
        self._local = settings.pop(LOCAL_REGISTRY, None)
        settings.pop("converter.type", None)
        known = {k: v for k, v in settings.items() if k in REGISTRY_CONFIG_DEF.names()}
        self._values = REGISTRY_CONFIG_DEF.parse(known)
        self._settings = settings
        self._is_key = is_key
        self._urls = [u for u in self._values["schema.registry.url"] if u]

    def _registry(self) -> RegistryClient:
        if self._client is None:
            if self._urls:
                self._client = HttpRegistryClient(self._urls, self._settings)
            elif self._local is not None:
                self._client = LocalRegistryClient(self._local, self._settings)
            else:
                raise ConfigError(f"{type(self).__name__} needs schema.registry.url, or a "
                                  "worker that serves its own registry "
                                  "(schema.registry.enable=true)", key="schema.registry.url")
        return self._client

    def _registered_schema(self, schema: Schema) -> str:
        """The schema text this converter registers for a Connect schema."""
        raise NotImplementedError

    def _writer_id(self, topic: str, schema: Schema) -> tuple[int, str]:
        """The id a value of `schema` is written with, registering the schema (or looking
        it up) under the subject the strategy names; and the schema text of that id."""
        cache_key = (topic, schema)
        found = self._ids.get(cache_key)
        if found is not None:
            return found
        text = self._registered_schema(schema)
        strategy = self._values["key.subject.name.strategy" if self._is_key
                                else "value.subject.name.strategy"]
        subject = _subject(strategy, topic, self._is_key, schema.name)
        client = self._registry()
        if self._values["auto.register.schemas"]:
            schema_id = client.register(subject, text, self.schema_type)
        elif self._values["use.latest.version"]:
            schema_id, text = client.latest(subject)
        else:
            schema_id = client.lookup(subject, text, self.schema_type)
        with self._lock:
            self._ids[cache_key] = (schema_id, text)
        return schema_id, text

    @staticmethod
    def _schema_id(value: bytes) -> int:
        if len(value) < _HEADER.size or value[0] != MAGIC:
            first = value[0] if value else None
            hint = " (this looks like JSON, not Confluent's wire format)" \
                if first in (0x7B, 0x5B, 0x22) else ""
            shown = f"0x{first:02x}" if first is not None else "none"
            raise DataError(f"Unknown magic byte {shown}{hint}: this converter reads "
                            f"Confluent's wire format (0x00, a schema id, the encoded value)")
        return int(_HEADER.unpack_from(value)[1])

    def _reader_schema(self, schema_id: int, parse: Any) -> Any:
        """What `parse` makes of the text of schema `schema_id`, cached."""
        found = self._by_id.get(schema_id)
        if found is not None:
            return found
        text, schema_type = self._registry().schema(schema_id)
        if schema_type != self.schema_type:
            raise DataError(f"schema id {schema_id} is a {schema_type} schema, not "
                            f"{self.schema_type}")
        parsed = parse(text)
        with self._lock:
            self._by_id[schema_id] = parsed
        return parsed


class AvroConverter(SchemaRegistryConverter):
    """Confluent's io.confluent.connect.avro.AvroConverter."""

    def __init__(self) -> None:
        super().__init__()
        self._data = AvroData()
        self._parsed_writers: dict[int, Any] = {}

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        super().configure(configs, is_key)
        self._data = AvroData(bool(self._values["connect.meta.data"]),
                              bool(self._values["enhanced.avro.schema.support"]))

    def _registered_schema(self, schema: Schema) -> str:
        return json.dumps(self._data.from_connect_schema(schema), separators=(",", ":"))

    @staticmethod
    def _parsed(avro_schema: Any) -> Any:
        import fastavro

        return fastavro.parse_schema(avro_schema, _write_hint=False)

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Headers | None = None) -> bytes | None:
        import fastavro

        if value is None and (schema is None or schema.optional):
            return None
        if schema is None:
            raise DataError("AvroConverter needs a schema for every value (this one has none)")
        schema_id, text = self._writer_id(topic, schema)
        parsed = self._parsed_writers.get(schema_id)
        if parsed is None:
            parsed = self._parsed_writers.setdefault(schema_id, self._parsed(json.loads(text)))
        out = io.BytesIO()
        out.write(_HEADER.pack(MAGIC, schema_id))
        try:
            fastavro.schemaless_writer(out, parsed, self._data.to_avro_value(schema, value))
        except (ValueError, TypeError, AttributeError, OverflowError) as e:
            raise DataError(f"cannot write the value as Avro schema id {schema_id}: {e}") from e
        return out.getvalue()

    def _reader(self, text: str) -> tuple[Schema, Any, Any]:
        avro_schema = json.loads(text)
        return self._data.to_connect_schema(avro_schema), self._parsed(avro_schema), avro_schema

    # -- whole columns -------------------------------------------------------------------
    def from_arrow(self, topic: str, schema: Schema, values: pa.Array) -> pa.Array | None:
        """A column encoded at once (`avro_columns`), or None for the per-record path."""
        from kctl.runtime.converters import avro_columns

        if schema is None:
            return None
        try:
            schema_id, text = self._writer_id(topic, schema)
            if text != self._registered_schema(schema):  # use.latest.version: another schema
                return None
            return avro_columns.encode(schema, values, schema_id)
        except Exception:  # the per-record path names the record and applies the tolerance
            return None

    def to_arrow(self, topic: str, values: pa.Array | Sequence[bytes | None]
                 ) -> tuple[Schema, pa.Array] | None:
        """Records of one schema id decoded into one column, or None."""
        import pyarrow as pa

        from kctl.runtime.converters import avro_columns

        if len(values) == 0:
            return None
        try:
            column = values if isinstance(values, pa.Array) else pa.array(values, pa.binary())
            first = column[0].as_py()
            if first is None:
                return None
            connect, _, avro_schema = self._reader_schema(self._schema_id(first), self._reader)
            return connect, avro_columns.decode(connect, avro_schema, column)
        except Exception:
            return None

    def to_connect_data(self, topic: str, value: bytes | None,
                        headers: Headers | None = None) -> SchemaAndValue:
        import fastavro

        if value is None:
            return SchemaAndValue(None, None)
        schema_id = self._schema_id(value)
        connect, parsed, _ = self._reader_schema(schema_id, self._reader)
        try:
            decoded = fastavro.schemaless_reader(io.BytesIO(value[_HEADER.size:]), parsed, parsed)
        except (EOFError, ValueError, TypeError, IndexError, struct.error) as e:
            raise DataError(f"cannot read the value as Avro schema id {schema_id}: {e}") from e
        return SchemaAndValue(connect, self._data.to_connect_value(connect, decoded))
