"""Header SMTs: InsertHeader, DropHeaders, HeaderFrom."""

from __future__ import annotations

from typing import Any

from kctl.api.config import NO_DEFAULT, ConfigDef, ConfigType, Importance, ValidString
from kctl.api.data import (
    BOOLEAN_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaAndValue,
    Struct,
    Type,
)
from kctl.api.records import ConnectRecord
from kctl.api.transform import Transformation
from kctl.errors import ConfigError, DataError
from kctl.transforms._base import (
    REPLACE_NULL_DOC,
    ConfiguredTransformation,
    KeyOrValue,
    SchemaCache,
    copy_basics,
    field_value,
    require_map,
    require_struct,
)


def _non_empty_list(name: str, value: Any) -> None:
    if not value:
        raise ConfigError("Empty list", key=name)


def parse_literal(text: str) -> SchemaAndValue:
    """Infer a typed value from a literal, as Kafka's Values.parseString does for scalars."""
    s = text.strip()
    if s.lower() in ("true", "false"):
        return SchemaAndValue(BOOLEAN_SCHEMA, s.lower() == "true")
    try:
        n = int(s)
    except ValueError:
        pass
    else:
        for schema, bits in ((INT8_SCHEMA, 8), (INT16_SCHEMA, 16), (INT32_SCHEMA, 32),
                             (INT64_SCHEMA, 64)):
            if -(1 << (bits - 1)) <= n < (1 << (bits - 1)):
                return SchemaAndValue(schema, n)
        return SchemaAndValue(STRING_SCHEMA, text)
    if any(ch in s for ch in ".eE") and not s.lower().startswith(("nan", "inf", "-inf", "+inf")):
        try:
            return SchemaAndValue(FLOAT64_SCHEMA, float(s))
        except ValueError:
            pass
    return SchemaAndValue(STRING_SCHEMA, text)


class InsertHeader(ConfiguredTransformation, Transformation[Any]):
    """Add a header with a literal value to every record."""

    CONFIG_DEF = (
        ConfigDef()
        .define("header", ConfigType.STRING, NO_DEFAULT, None, Importance.HIGH,
                "The name of the header.")
        .define("value.literal", ConfigType.STRING, NO_DEFAULT, None, Importance.HIGH,
                "The literal value that is to be set as the header value on all records."))

    def configured(self) -> None:
        self.header = self.cfg["header"]
        self.literal = parse_literal(self.cfg["value.literal"])

    def apply(self, record: ConnectRecord) -> Any:
        headers = record.headers.copy()
        headers.add(self.header, self.literal.value, self.literal.schema)
        return record.new_record(headers=headers)


class DropHeaders(ConfiguredTransformation, Transformation[Any]):
    """Remove every header with one of the given names."""

    CONFIG_DEF = (
        ConfigDef()
        .define("headers", ConfigType.LIST, NO_DEFAULT, _non_empty_list, Importance.HIGH,
                "The name of the headers to be removed."))

    def configured(self) -> None:
        self.names = set(self.cfg["headers"])

    def apply(self, record: ConnectRecord) -> Any:
        if not any(h.key in self.names for h in record.headers):
            return record
        headers = record.headers.copy()
        for name in self.names:
            headers.remove(name)
        return record.new_record(headers=headers)


class HeaderFrom(KeyOrValue):
    """Move or copy fields of the key/value into headers."""

    CONFIG_DEF = (
        ConfigDef()
        .define("fields", ConfigType.LIST, NO_DEFAULT, _non_empty_list, Importance.HIGH,
                "Field names in the record whose values are to be copied or moved to headers.")
        .define("headers", ConfigType.LIST, NO_DEFAULT, _non_empty_list, Importance.HIGH,
                "Header names, in the same order as the field names listed in the fields "
                "configuration property.")
        .define("operation", ConfigType.STRING, NO_DEFAULT,
                ValidString.in_("move", "copy", case_sensitive=True), Importance.HIGH,
                "Either move if the fields are to be moved to the headers (removed from the "
                "key/value), or copy if the fields are to be copied to the headers (retained in "
                "the key/value).")
        .define("replace.null.with.default", ConfigType.BOOLEAN, True, None, Importance.MEDIUM,
                REPLACE_NULL_DOC))

    def configured(self) -> None:
        self.fields = list(self.cfg["fields"])
        self.headers = list(self.cfg["headers"])
        if len(self.fields) != len(self.headers):
            raise ConfigError("'headers' config must have the same number of elements as "
                              "'fields' config.", key="headers")
        self.move = self.cfg["operation"] == "move"
        self.replace_null = self.cfg["replace.null.with.default"]
        self._schemas = SchemaCache()

    def apply(self, record: ConnectRecord) -> Any:
        purpose = "header " + ("move" if self.move else "copy")
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        headers = record.headers.copy()
        if schema is None:
            m = require_map(value, purpose)
            updated = dict(m)
            for f, h in zip(self.fields, self.headers, strict=True):
                if self.move:
                    updated.pop(f, None)
                headers.add(h, m.get(f), None)
            return self.new_record(record, None, updated, headers=headers)
        s = require_struct(value, purpose)
        for f, h in zip(self.fields, self.headers, strict=True):
            field = schema.field(f) if schema.type is Type.STRUCT else None
            if field is None:
                raise DataError(f"Field {f!r} does not exist in the record's schema "
                                f"({purpose})")
            headers.add(h, field_value(s, f, self.replace_null), field.schema)
        if not self.move:
            return self.new_record(record, schema, s, headers=headers)
        updated_schema = self._schemas.get_or_build(schema, self._move_schema)
        out = Struct(updated_schema)
        for fld in updated_schema.fields:
            out.put(fld.name, field_value(s, fld.name, self.replace_null))
        return self.new_record(record, updated_schema, out, headers=headers)

    def _move_schema(self, schema: Schema) -> Schema:
        b = copy_basics(schema, Type.STRUCT)
        for f in schema.fields:
            if f.name not in self.fields:
                b.field(f.name, f.schema)
        if schema.optional:
            b.optional()
        return b.build()


class HeaderFromKey(HeaderFrom):
    target = "key"


class HeaderFromValue(HeaderFrom):
    target = "value"
