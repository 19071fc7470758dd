"""Converters by name: the aliases users write in configs, Kafka's class names, dotted
Python paths.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from typing import Any

from kctl.api.converter import Converter
from kctl.errors import PluginError
from kctl.runtime.converters.avro import AvroConverter
from kctl.runtime.converters.json import JsonConverter
from kctl.runtime.converters.json_schema_registry import JsonSchemaConverter
from kctl.runtime.converters.protobuf import ProtobufConverter
from kctl.runtime.converters.simple import ByteArrayConverter, StringConverter

CONVERTER_ALIASES: dict[str, type[Converter]] = {
    "json": JsonConverter,
    "string": StringConverter,
    "bytes": ByteArrayConverter,
    "JsonConverter": JsonConverter,
    "StringConverter": StringConverter,
    "ByteArrayConverter": ByteArrayConverter,
    "org.apache.kafka.connect.json.JsonConverter": JsonConverter,
    "org.apache.kafka.connect.storage.StringConverter": StringConverter,
    "org.apache.kafka.connect.converters.ByteArrayConverter": ByteArrayConverter,
    "kctl.runtime.converters.JsonConverter": JsonConverter,
    "kctl.runtime.converters.StringConverter": StringConverter,
    "kctl.runtime.converters.ByteArrayConverter": ByteArrayConverter,
    "avro": AvroConverter,
    "AvroConverter": AvroConverter,
    "io.confluent.connect.avro.AvroConverter": AvroConverter,
    "kctl.runtime.converters.AvroConverter": AvroConverter,
    "jsonschema": JsonSchemaConverter,
    "JsonSchemaConverter": JsonSchemaConverter,
    "io.confluent.connect.json.JsonSchemaConverter": JsonSchemaConverter,
    "kctl.runtime.converters.JsonSchemaConverter": JsonSchemaConverter,
    "protobuf": ProtobufConverter,
    "ProtobufConverter": ProtobufConverter,
    "io.confluent.connect.protobuf.ProtobufConverter": ProtobufConverter,
    "kctl.runtime.converters.ProtobufConverter": ProtobufConverter,
}


def _known() -> str:
    return ", ".join(CONVERTER_ALIASES) + ", or a dotted Python path to a Converter class"


def _import_class(path: str) -> Any:
    module, sep, attr = path.partition(":")
    if not sep:
        module, _, attr = path.rpartition(".")
    if not module or not attr:
        raise ImportError(f"{path!r} is not a dotted path")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def resolve_converter(name_or_class: str) -> type[Converter]:
    """The converter class for a short name, a Kafka class name or a dotted Python path."""
    name = (name_or_class or "").strip()
    cls = CONVERTER_ALIASES.get(name) or CONVERTER_ALIASES.get(name.lower())
    if cls is not None:
        return cls
    if not name:
        raise PluginError(f"No converter configured; known converters: {_known()}")
    try:
        obj = _import_class(name)
    except (ImportError, AttributeError, ValueError) as e:
        raise PluginError(f"Unknown converter {name!r} ({e}); known converters: {_known()}") from e
    if not (inspect.isclass(obj) and issubclass(obj, Converter)) or inspect.isabstract(obj):
        raise PluginError(f"{name} is not a concrete Converter class; known converters: {_known()}")
    return obj


def load_converter(name_or_class: str, configs: Mapping[str, Any], is_key: bool) -> Converter:
    """Instantiate and configure a converter; PluginError for unknown names, ConfigError for bad keys."""
    cls = resolve_converter(name_or_class)
    conv = cls()
    conv.configure(dict(configs), is_key)
    return conv

