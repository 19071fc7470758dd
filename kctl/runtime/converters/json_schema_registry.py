"""Confluent's JsonSchemaConverter: Connect data as JSON, its schema a JSON Schema in the
registry, in Confluent's wire format (a zero byte, the schema id, the JSON document).

Connect schemas map as Confluent's JsonSchemaData maps them: integers and numbers carry
`connect.type`, optional values are `oneOf` null and the type, logical types are named by
`title` with `connect.version` and `connect.parameters`, a struct is an object whose
properties carry `connect.index`.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import struct
from collections.abc import Mapping
from typing import Any

from kctl.api.config import ConfigDef
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
from kctl.runtime.converters.avro import REGISTRY_CONFIG_DEF, SchemaRegistryConverter

_HEADER = struct.Struct(">bI")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_CONNECT = {Type.INT8: ("integer", "int8"), Type.INT16: ("integer", "int16"),
            Type.INT32: ("integer", "int32"), Type.INT64: ("integer", "int64"),
            Type.FLOAT32: ("number", "float32"), Type.FLOAT64: ("number", "float64"),
            Type.BOOLEAN: ("boolean", None), Type.STRING: ("string", None),
            Type.BYTES: ("string", "bytes")}
_BY_CONNECT_TYPE = {"int8": Type.INT8, "int16": Type.INT16, "int32": Type.INT32,
                    "int64": Type.INT64, "float32": Type.FLOAT32, "float64": Type.FLOAT64,
                    "bytes": Type.BYTES}
_LOGICAL_BASE = {DECIMAL: ("number", None), DATE: ("integer", "int32"),
                 TIME: ("integer", "int32"), TIMESTAMP: ("integer", "int64")}


def to_json_schema(schema: Schema) -> dict[str, Any]:
    out = _non_optional(schema)
    if schema.optional:
        out = {"oneOf": [{"type": "null"}, out]}
    if schema.default is not None:
        out["default"] = to_json_value(schema, schema.default)
    return out


def _non_optional(schema: Schema) -> dict[str, Any]:
    out: dict[str, Any]
    if schema.name in _LOGICAL_BASE:
        json_type, connect_type = _LOGICAL_BASE[schema.name]
        out = {"type": json_type, "title": schema.name, "connect.version": schema.version or 1}
        if connect_type:
            out["connect.type"] = connect_type
        if schema.parameters:
            out["connect.parameters"] = dict(schema.parameters)
        return out
    t = schema.type
    if t in _CONNECT:
        json_type, connect_type = _CONNECT[t]
        out = {"type": json_type}
        if connect_type:
            out["connect.type"] = connect_type
    elif t is Type.ARRAY:
        assert schema.value_schema is not None
        out = {"type": "array", "items": to_json_schema(schema.value_schema)}
    elif t is Type.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        if schema.key_schema.type is Type.STRING and not schema.key_schema.optional:
            out = {"type": "object", "connect.type": "map",
                   "additionalProperties": to_json_schema(schema.value_schema)}
        else:
            out = {"type": "array", "connect.type": "map", "items": {
                "type": "object", "properties": {
                    "key": {**to_json_schema(schema.key_schema), "connect.index": 0},
                    "value": {**to_json_schema(schema.value_schema), "connect.index": 1}}}}
    else:
        out = {"type": "object", "properties": {
            f.name: {**to_json_schema(f.schema), "connect.index": f.index}
            for f in schema.fields}}
        required = [f.name for f in schema.fields if not f.schema.optional]
        if required:
            out["required"] = required
    if schema.name:
        out["title"] = schema.name
    if schema.version is not None:
        out["connect.version"] = schema.version
    if schema.doc:
        out["description"] = schema.doc
    if schema.parameters:
        out["connect.parameters"] = dict(schema.parameters)
    return out


def from_json_schema(doc: Any, optional: bool = False) -> Schema:
    if doc is True or doc == {}:
        raise DataError("a JSON Schema that allows anything has no Connect schema")
    if not isinstance(doc, Mapping):
        raise DataError(f"not a JSON Schema: {doc!r}")
    for key in ("oneOf", "anyOf"):
        if key in doc:
            branches = [b for b in doc[key] if not (isinstance(b, Mapping)
                                                    and b.get("type") == "null")]
            if len(branches) == 1:
                return from_json_schema(branches[0], True)
            raise DataError(f"a {key} of {len(branches)} types has no Connect schema")
    json_type = doc.get("type")
    if isinstance(json_type, list):
        rest = [x for x in json_type if x != "null"]
        if len(rest) != 1:
            raise DataError(f"type {json_type} has no Connect schema")
        return from_json_schema({**doc, "type": rest[0]}, True)
    title, version = doc.get("title"), doc.get("connect.version")
    params = dict(doc.get("connect.parameters") or {}) or None
    if title in _LOGICAL_BASE:
        base = {DECIMAL: Type.BYTES, DATE: Type.INT32, TIME: Type.INT32,
                TIMESTAMP: Type.INT64}[title]
        return Schema(base, optional=optional, name=title, version=version or 1,
                      parameters=params if title != DECIMAL else (params or {"scale": "0"}))
    connect_type = doc.get("connect.type")
    if json_type in ("integer", "number", "boolean", "string") and connect_type != "map":
        t = _BY_CONNECT_TYPE.get(connect_type or "") or {
            "integer": Type.INT64, "number": Type.FLOAT64, "boolean": Type.BOOLEAN,
            "string": Type.STRING}[json_type]
        return Schema(t, optional=optional, name=title, version=version, parameters=params,
                      doc=doc.get("description"))
    if json_type == "array":
        if connect_type == "map":
            props = doc["items"]["properties"]
            return Schema(Type.MAP, optional=optional, name=title, version=version,
                          key_schema=from_json_schema(props["key"]),
                          value_schema=from_json_schema(props["value"]))
        return Schema(Type.ARRAY, optional=optional, name=title, version=version,
                      value_schema=from_json_schema(doc.get("items", {"type": "string"})))
    if json_type == "object":
        if connect_type == "map" or ("properties" not in doc and
                                     isinstance(doc.get("additionalProperties"), Mapping)):
            return Schema(Type.MAP, optional=optional, name=title, version=version,
                          key_schema=Schema(Type.STRING),
                          value_schema=from_json_schema(doc["additionalProperties"]))
        props = doc.get("properties") or {}
        required = set(doc.get("required") or ())
        ordered = sorted(props.items(), key=lambda kv: kv[1].get("connect.index", 1 << 30)
                         if isinstance(kv[1], Mapping) else 1 << 30)
        fields = []
        for i, (name, sub) in enumerate(ordered):
            field_schema = from_json_schema(sub)
            if name not in required and not field_schema.optional:
                field_schema = Schema(field_schema.type, optional=True, name=field_schema.name,
                                      version=field_schema.version,
                                      parameters=field_schema.parameters,
                                      fields=field_schema.fields,
                                      key_schema=field_schema.key_schema,
                                      value_schema=field_schema.value_schema)
            fields.append(Field(name, i, field_schema))
        return Schema(Type.STRUCT, optional=optional, name=title, version=version,
                      parameters=params, doc=doc.get("description"), fields=tuple(fields))
    raise DataError(f"JSON Schema type {json_type!r} has no Connect schema")


def to_json_value(schema: Schema, value: Any) -> Any:
    if value is None:
        return None
    if schema.name == DECIMAL:
        return value  # written as a JSON number, exactly (decimal-aware encoder below)
    if schema.name == DATE:
        return (value - dt.date(1970, 1, 1)).days
    if schema.name == TIME:
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + \
            value.microsecond // 1000
    if schema.name == TIMESTAMP:
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return (aware - _EPOCH) // dt.timedelta(milliseconds=1)
    t = schema.type
    if t is Type.BYTES:
        return base64.b64encode(bytes(value)).decode()
    if t is Type.STRUCT:
        return {f.name: to_json_value(f.schema, value.get(f.name)) for f in schema.fields}
    if t is Type.ARRAY:
        assert schema.value_schema is not None
        return [to_json_value(schema.value_schema, v) for v in value]
    if t is Type.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        if schema.key_schema.type is Type.STRING and not schema.key_schema.optional:
            return {k: to_json_value(schema.value_schema, v) for k, v in value.items()}
        return [{"key": to_json_value(schema.key_schema, k),
                 "value": to_json_value(schema.value_schema, v)} for k, v in value.items()]
    return value


def to_connect_value(schema: Schema, value: Any) -> Any:
    if value is None:
        return None
    if schema.name == DECIMAL:
        scale = int((schema.parameters or {}).get("scale", 0))
        exact = decimal.Context(prec=1000)  # the default context rounds at 28 digits
        return decimal.Decimal(str(value)).quantize(decimal.Decimal(1).scaleb(-scale),
                                                    context=exact)
    if schema.name == DATE:
        return dt.date(1970, 1, 1) + dt.timedelta(days=int(value))
    if schema.name == TIME:
        return (dt.datetime.min + dt.timedelta(milliseconds=int(value))).time()
    if schema.name == TIMESTAMP:
        return _EPOCH + dt.timedelta(milliseconds=int(value))
    t = schema.type
    if t is Type.BYTES:
        return base64.b64decode(value)
    if t in (Type.FLOAT32, Type.FLOAT64):
        return float(value)
    if t is Type.STRUCT:
        out = Struct(schema)
        for f in schema.fields:
            out.put(f.name, to_connect_value(f.schema, value.get(f.name)))
        return out
    if t is Type.ARRAY:
        assert schema.value_schema is not None
        return [to_connect_value(schema.value_schema, v) for v in value]
    if t is Type.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        if isinstance(value, Mapping):
            return {k: to_connect_value(schema.value_schema, v) for k, v in value.items()}
        return {to_connect_value(schema.key_schema, e["key"]):
                to_connect_value(schema.value_schema, e["value"]) for e in value}
    return value


def _dumps(value: Any) -> bytes:
    """JSON with decimals as exact numbers (json cannot write Decimal as a number itself)."""
    marker = {}

    def swap(v: Any) -> Any:
        if isinstance(v, decimal.Decimal):
            token = f"\x00dec{len(marker)}\x00"
            marker[token] = format(v, "f")
            return token
        if isinstance(v, dict):
            return {k: swap(x) for k, x in v.items()}
        if isinstance(v, list):
            return [swap(x) for x in v]
        return v

    text = json.dumps(swap(value), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    for token, digits in marker.items():
        text = text.replace(json.dumps(token), digits)
    return text.encode()


class JsonSchemaConverter(SchemaRegistryConverter):
    """Confluent's io.confluent.connect.json.JsonSchemaConverter."""

    schema_type = "JSON"

    def config(self) -> ConfigDef:
        return REGISTRY_CONFIG_DEF

    def _registered_schema(self, schema: Schema) -> str:
        return json.dumps(to_json_schema(schema), separators=(",", ":"))

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Headers | None = None) -> bytes | None:
        if value is None and (schema is None or schema.optional):
            return None
        if schema is None:
            raise DataError("JsonSchemaConverter needs a schema for every value (this one "
                            "has none)")
        schema_id, _ = self._writer_id(topic, schema)
        try:
            body = _dumps(to_json_value(schema, value))
        except ValueError as e:
            raise DataError(f"cannot write the value as JSON: {e}") from e
        return _HEADER.pack(0, schema_id) + body

    def to_connect_data(self, topic: str, value: bytes | None,
                        headers: Headers | None = None) -> SchemaAndValue:
        if value is None:
            return SchemaAndValue(None, None)
        schema_id = self._schema_id(value)
        connect = self._reader_schema(schema_id, lambda text: from_json_schema(json.loads(text)))
        try:
            doc = json.loads(value[_HEADER.size:], parse_float=decimal.Decimal)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise DataError(f"cannot read the value as JSON (schema id {schema_id}): {e}") from e
        return SchemaAndValue(connect, to_connect_value(connect, doc))
