"""Connect schemas and values to Avro and back, as Confluent's AvroData maps them, so
topics written here are read by Confluent's AvroConverter and deserializers and the other
way round.

Optional fields are unions with null (null first, default null); logical types carry
`connect.name`, `connect.version` and `connect.parameters`; int8 and int16 are Avro ints
with `connect.type`; a struct without a name is `io.confluent.connect.avro.ConnectDefault`;
a map whose keys are not strings is an array of `MapEntry` records.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping
from typing import Any

from kctl.api.data import (
    DATE,
    DECIMAL,
    TIME,
    TIMESTAMP,
    Field,
    Schema,
    Struct,
    Type,
)
from kctl.errors import DataError

NAMESPACE = "io.confluent.connect.avro"
DEFAULT_NAME = "ConnectDefault"
DEFAULT_PRECISION = 64
ENUM = "io.confluent.connect.avro.Enum"  # Confluent's parameters for an enum's name and symbols
FIXED_SIZE = "connect.fixed.size"

_PRIMITIVE = {
    Type.INT8: "int", Type.INT16: "int", Type.INT32: "int", Type.INT64: "long",
    Type.FLOAT32: "float", Type.FLOAT64: "double", Type.BOOLEAN: "boolean",
    Type.STRING: "string", Type.BYTES: "bytes",
}
_FROM_AVRO = {"int": Type.INT32, "long": Type.INT64, "float": Type.FLOAT32,
              "double": Type.FLOAT64, "boolean": Type.BOOLEAN, "string": Type.STRING,
              "bytes": Type.BYTES}
_LOGICAL = {DATE: "date", TIME: "time-millis", TIMESTAMP: "timestamp-millis"}
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class AvroData:
    """One mapping per converter: named records are defined once per schema."""

    def __init__(self, connect_meta_data: bool = True, enhanced: bool = False):
        self.meta = connect_meta_data
        self.enhanced = enhanced

    # -- schemas: Connect -> Avro --------------------------------------------------------
    def from_connect_schema(self, schema: Schema) -> Any:
        return self._to_avro(schema, set(), top=True)

    def _to_avro(self, schema: Schema, defined: set[str], top: bool = False) -> Any:
        avro = self._non_optional(schema, defined)
        if schema.optional:
            default = schema.default
            if default is not None:
                return [avro, "null"]
            return ["null", avro]
        return avro

    def _meta(self, out: dict[str, Any], schema: Schema) -> dict[str, Any]:
        if not self.meta:
            return out
        if schema.name and schema.type is not Type.STRUCT:
            out["connect.name"] = schema.name
        if schema.version is not None:
            out["connect.version"] = schema.version
        if schema.doc:
            out["connect.doc"] = schema.doc
        if schema.parameters:
            out["connect.parameters"] = dict(schema.parameters)
        return out

    def _non_optional(self, schema: Schema, defined: set[str]) -> Any:
        t = schema.type
        if schema.name == DECIMAL:
            params = dict(schema.parameters or {})
            scale = int(params.get("scale", 0))
            precision = int(params.get("connect.decimal.precision", DEFAULT_PRECISION))
            out: dict[str, Any] = {"type": "bytes", "scale": scale, "precision": precision,
                                   "logicalType": "decimal"}
            out = self._meta(out, schema)
            if self.meta:
                out["connect.name"] = DECIMAL
            return out
        if schema.name in _LOGICAL:
            out = {"type": _PRIMITIVE[t], "logicalType": _LOGICAL[schema.name]}
            out = self._meta(out, schema)
            if self.meta:
                out["connect.name"] = schema.name
            return out
        params = dict(schema.parameters or {})
        if t is Type.STRING and ENUM in params:
            full = params[ENUM]
            namespace, _, name = full.rpartition(".")
            if full in defined:
                return full
            defined.add(full)
            symbols = [v for k, v in params.items() if k.startswith(ENUM + ".")]
            enum: dict[str, Any] = {"type": "enum", "name": name, "symbols": symbols}
            if namespace:
                enum["namespace"] = namespace
            return self._meta(enum, schema)
        if t is Type.BYTES and FIXED_SIZE in params:
            full = schema.name or f"{NAMESPACE}.Fixed"
            namespace, _, name = full.rpartition(".")
            if full in defined:
                return full
            defined.add(full)
            fixed: dict[str, Any] = {"type": "fixed", "name": name, "size": int(params[FIXED_SIZE])}
            if namespace:
                fixed["namespace"] = namespace
            return self._meta(fixed, schema)
        if t in _PRIMITIVE:
            out = {"type": _PRIMITIVE[t]}
            if t in (Type.INT8, Type.INT16):
                out["connect.type"] = t.value
            out = self._meta(out, schema)
            return out if len(out) > 1 else out["type"]
        if t is Type.ARRAY:
            assert schema.value_schema is not None
            return self._meta({"type": "array",
                               "items": self._to_avro(schema.value_schema, defined)}, schema)
        if t is Type.MAP:
            assert schema.key_schema is not None and schema.value_schema is not None
            if schema.key_schema.type is Type.STRING and not schema.key_schema.optional:
                return self._meta({"type": "map",
                                   "values": self._to_avro(schema.value_schema, defined)}, schema)
            entry = f"{NAMESPACE}.MapEntry"
            if entry in defined:
                return self._meta({"type": "array", "items": entry}, schema)
            defined.add(entry)
            return self._meta({"type": "array", "items": {
                "type": "record", "name": "MapEntry", "namespace": NAMESPACE,
                "fields": [{"name": "key", "type": self._to_avro(schema.key_schema, defined)},
                           {"name": "value",
                            "type": self._to_avro(schema.value_schema, defined)}]}}, schema)
        # a struct
        full = schema.name or f"{NAMESPACE}.{DEFAULT_NAME}"
        if full in defined:
            return full
        defined.add(full)
        namespace, _, name = full.rpartition(".")
        record: dict[str, Any] = {"type": "record", "name": name}
        if namespace:
            record["namespace"] = namespace
        if schema.doc:
            record["doc"] = schema.doc
        record["fields"] = [self._field(f, defined) for f in schema.fields]
        if self.meta:
            if schema.version is not None:
                record["connect.version"] = schema.version
            if schema.parameters:
                record["connect.parameters"] = dict(schema.parameters)
            if schema.name:
                record["connect.name"] = schema.name
        return record

    def _field(self, f: Field, defined: set[str]) -> dict[str, Any]:
        out: dict[str, Any] = {"name": f.name, "type": self._to_avro(f.schema, defined)}
        if f.schema.optional:
            out["default"] = None if f.schema.default is None else \
                self._default(f.schema, f.schema.default)
        elif f.schema.default is not None:
            out["default"] = self._default(f.schema, f.schema.default)
        return out

    def _default(self, schema: Schema, value: Any) -> Any:
        avro = self.to_avro_value(schema, value)
        if isinstance(avro, bytes):
            return avro.decode("latin-1")  # Avro's JSON encoding of bytes defaults
        if isinstance(avro, dt.datetime | dt.date | dt.time | decimal.Decimal):
            return self._logical_default(schema, value)
        return avro

    @staticmethod
    def _logical_default(schema: Schema, value: Any) -> Any:
        if schema.name == DATE:
            return (value - dt.date(1970, 1, 1)).days
        if schema.name == TIME:
            return (value.hour * 3600 + value.minute * 60 + value.second) * 1000 + \
                value.microsecond // 1000
        if schema.name == TIMESTAMP:
            aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
            return (aware - _EPOCH) // dt.timedelta(milliseconds=1)
        scale = int((schema.parameters or {}).get("scale", 0))
        unscaled = int(value.scaleb(scale))
        length = max(1, (unscaled.bit_length() + 8) // 8)
        return unscaled.to_bytes(length, "big", signed=True).decode("latin-1")

    # -- schemas: Avro -> Connect --------------------------------------------------------
    def to_connect_schema(self, avro: Any) -> Schema:
        return self._from_avro(avro, {}, optional=False, default=None)

    def _from_avro(self, avro: Any, named: dict[str, Any], optional: bool,
                   default: Any) -> Schema:
        if isinstance(avro, list):
            branches = [b for b in avro if b != "null"]
            if len(branches) == 1 and len(avro) == 2:
                return self._from_avro(branches[0], named, True, default)
            raise DataError(f"Avro union {avro!r} has no Connect schema (only [null, T] does)")
        if isinstance(avro, str):
            if avro in named:
                return self._from_avro(named[avro], named, optional, default)
            avro = {"type": avro}
        t = avro["type"]
        if isinstance(t, dict | list):
            return self._from_avro(t, named, optional, default)
        name = avro.get("connect.name")
        params = dict(avro.get("connect.parameters") or {})
        version = avro.get("connect.version")
        doc = avro.get("connect.doc")
        logical = avro.get("logicalType")
        if logical == "decimal" or name == DECIMAL:
            params.setdefault("scale", str(avro.get("scale", 0)))
            if int(avro.get("precision", DEFAULT_PRECISION)) != DEFAULT_PRECISION:
                params.setdefault("connect.decimal.precision", str(avro["precision"]))
            return Schema(Type.BYTES, optional=optional, name=DECIMAL, version=version or 1,
                          parameters=params, doc=doc)
        for connect_name, avro_logical in _LOGICAL.items():
            if name == connect_name or logical == avro_logical:
                base = Type.INT64 if connect_name == TIMESTAMP else Type.INT32
                return Schema(base, optional=optional, name=connect_name, version=version or 1,
                              parameters=params or None, doc=doc)
        if logical in ("timestamp-micros", "local-timestamp-millis", "local-timestamp-micros"):
            return Schema(Type.INT64, optional=optional, name=TIMESTAMP, version=1,
                          parameters={**params, "kctl.avro.logical": logical})
        if logical == "time-micros":
            return Schema(Type.INT32, optional=optional, name=TIME, version=1,
                          parameters={**params, "kctl.avro.logical": logical})
        if t in _FROM_AVRO:
            connect_type = avro.get("connect.type")
            base = Type(connect_type) if connect_type in ("int8", "int16") else _FROM_AVRO[t]
            return Schema(base, optional=optional, name=name, version=version,
                          parameters=params or None, doc=doc)
        if t == "enum":
            full = self._define(avro, named)
            params = {**params, ENUM: full,
                      **{f"{ENUM}.{symbol}": symbol for symbol in avro["symbols"]}}
            return Schema(Type.STRING, optional=optional, name=name, version=version, doc=doc,
                          parameters=params)
        if t == "fixed":
            full = self._define(avro, named)
            return Schema(Type.BYTES, optional=optional, name=name or full, version=version,
                          doc=doc, parameters={**params, FIXED_SIZE: str(avro["size"])})
        if t == "array":
            items = avro["items"]
            item_name = items if isinstance(items, str) else items.get("name") \
                if isinstance(items, dict) else None
            if item_name in ("MapEntry", f"{NAMESPACE}.MapEntry"):
                entry = named.get(f"{NAMESPACE}.MapEntry", items) if isinstance(items, str) \
                    else items
                if isinstance(entry, dict):
                    self._define(entry, named)
                    fields = {f["name"]: f["type"] for f in entry["fields"]}
                    return Schema(Type.MAP, optional=optional, name=name, version=version,
                                  key_schema=self._from_avro(fields["key"], named, False, None),
                                  value_schema=self._from_avro(fields["value"], named, False,
                                                               None))
            return Schema(Type.ARRAY, optional=optional, name=name, version=version,
                          value_schema=self._from_avro(items, named, False, None))
        if t == "map":
            return Schema(Type.MAP, optional=optional, name=name, version=version,
                          key_schema=Schema(Type.STRING),
                          value_schema=self._from_avro(avro["values"], named, False, None))
        if t == "record":
            full = self._define(avro, named)
            fields = []
            for i, f in enumerate(avro["fields"]):
                fields.append(Field(f["name"], i, self._from_avro(f["type"], named, False,
                                                                  f.get("default"))))
            connect_name = name or (None if full == f"{NAMESPACE}.{DEFAULT_NAME}" else full)
            return Schema(Type.STRUCT, optional=optional, name=connect_name,
                          version=version, doc=avro.get("doc"), parameters=params or None,
                          fields=tuple(fields))
        raise DataError(f"Avro type {t!r} has no Connect schema")

    @staticmethod
    def _define(avro: dict[str, Any], named: dict[str, Any]) -> str:
        name = avro["name"]
        namespace = avro.get("namespace")
        full = name if "." in name or not namespace else f"{namespace}.{name}"
        named[full] = avro
        named.setdefault(name, avro)
        return full

    # -- values --------------------------------------------------------------------------
    def to_avro_value(self, schema: Schema, value: Any) -> Any:
        """A Connect value as fastavro writes it (logical values as Python objects)."""
        if value is None:
            if not schema.optional and schema.default is None:
                raise DataError("a null value for a required schema")
            return None if schema.default is None else self.to_avro_value(schema, schema.default)
        if schema.name in (DECIMAL, DATE, TIME):
            return value
        if schema.name == TIMESTAMP:
            return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        t = schema.type
        if t is Type.STRUCT:
            if not isinstance(value, Struct):
                raise DataError(f"a struct value is a {type(value).__name__}, not a Struct")
            return {f.name: self.to_avro_value(f.schema, value.get(f.name)) for f in schema.fields}
        if t is Type.ARRAY:
            assert schema.value_schema is not None
            return [self.to_avro_value(schema.value_schema, v) for v in value]
        if t is Type.MAP:
            assert schema.key_schema is not None and schema.value_schema is not None
            if schema.key_schema.type is Type.STRING and not schema.key_schema.optional:
                return {k: self.to_avro_value(schema.value_schema, v) for k, v in value.items()}
            return [{"key": self.to_avro_value(schema.key_schema, k),
                     "value": self.to_avro_value(schema.value_schema, v)}
                    for k, v in value.items()]
        if t is Type.BYTES:
            return bytes(value)
        return value

    def to_connect_value(self, schema: Schema, value: Any) -> Any:
        if value is None:
            return None
        if schema.name == TIMESTAMP:
            if isinstance(value, int):
                return _EPOCH + dt.timedelta(milliseconds=value)
            return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        if schema.name in (DECIMAL, DATE, TIME):
            if schema.name == DATE and isinstance(value, int):
                return dt.date(1970, 1, 1) + dt.timedelta(days=value)
            if schema.name == TIME and isinstance(value, int):
                return (dt.datetime.min + dt.timedelta(milliseconds=value)).time()
            if schema.name == DECIMAL and isinstance(value, bytes):
                scale = int((schema.parameters or {}).get("scale", 0))
                return decimal.Decimal(int.from_bytes(value, "big", signed=True)).scaleb(-scale)
            return value
        t = schema.type
        if t is Type.STRUCT:
            out = Struct(schema)
            for f in schema.fields:
                out.put(f.name, self.to_connect_value(f.schema, value.get(f.name)))
            return out
        if t is Type.ARRAY:
            assert schema.value_schema is not None
            return [self.to_connect_value(schema.value_schema, v) for v in value]
        if t is Type.MAP:
            assert schema.key_schema is not None and schema.value_schema is not None
            if isinstance(value, Mapping):
                return {k: self.to_connect_value(schema.value_schema, v) for k, v in value.items()}
            return {self.to_connect_value(schema.key_schema, e["key"]):
                    self.to_connect_value(schema.value_schema, e["value"]) for e in value}
        return value
