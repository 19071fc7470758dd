"""StringConverter and ByteArrayConverter: Kafka Connect's schema-less converters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kctl.api.config import ConfigDef, ConfigType, Importance, ValidString
from kctl.api.converter import Converter, HeaderConverter
from kctl.api.data import (
    OPTIONAL_BYTES_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    Schema,
    SchemaAndValue,
    Type,
)
from kctl.api.records import Headers
from kctl.errors import ConfigError, DataError

if TYPE_CHECKING:
    pass
from kctl.runtime.converters.common import _parse_converter_config, _typename

STRING_CONFIG_DEF = (
    ConfigDef()
    .define("converter.encoding", ConfigType.STRING, "UTF-8", None, Importance.HIGH,
            "The name of the Python codec used to encode and decode strings.")
    .define("converter.type", ConfigType.STRING, None, ValidString.in_("key", "value", "header"),
            Importance.LOW, "Set by the worker: whether this converter is for keys, values or headers.")
)


class StringConverter(Converter, HeaderConverter):
    """Strings as bytes in a configurable encoding; anything else is written as str(value)."""

    def __init__(self) -> None:
        self.encoding = "utf-8"

    def config(self) -> ConfigDef:
        return STRING_CONFIG_DEF

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        parsed = _parse_converter_config(STRING_CONFIG_DEF, configs, is_key)
        enc = parsed["converter.encoding"]
        try:
            "".encode(enc)
        except LookupError as e:
            prefix = "key.converter." if is_key else "value.converter."
            raise ConfigError(f"Invalid converter configuration {prefix}converter.encoding: "
                              f"unknown encoding {enc!r}", key=prefix + "converter.encoding") from e
        self.encoding = enc

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Headers | None = None) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
        try:
            return (value if isinstance(value, str) else str(value)).encode(self.encoding)
        except UnicodeEncodeError as e:
            raise DataError(f"Failed to serialize to a string in {self.encoding}: {e}") from e

    def to_connect_data(self, topic: str, value: bytes | None,
                        headers: Headers | None = None) -> SchemaAndValue:
        if value is None:
            return SchemaAndValue(OPTIONAL_STRING_SCHEMA, None)
        try:
            return SchemaAndValue(OPTIONAL_STRING_SCHEMA, bytes(value).decode(self.encoding))
        except UnicodeDecodeError as e:
            raise DataError(f"Failed to deserialize string from topic {topic} as "
                            f"{self.encoding}: {e}") from e

    def from_connect_header(self, topic: str, key: str, schema: Schema | None,
                            value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, key: str, value: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, value)


class ByteArrayConverter(Converter, HeaderConverter):
    """Pass-through for raw bytes, as Kafka's ByteArrayConverter."""

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Headers | None = None) -> bytes | None:
        if schema is not None and schema.type is not Type.BYTES:
            raise DataError(f"Invalid schema type for ByteArrayConverter: {schema.type.name}")
        if value is None:
            return None
        if isinstance(value, bytes):
            return value
        if isinstance(value, bytearray | memoryview):
            return bytes(value)
        raise DataError(f"ByteArrayConverter is not compatible with objects of type "
                        f"{_typename(value)}")

    def to_connect_data(self, topic: str, value: bytes | None,
                        headers: Headers | None = None) -> SchemaAndValue:
        return SchemaAndValue(OPTIONAL_BYTES_SCHEMA, value)

    def from_connect_header(self, topic: str, key: str, schema: Schema | None,
                            value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, key: str, value: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, value)

