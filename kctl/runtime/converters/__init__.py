"""Converters between connector data and bytes on the log, one concern per module:
`json` (Kafka Connect's JsonConverter: the envelope, schemas.enable, decimal.format, caches),
`json_schema` (schemas to and from Kafka's schema JSON, values encoded and decoded by schema,
from tables keyed by type and logical name), `columns` (JsonConverter's vectorised codec for
whole Arrow columns; it imports pyarrow, so nothing here imports it eagerly), `simple`
(StringConverter, ByteArrayConverter), `loading` (converters by alias, Kafka class name or
Python path) and `common` (logical values and JSON text shared by them).
"""

from kctl.runtime.converters.avro import REGISTRY_CONFIG_DEF, AvroConverter
from kctl.runtime.converters.common import (
    bytes_to_decimal,
    date_to_days,
    days_to_date,
    decimal_to_bytes,
    millis_to_time,
    millis_to_timestamp,
    time_to_millis,
    timestamp_to_millis,
)
from kctl.runtime.converters.json import JSON_CONFIG_DEF, JsonConverter
from kctl.runtime.converters.json_schema_registry import JsonSchemaConverter
from kctl.runtime.converters.loading import CONVERTER_ALIASES, load_converter, resolve_converter
from kctl.runtime.converters.protobuf import ProtobufConverter
from kctl.runtime.converters.simple import STRING_CONFIG_DEF, ByteArrayConverter, StringConverter

# Users and other Connect tools see these by class name (plugin listings, DLQ headers,
# configs): they keep the public path they have always had.
for _cls in (JsonConverter, StringConverter, ByteArrayConverter, AvroConverter,
             JsonSchemaConverter, ProtobufConverter):
    _cls.__module__ = __name__

__all__ = [
    "CONVERTER_ALIASES",
    "JSON_CONFIG_DEF",
    "REGISTRY_CONFIG_DEF",
    "STRING_CONFIG_DEF",
    "AvroConverter",
    "ByteArrayConverter",
    "JsonConverter",
    "JsonSchemaConverter",
    "ProtobufConverter",
    "StringConverter",
    "bytes_to_decimal",
    "date_to_days",
    "days_to_date",
    "decimal_to_bytes",
    "load_converter",
    "millis_to_time",
    "millis_to_timestamp",
    "resolve_converter",
    "time_to_millis",
    "timestamp_to_millis",
]
