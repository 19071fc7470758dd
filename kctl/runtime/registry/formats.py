"""Each schema format's parsing, canonical form and compatibility rules.

Avro's rules are Avro's own schema resolution (the `avro` library's reader/writer
checker, which Confluent's registry implements too). JSON Schema and Protobuf follow the
parts of Confluent's rules that decide most real changes: for JSON Schema, a property's
type may not change and an open content model may not close; for Protobuf, a field number
may not change type and a required field may not appear. A Protobuf schema is .proto text
or a base64 FileDescriptorProto (what Confluent's Python serializer registers); the two
forms compare with each other.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kctl.runtime.registry.model import invalid_schema


@dataclass(frozen=True)
class Parsed:
    """A schema as the registry compares it."""

    schema_type: str
    canonical: str
    value: Any


# --- Avro -------------------------------------------------------------------------------


def _parse_avro(text: str, named: list[str]) -> Parsed:
    import avro.errors
    import avro.name
    import avro.schema

    names = avro.name.Names()
    try:
        for ref in named:
            avro.schema.make_avsc_object(json.loads(ref), names)
        parsed = avro.schema.make_avsc_object(json.loads(text), names)
    except (avro.errors.AvroException, json.JSONDecodeError, TypeError, ValueError,
            AttributeError) as e:
        raise invalid_schema(str(e) or type(e).__name__) from e
    return Parsed("AVRO", json.dumps(parsed.to_json(), separators=(",", ":")), parsed)


def _avro_messages(reader: Parsed, writer: Parsed) -> list[str]:
    from avro import compatibility

    checker: Any = compatibility.ReaderWriterCompatibilityChecker  # the library is untyped
    SchemaCompatibilityType = compatibility.SchemaCompatibilityType
    result = checker().get_compatibility(reader.value, writer.value)
    if result.compatibility is SchemaCompatibilityType.compatible:
        return []
    kinds = [str(getattr(i, "value", i)).upper() for i in result.incompatibilities]
    where = ", ".join(sorted(result.locations)) or "/"
    fields = sorted({f for loc in result.locations if (f := _field_at(reader.value.to_json(), loc))})
    named = f" (field {', '.join(fields)})" if fields else ""
    return [f"{{errorType:'{k}', description:'{m}{named}', location:'{where}'}}"
            for k, m in zip(kinds or ["INCOMPATIBLE"], list(result.messages) or ["incompatible"],
                            strict=False)]


def _field_at(schema: Any, location: str) -> str:
    """The dotted field name a location such as /fields/0/type/fields/1 points into."""
    names, node = [], schema
    parts = [p for p in location.split("/") if p]
    for i, part in enumerate(parts):
        if isinstance(node, dict) and part in node:
            if part == "fields" and i + 1 < len(parts) and parts[i + 1].isdigit():
                index = int(parts[i + 1])
                fields = node["fields"]
                if index < len(fields):
                    names.append(fields[index].get("name", "?"))
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            break
    return ".".join(names)


# --- JSON Schema ------------------------------------------------------------------------


def _parse_json(text: str, named: list[str]) -> Parsed:
    import jsonschema
    import jsonschema.exceptions
    import jsonschema.validators

    try:
        value = json.loads(text)
        cls = jsonschema.validators.validator_for(value, default=jsonschema.Draft7Validator)
        cls.check_schema(value)
    except (json.JSONDecodeError, jsonschema.exceptions.SchemaError) as e:
        raise invalid_schema(getattr(e, "message", str(e))) from e
    if not isinstance(value, dict | bool):
        raise invalid_schema("a JSON Schema is an object or a boolean")
    return Parsed("JSON", json.dumps(value, separators=(",", ":"), sort_keys=True), value)


def _types(schema: Any) -> set[str]:
    t = schema.get("type") if isinstance(schema, dict) else None
    return set(t) if isinstance(t, list) else {t} if isinstance(t, str) else set()


def _json_messages(reader: Parsed, writer: Parsed) -> list[str]:
    """Whether everything `writer` accepts, `reader` accepts (reader reads writer's data)."""
    messages: list[str] = []

    def walk(r: Any, w: Any, path: str) -> None:
        if not isinstance(r, dict) or not isinstance(w, dict):
            return
        rt, wt = _types(r), _types(w)
        if rt and wt and not wt <= rt and not (wt == {"integer"} and "number" in rt):
            messages.append(f"TYPE_CHANGED at {path or '#/'}: {sorted(wt)} -> {sorted(rt)}")
        r_props, w_props = r.get("properties") or {}, w.get("properties") or {}
        for name, sub in r_props.items():
            if name in w_props:
                walk(sub, w_props[name], f"{path}/properties/{name}")
            elif name in set(r.get("required") or ()):
                messages.append(f"REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL at "
                                f"{path}/properties/{name}")
        for name in set(r.get("required") or ()) - set(w.get("required") or ()):
            if name in w_props:
                messages.append(f"REQUIRED_ATTRIBUTE_ADDED at {path}/required/{name}")
        if r.get("additionalProperties") is False and w.get("additionalProperties") is not False:
            messages.append(f"ADDITIONAL_PROPERTIES_REMOVED at {path or '#/'}")
        if isinstance(r.get("items"), dict) and isinstance(w.get("items"), dict):
            walk(r["items"], w["items"], f"{path}/items")

    walk(reader.value, writer.value, "#")
    return messages


# --- Protobuf ---------------------------------------------------------------------------

_MESSAGE = re.compile(r"\bmessage\s+(\w+)\s*\{")
_FIELD = re.compile(r"^\s*(optional|required|repeated)?\s*(map\s*<[^>]*>|[\w.]+)\s+(\w+)"
                    r"\s*=\s*(\d+)", re.MULTILINE)


def _proto_fields(text: str) -> dict[str, dict[int, tuple[str, str]]]:
    """message -> field number -> (label, type), from the text of a .proto file."""
    out: dict[str, dict[int, tuple[str, str]]] = {}
    for m in _MESSAGE.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        body = text[m.end():i - 1]
        out[m.group(1)] = {int(f.group(4)): (f.group(1) or "", f.group(2))
                           for f in _FIELD.finditer(body)}
    return out


def _descriptor_fields(text: str) -> tuple[str, dict[str, dict[int, tuple[str, str]]]] | None:
    """A base64 FileDescriptorProto (what Confluent's Python serializer registers): its
    canonical form and message -> field number -> (label, type); None for .proto text."""
    import base64
    import binascii

    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    file = descriptor_pb2.FileDescriptorProto()
    try:
        file.ParseFromString(base64.b64decode(text.strip(), validate=True))
    except (binascii.Error, ValueError, DecodeError):
        return None
    if not file.message_type:
        return None
    fd = descriptor_pb2.FieldDescriptorProto
    entries = {}

    def walk(msgs: Any, out: dict[str, dict[int, tuple[str, str]]]) -> None:
        for m in msgs:
            for n in m.nested_type:
                if n.options.map_entry:
                    entries[n.name] = "map<{},{}>".format(*(_proto_type(f) for f in n.field))
            out[m.name] = {f.number: ("repeated" if f.label == fd.LABEL_REPEATED
                                      and f.type_name.rsplit(".", 1)[-1] not in entries
                                      else "required" if f.label == fd.LABEL_REQUIRED
                                      else "optional" if f.proto3_optional else "",
                                      entries.get(f.type_name.rsplit(".", 1)[-1])
                                      or _proto_type(f))
                           for f in m.field}
            walk([n for n in m.nested_type if not n.options.map_entry], out)

    fields: dict[str, dict[int, tuple[str, str]]] = {}
    walk(file.message_type, fields)
    canonical = base64.standard_b64encode(file.SerializeToString(deterministic=True))
    return canonical.decode("ascii"), fields


def _proto_type(f: Any) -> str:
    """A field's type as .proto text names it (messages and enums by their last name)."""
    from google.protobuf import descriptor_pb2

    if f.type_name:
        return str(f.type_name).rsplit(".", 1)[-1]
    name = str(descriptor_pb2.FieldDescriptorProto.Type.Name(f.type))
    return name.removeprefix("TYPE_").lower()


def _parse_protobuf(text: str, named: list[str]) -> Parsed:
    described = _descriptor_fields(text)
    if described is not None:
        return Parsed("PROTOBUF", described[0], described[1])
    if not _MESSAGE.search(text) or text.count("{") != text.count("}"):
        raise invalid_schema("not a Protobuf schema: no complete message definition")
    canonical = "\n".join(line.strip() for line in text.strip().splitlines() if line.strip())
    return Parsed("PROTOBUF", canonical, _proto_fields(text))


def _proto_messages(reader: Parsed, writer: Parsed) -> list[str]:
    messages: list[str] = []
    for name, fields in reader.value.items():
        old = writer.value.get(name, {})
        for number, (label, type_) in fields.items():
            if number in old and _last(old[number][1]) != _last(type_):
                messages.append(f"FIELD_KIND_CHANGED: {name}.{number} {old[number][1]} -> {type_}")
            if number not in old and label == "required":
                messages.append(f"REQUIRED_FIELD_ADDED: {name}.{number}")
    return messages


def _last(type_: str) -> str:
    """A type as both forms can compare it: messages by their last name, maps spaced alike."""
    return "".join(type_.split()) if type_.startswith("map") else type_.rsplit(".", 1)[-1]


PARSERS: dict[str, Callable[[str, list[str]], Parsed]] = {
    "AVRO": _parse_avro, "JSON": _parse_json, "PROTOBUF": _parse_protobuf}
_CHECKS: dict[str, Callable[[Parsed, Parsed], list[str]]] = {
    "AVRO": _avro_messages, "JSON": _json_messages, "PROTOBUF": _proto_messages}


def parse(schema_type: str, text: str, references: list[str] | None = None) -> Parsed:
    try:
        parser = PARSERS[schema_type]
    except KeyError:
        raise invalid_schema(f"unknown schema type {schema_type!r}") from None
    return parser(text, references or [])


def incompatibilities(reader: Parsed, writer: Parsed) -> list[str]:
    """Why data written with `writer` cannot be read with `reader` (empty: it can)."""
    if reader.schema_type != writer.schema_type:
        return [f"TYPE_MISMATCH: {writer.schema_type} -> {reader.schema_type}"]
    return _CHECKS[reader.schema_type](reader, writer)
