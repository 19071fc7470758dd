"""Helpers shared by the built-in transforms: key/value variants, requirements, schema copies."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from kctl.api.config import ConfigDef, ConfigError
from kctl.api.data import Schema, SchemaBuilder, Struct, Type
from kctl.api.records import ConnectRecord, SinkRecord
from kctl.api.transform import Transformation
from kctl.errors import DataError

REPLACE_NULL_DOC = ("Whether to replace fields that have a default value and that are null to "
                    "the default value. When set to true, the default value is used, otherwise "
                    "null is used.")


def require_map(value: Any, purpose: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise DataError(f"Only Map objects supported in absence of schema for [{purpose}], "
                        f"found: {_type_name(value)}")
    return value


def require_map_or_null(value: Any, purpose: str) -> Mapping[str, Any] | None:
    return None if value is None else require_map(value, purpose)


def require_struct(value: Any, purpose: str) -> Struct:
    if not isinstance(value, Struct):
        raise DataError(f"Only Struct objects supported for [{purpose}], found: "
                        f"{_type_name(value)}")
    return value


def require_struct_or_null(value: Any, purpose: str) -> Struct | None:
    return None if value is None else require_struct(value, purpose)


def require_sink_record(record: ConnectRecord, purpose: str) -> SinkRecord:
    if not isinstance(record, SinkRecord):
        raise DataError(f"Only SinkRecord supported for [{purpose}], found: "
                        f"{type(record).__name__}")
    return record


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def copy_basics(schema: Schema, type_: Type | None = None) -> SchemaBuilder:
    """A builder with the name, version, doc and parameters of `schema` (Kafka's copySchemaBasics).

    Struct fields, optionality and defaults are not copied: callers decide those.
    """
    t = type_ or schema.type
    if t is Type.ARRAY and type_ is None and schema.value_schema is not None:
        b = SchemaBuilder.array(schema.value_schema)
    elif t is Type.MAP and type_ is None and schema.key_schema and schema.value_schema:
        b = SchemaBuilder.map(schema.key_schema, schema.value_schema)
    else:
        b = SchemaBuilder(t)
    if schema.name is not None:
        b.name(schema.name)
    if schema.version is not None:
        b.version(schema.version)
    if schema.doc is not None:
        b.doc(schema.doc)
    for k, v in (schema.parameters or {}).items():
        b.parameter(k, v)
    return b


def with_optional(schema: Schema, optional: bool, default: Any = None) -> Schema:
    """A copy of `schema` (all of it) with the given optionality and default."""
    return Schema(type=schema.type, optional=optional or schema.optional,
                  default=default if default is not None else schema.default,
                  name=schema.name, version=schema.version, doc=schema.doc,
                  parameters=schema.parameters, fields=schema.fields,
                  key_schema=schema.key_schema, value_schema=schema.value_schema)


class SchemaCache:
    """Input schema -> derived schema; identity first, then equality (as Kafka's LRU caches)."""

    def __init__(self, size: int = 64):
        self.size = size
        self._entries: dict[int, tuple[Schema, Any]] = {}
        self._by_value: dict[Schema, Any] = {}

    def get_or_build(self, schema: Schema, build: Callable[[Schema], Any]) -> Any:
        e = self._entries.get(id(schema))
        if e is not None and e[0] is schema:
            return e[1]
        result = self._by_value.get(schema)
        if result is None:
            result = build(schema)
            if len(self._by_value) >= self.size:
                self._by_value.clear()
            self._by_value[schema] = result
        if len(self._entries) >= self.size:
            self._entries.clear()
        self._entries[id(schema)] = (schema, result)
        return result


def field_value(struct: Struct, name: str, replace_null_with_default: bool) -> Any:
    return struct.get(name) if replace_null_with_default else struct.get_without_default(name)


class ConfiguredTransformation(Transformation[Any]):
    """Parses its props with its ConfigDef in configure(); subclasses read `self.cfg`."""

    CONFIG_DEF: ClassVar[ConfigDef] = ConfigDef()
    cfg: dict[str, Any]

    def config(self) -> ConfigDef:
        return self.CONFIG_DEF

    def configure(self, props: Mapping[str, Any]) -> None:
        self.cfg = self.CONFIG_DEF.parse(props)
        self.configured()

    def configured(self) -> None:
        """Cross-key checks and derived state once `self.cfg` is parsed."""


class KeyOrValue(ConfiguredTransformation):
    """Operates on the record key (`$Key` variant) or value (`$Value` variant)."""

    target: ClassVar[str] = ""

    def __init__(self) -> None:
        if self.target not in ("key", "value"):
            name = type(self).__name__
            raise ConfigError(f"{name} must be used as {name}$Key or {name}$Value")

    def operating_schema(self, r: ConnectRecord) -> Schema | None:
        return r.key_schema if self.target == "key" else r.value_schema

    def operating_value(self, r: ConnectRecord) -> Any:
        return r.key if self.target == "key" else r.value

    def new_record(self, r: ConnectRecord, schema: Schema | None, value: Any, **extra: Any) -> Any:
        if self.target == "key":
            return r.new_record(key_schema=schema, key=value, **extra)
        return r.new_record(value_schema=schema, value=value, **extra)


_JAVA_NAMED_GROUP = re.compile(r"(?<!\\)\(\?<(?![=!])")


def java_regex(pattern: str) -> re.Pattern[str]:
    """Compile a java.util.regex pattern; Java's `(?<name>...)` groups become Python's."""
    try:
        return re.compile(_JAVA_NAMED_GROUP.sub("(?P<", pattern))
    except re.error as e:
        raise ConfigError(f"Invalid regular expression: {e}") from e


def java_regex_validator(name: str, value: Any) -> None:
    if value is not None:
        try:
            java_regex(value)
        except ConfigError as e:
            raise ConfigError(str(e), key=name) from e

