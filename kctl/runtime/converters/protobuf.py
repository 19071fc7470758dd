"""Confluent's ProtobufConverter: Connect structs as proto3 messages in Confluent's wire
format (a zero byte, the schema id, the message-indexes array, the message), the schema
registered as Confluent's Python serializer registers it: a base64 FileDescriptorProto.
It reads schemas registered either way: base64, or .proto text (as Confluent's Java
serializer registers them), compiled with the files they import (registry/protobuf.py).

Connect schemas map as Confluent's ProtobufData maps them: a struct is a message named
after the schema (its namespace the package), fields numbered index + 1; int8 and int16 are
int32 with `connect.type` in the field's `confluent.field_meta`; Decimal is
confluent.type.Decimal, Date google.type.Date, Time google.type.TimeOfDay, Timestamp
google.protobuf.Timestamp. Optional fields are proto3 `optional` (what Confluent writes with
optional.for.nullables=true), so a null stays a null.
"""

from __future__ import annotations

import base64
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
    SchemaAndValue,
    Struct,
    Type,
)
from kctl.api.records import Headers
from kctl.errors import DataError
from kctl.runtime.converters.avro import _HEADER, MAGIC, SchemaRegistryConverter
from kctl.runtime.converters.common import bytes_to_decimal, decimal_to_bytes

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_DEPENDENCIES = {TIMESTAMP: "google/protobuf/timestamp.proto", DATE: "google/type/date.proto",
                 TIME: "google/type/timeofday.proto", DECIMAL: "confluent/type/decimal.proto"}
_MESSAGE_TYPES = {TIMESTAMP: ".google.protobuf.Timestamp", DATE: ".google.type.Date",
                  TIME: ".google.type.TimeOfDay", DECIMAL: ".confluent.type.Decimal"}
_LOGICAL_BY_MESSAGE = {v[1:]: k for k, v in _MESSAGE_TYPES.items()}
_META = "confluent/meta.proto"


def _fd():  # the FieldDescriptorProto class, imported when a converter is used
    from google.protobuf import descriptor_pb2

    return descriptor_pb2.FieldDescriptorProto


def _scalar_types() -> dict[Type, int]:
    f = _fd()
    return {Type.INT8: f.TYPE_INT32, Type.INT16: f.TYPE_INT32, Type.INT32: f.TYPE_INT32,
            Type.INT64: f.TYPE_INT64, Type.FLOAT32: f.TYPE_FLOAT, Type.FLOAT64: f.TYPE_DOUBLE,
            Type.BOOLEAN: f.TYPE_BOOL, Type.STRING: f.TYPE_STRING, Type.BYTES: f.TYPE_BYTES}


def pool() -> Any:
    """A descriptor pool holding the files Connect's logical types and Confluent's field
    metadata live in, for one schema's file to be added to."""
    from confluent_kafka.schema_registry.confluent import meta_pb2
    from confluent_kafka.schema_registry.confluent.type import decimal_pb2
    from google.protobuf import descriptor_pb2, descriptor_pool, timestamp_pb2
    from google.type import date_pb2, timeofday_pb2

    p = descriptor_pool.DescriptorPool()
    for module in (descriptor_pb2, timestamp_pb2, date_pb2, timeofday_pb2, decimal_pb2,
                   meta_pb2):
        p.AddSerializedFile(module.DESCRIPTOR.serialized_pb)
    return p


# --- Connect schema -> FileDescriptorProto ----------------------------------------------


def _split(name: str | None, default: str) -> tuple[str, str]:
    package, _, simple = (name or default).rpartition(".")
    return package, simple


def to_file_descriptor(schema: Schema) -> Any:
    """The FileDescriptorProto Confluent's ProtobufData makes of a Connect struct schema."""
    from google.protobuf import descriptor_pb2

    if schema.type is not Type.STRUCT:
        raise DataError(f"ProtobufConverter writes structs; this value's schema is "
                        f"{schema.type.value}")
    package, simple = _split(schema.name, "ConnectDefault1")
    file = descriptor_pb2.FileDescriptorProto(name=f"{schema.name or simple}.proto",
                                              syntax="proto3", package=package)
    deps: set[str] = set()
    _message(schema, simple, file.message_type.add(), f"{package}.{simple}".lstrip("."), deps)
    file.dependency.extend(sorted(deps))
    return file


def _meta(options: Any, params: Mapping[str, str], doc: str | None = None) -> None:
    from confluent_kafka.schema_registry.confluent import meta_pb2

    meta = options.Extensions[meta_pb2.field_meta]
    for k, v in params.items():
        meta.params[k] = v
    if doc:
        meta.doc = doc


def _message(schema: Schema, name: str, msg: Any, path: str, deps: set[str]) -> None:
    """`msg`, a DescriptorProto whose full name is `path`, made of a struct schema."""
    msg.name = name
    for f in schema.fields:
        _field(f, msg, path, deps)


def _field(f: Field, msg: Any, path: str, deps: set[str]) -> None:
    fd = _fd()
    out = msg.field.add(name=f.name, number=f.index + 1, json_name=_json_name(f.name))
    s = f.schema
    if s.type is Type.ARRAY:
        out.label = fd.LABEL_REPEATED
        _element(s.value_schema, out, msg, path, f.name, deps)
        return
    if s.type is Type.MAP:
        out.label = fd.LABEL_REPEATED
        out.type = fd.TYPE_MESSAGE
        entry = msg.nested_type.add(name=_camel(f.name) + "Entry")
        entry.options.map_entry = True
        for i, (part, sub) in enumerate((("key", s.key_schema), ("value", s.value_schema))):
            bad_key = part == "key" and (sub.name is not None or sub.type in (
                Type.FLOAT32, Type.FLOAT64, Type.BYTES, Type.STRUCT))
            if bad_key or sub.type in (Type.ARRAY, Type.MAP):
                raise DataError(f"field {f.name}: Protobuf has no map<{s.key_schema.type.value},"
                                f" {s.value_schema.type.value}>")
            _element(sub, entry.field.add(name=part, number=i + 1, json_name=part,
                                          label=fd.LABEL_OPTIONAL), entry, f"{path}.{entry.name}",
                     part, deps)
        out.type_name = f".{path}.{entry.name}"
        return
    out.label = fd.LABEL_OPTIONAL
    _element(s, out, msg, path, f.name, deps)
    if s.optional:
        out.proto3_optional = True
        out.oneof_index = len(msg.oneof_decl)
        msg.oneof_decl.add(name=f"_{f.name}")


def _element(s: Schema, out: Any, msg: Any, path: str, field_name: str, deps: set[str]
             ) -> None:
    fd = _fd()
    params = dict(s.parameters or {})
    if s.name in _MESSAGE_TYPES:
        out.type = fd.TYPE_MESSAGE
        out.type_name = _MESSAGE_TYPES[s.name]
        deps.add(_DEPENDENCIES[s.name])
        if s.name == DECIMAL and "connect.decimal.precision" in params:
            params["precision"] = params.pop("connect.decimal.precision")
    elif s.type is Type.STRUCT:
        _package, simple = _split(s.name, _camel(field_name))
        if all(n.name != simple for n in msg.nested_type):  # a name is one schema
            _message(s, simple, msg.nested_type.add(), f"{path}.{simple}", deps)
        out.type = fd.TYPE_MESSAGE
        out.type_name = f".{path}.{simple}"
    elif s.type in (Type.ARRAY, Type.MAP):
        raise DataError(f"field {field_name}: Protobuf has no repeated {s.type.value}s")
    else:
        out.type = _scalar_types()[s.type]
        if s.type in (Type.INT8, Type.INT16):
            params["connect.type"] = s.type.value
    if params or s.doc:
        _meta(out.options, params, s.doc)
        deps.add(_META)


def _camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_")) or "Value"


def _json_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


# --- FileDescriptorProto -> Connect schema ----------------------------------------------


def _messages(file: Any) -> dict[str, Any]:
    """Every message of a file by its full name (no leading dot)."""
    out: dict[str, Any] = {}

    def walk(prefix: str, msgs: Any) -> None:
        for m in msgs:
            name = f"{prefix}.{m.name}" if prefix else m.name
            out[name] = m
            walk(name, m.nested_type)

    walk(file.package, file.message_type)
    return out


def message_at(file: Any, indexes: list[int]) -> str:
    """The full name of the message Confluent's message indexes point at."""
    try:
        msg = file.message_type[indexes[0]]
        name = f"{file.package}.{msg.name}" if file.package else msg.name
        for i in indexes[1:]:
            msg = msg.nested_type[i]
            name = f"{name}.{msg.name}"
    except IndexError:
        raise DataError(f"message indexes {indexes} point at no message of "
                        f"{file.name}") from None
    return name


def _meta_of(options: Any) -> tuple[dict[str, str], str | None]:
    from confluent_kafka.schema_registry.confluent import meta_pb2

    if not options.HasExtension(meta_pb2.field_meta):
        return {}, None
    meta = options.Extensions[meta_pb2.field_meta]
    return dict(meta.params), meta.doc or None


def to_connect_schema(file: Any, full_name: str, imports: tuple[Any, ...] = ()) -> Schema:
    """The Connect struct schema Confluent's ProtobufData makes of message `full_name`;
    `imports` are the files `file` imports (a message of one maps as a struct too)."""
    messages: dict[str, Any] = {}
    packages: dict[str, str] = {}
    for f in (*imports, file):
        found = _messages(f)
        messages.update(found)
        packages.update(dict.fromkeys(found, f.package))

    def struct(name: str, optional: bool) -> Schema:
        msg = messages[name]
        package = packages[name]
        simple = f"{package}.{msg.name}" if package else msg.name
        if simple.startswith("ConnectDefault") and simple[14:].isdigit():
            simple = None
        fields = tuple(Field(f.name, i, field_schema(name, f)) for i, f in enumerate(msg.field))
        return Schema(Type.STRUCT, optional=optional, name=simple, fields=fields)

    def field_schema(owner: str, f: Any) -> Schema:
        fd = _fd()
        nested = messages.get(f.type_name[1:]) if f.type == fd.TYPE_MESSAGE else None
        if nested is not None and nested.options.map_entry:
            key, value = (element(f.type_name[1:], e, False) for e in nested.field)
            return Schema(Type.MAP, key_schema=key, value_schema=value)
        if f.label == fd.LABEL_REPEATED:
            return Schema(Type.ARRAY, value_schema=element(owner, f, False))
        return element(owner, f, f.proto3_optional)

    def element(owner: str, f: Any, optional: bool) -> Schema:
        fd = _fd()
        params, doc = _meta_of(f.options)
        if f.type == fd.TYPE_MESSAGE:
            logical = _LOGICAL_BY_MESSAGE.get(f.type_name[1:])
            if logical == DECIMAL:
                params.setdefault("scale", "0")
                if "precision" in params:
                    params["connect.decimal.precision"] = params.pop("precision")
                return Schema(Type.BYTES, optional, name=DECIMAL, version=1, doc=doc,
                              parameters=params)
            if logical is not None:
                base = Type.INT64 if logical == TIMESTAMP else Type.INT32
                return Schema(base, optional, name=logical, version=1, doc=doc,
                              parameters=params or None)
            if f.type_name[1:] not in messages:
                raise DataError(f"field {f.name} is a {f.type_name[1:]}, which ProtobufConverter "
                                "does not map to Connect")
            return struct(f.type_name[1:], optional)
        connect = params.pop("connect.type", None)
        if f.type == fd.TYPE_ENUM:
            type_ = Type.STRING
        elif connect in ("int8", "int16"):
            type_ = Type(connect)
        else:
            type_ = _CONNECT_BY_PROTO[f.type]
        return Schema(type_, optional, doc=doc, parameters=params or None)

    return struct(full_name, False)


def _connect_by_proto() -> dict[int, Type]:
    fd = _fd()
    return {fd.TYPE_INT32: Type.INT32, fd.TYPE_SINT32: Type.INT32, fd.TYPE_SFIXED32: Type.INT32,
            fd.TYPE_UINT32: Type.INT64, fd.TYPE_FIXED32: Type.INT64, fd.TYPE_INT64: Type.INT64,
            fd.TYPE_SINT64: Type.INT64, fd.TYPE_SFIXED64: Type.INT64, fd.TYPE_UINT64: Type.INT64,
            fd.TYPE_FIXED64: Type.INT64, fd.TYPE_FLOAT: Type.FLOAT32,
            fd.TYPE_DOUBLE: Type.FLOAT64, fd.TYPE_BOOL: Type.BOOLEAN,
            fd.TYPE_STRING: Type.STRING, fd.TYPE_BYTES: Type.BYTES}


class _Lazy(dict):  # type: ignore[type-arg]
    def __missing__(self, key: int) -> Type:
        self.update(_connect_by_proto())
        return dict.__getitem__(self, key)


_CONNECT_BY_PROTO: dict[int, Type] = _Lazy()


# --- values -----------------------------------------------------------------------------


def _fill(msg: Any, schema: Schema, value: Struct) -> None:
    """Connect struct `value` written into the protobuf message `msg`."""
    for f in schema.fields:
        v = value.get(f.name)
        if v is None:
            continue
        s = f.schema
        if s.type is Type.ARRAY:
            target = getattr(msg, f.name)
            for item in v:
                if _is_message(s.value_schema):
                    _set_message(target.add(), s.value_schema, item)
                else:
                    target.append(_scalar(s.value_schema, item))
        elif s.type is Type.MAP:
            target = getattr(msg, f.name)
            for k, item in v.items():
                if _is_message(s.value_schema):
                    _set_message(target[k], s.value_schema, item)
                else:
                    target[k] = _scalar(s.value_schema, item)
        elif _is_message(s):
            sub = getattr(msg, f.name)
            sub.SetInParent()
            _set_message(sub, s, v)
        else:
            setattr(msg, f.name, _scalar(s, v))


def _is_message(s: Schema) -> bool:
    return s.type is Type.STRUCT or s.name in _MESSAGE_TYPES


def _scalar(s: Schema, v: Any) -> Any:
    return bytes(v) if s.type is Type.BYTES else v


def _set_message(sub: Any, s: Schema, v: Any) -> None:
    if s.name == TIMESTAMP:
        delta = v - _EPOCH if v.tzinfo else v - _EPOCH.replace(tzinfo=None)
        micros = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
        seconds, micro = divmod(micros, 1_000_000)
        sub.seconds, sub.nanos = seconds, micro * 1000
    elif s.name == DATE:
        sub.year, sub.month, sub.day = v.year, v.month, v.day
    elif s.name == TIME:
        sub.hours, sub.minutes, sub.seconds, sub.nanos = v.hour, v.minute, v.second, \
            v.microsecond * 1000
    elif s.name == DECIMAL:
        scale = int((s.parameters or {}).get("scale", "0"))
        unscaled = decimal_to_bytes(v, scale)
        sub.value, sub.scale = unscaled, scale
        digits = len(str(abs(int.from_bytes(unscaled, "big", signed=True))))
        sub.precision = digits
    else:
        _fill(sub, s, v)


def _read(msg: Any, schema: Schema) -> Struct:
    """The Connect struct of protobuf message `msg`."""
    values: dict[str, Any] = {}
    for f in schema.fields:
        s = f.schema
        if s.type is Type.ARRAY:
            values[f.name] = [_value(s.value_schema, item) for item in getattr(msg, f.name)]
        elif s.type is Type.MAP:
            values[f.name] = {k: _value(s.value_schema, item)
                              for k, item in getattr(msg, f.name).items()}
        elif s.optional and not msg.HasField(f.name):
            values[f.name] = None
        else:
            values[f.name] = _value(s, getattr(msg, f.name))
    return Struct(schema, values)


def _value(s: Schema, v: Any) -> Any:
    if s.name == TIMESTAMP:
        return _EPOCH + dt.timedelta(seconds=v.seconds, microseconds=v.nanos // 1000)
    if s.name == DATE:
        return dt.date(v.year, v.month, v.day)
    if s.name == TIME:
        return dt.time(v.hours, v.minutes, v.seconds, v.nanos // 1000)
    if s.name == DECIMAL:
        return bytes_to_decimal(v.value, v.scale) if v.value else decimal.Decimal(0).scaleb(
            -v.scale)
    if s.type is Type.STRUCT:
        return _read(v, s)
    return v


# --- the wire format's message indexes ---------------------------------------------------


def _varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)  # zigzag, as Confluent writes them
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_indexes(indexes: list[int]) -> bytes:
    """Confluent's message-indexes array; [0], the first message, is a single zero byte."""
    if indexes == [0]:
        return b"\x00"
    return _varint(len(indexes)) + b"".join(_varint(i) for i in indexes)


def decode_indexes(data: bytes, at: int) -> tuple[list[int], int]:
    """The message indexes at `at`, and where the message starts."""

    def read() -> int:
        nonlocal at
        shift = n = 0
        while True:
            if at >= len(data):
                raise DataError("the message indexes run past the end of the value")
            byte = data[at]
            at += 1
            n |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return (n >> 1) ^ -(n & 1)

    count = read()
    if count == 0:
        return [0], at
    if not 0 < count < 128:
        raise DataError(f"the message indexes count {count} is not Confluent's wire format")
    return [read() for _ in range(count)], at


# --- the converter ----------------------------------------------------------------------


def file_from_text(text: str, references: list[tuple[str, str]] | None = None) -> Any:
    """The FileDescriptorProto of a registered schema's text: base64 (as Confluent's Python
    serializer and kctl register it) or .proto text (as Confluent's Java serializer does),
    its imports among `references` ((name, schema text) pairs) and the well-known files."""
    from confluent_kafka.schema_registry.confluent import meta_pb2  # noqa: F401 (extensions)

    from kctl.runtime.registry.protobuf import ProtoError, files

    try:
        return files(text, references or [])
    except ProtoError as e:
        raise DataError(f"cannot read this Protobuf schema: {e}") from e


class _Reader:
    """One registered schema: its file in a pool, and message classes by indexes."""

    def __init__(self, text: str, references: list[tuple[str, str]] | None = None) -> None:
        from google.protobuf import message_factory

        self.file, imports = file_from_text(text, references)
        self.imports = imports
        self.pool = pool()
        try:
            for imported in imports:
                self.pool.Add(imported)
            self.pool.Add(self.file)
        except (TypeError, KeyError, ValueError) as e:
            raise DataError(f"cannot load Protobuf schema {self.file.name}: {e}") from e
        self._factory = message_factory
        self._by_indexes: dict[tuple[int, ...], tuple[Schema, Any]] = {}

    def message(self, indexes: list[int]) -> tuple[Schema, Any]:
        found = self._by_indexes.get(tuple(indexes))
        if found is None:
            name = message_at(self.file, indexes)
            cls = self._factory.GetMessageClass(self.pool.FindMessageTypeByName(name))
            found = self._by_indexes.setdefault(
                tuple(indexes), (to_connect_schema(self.file, name, self.imports), cls))
        return found


class ProtobufConverter(SchemaRegistryConverter):
    """Confluent's io.confluent.connect.protobuf.ProtobufConverter."""

    schema_type = "PROTOBUF"

    def _registered_schema(self, schema: Schema) -> str:
        data = to_file_descriptor(schema).SerializeToString(deterministic=True)
        return base64.standard_b64encode(data).decode("ascii")

    def _parser(self, schema_id: int) -> Any:
        """A schema's text made a _Reader, with the files it imports from the registry."""

        def parse(text: str) -> _Reader:
            return _Reader(text, self._registry().references(schema_id))

        return parse

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Headers | None = None) -> bytes | None:
        if value is None and (schema is None or schema.optional):
            return None
        if schema is None:
            raise DataError("ProtobufConverter needs a schema for every value (this one has "
                            "none)")
        schema_id, _ = self._writer_id(topic, schema)
        _, cls = self._reader_schema(schema_id, self._parser(schema_id)).message([0])
        msg = cls()
        try:
            _fill(msg, schema, value)
            body = msg.SerializeToString()
        except (ValueError, TypeError, AttributeError, KeyError) as e:
            raise DataError(f"cannot write the value as Protobuf schema id {schema_id}: "
                            f"{e}") from e
        return _HEADER.pack(MAGIC, schema_id) + encode_indexes([0]) + body

    def to_connect_data(self, topic: str, value: bytes | None,
                        headers: Headers | None = None) -> SchemaAndValue:
        from google.protobuf.message import DecodeError

        if value is None:
            return SchemaAndValue(None, None)
        schema_id = self._schema_id(value)
        indexes, at = decode_indexes(value, _HEADER.size)
        connect, cls = self._reader_schema(schema_id, self._parser(schema_id)).message(indexes)
        try:
            msg = cls.FromString(value[at:])
            return SchemaAndValue(connect, _read(msg, connect))
        except (DecodeError, ValueError, OverflowError) as e:
            raise DataError(f"cannot read the value as Protobuf schema id {schema_id}: "
                            f"{e}") from e
