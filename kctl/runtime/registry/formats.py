"""Each schema format's parsing, canonical form and compatibility rules.

Avro's rules are Avro's own schema resolution (the `avro` library's reader/writer
checker, which Confluent's registry implements too). JSON Schema follows the parts of
Confluent's rules that decide most real changes: a property's type may not change and an
open content model may not close. Protobuf follows Confluent's protobuf diff
(registry/protobuf.py) over FileDescriptorProtos: a schema is .proto text, compiled by
protoc, or a base64 FileDescriptorProto (what Confluent's Python serializer registers), and
the two forms compare field by field.
"""

from __future__ import annotations

import base64
import json
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


def _parse_avro(text: str, named: list[tuple[str, str]]) -> Parsed:
    import avro.errors
    import avro.name
    import avro.schema

    names = avro.name.Names()
    try:
        for _name, ref in named:
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


def _parse_json(text: str, named: list[tuple[str, str]]) -> Parsed:
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


def _parse_protobuf(text: str, named: list[tuple[str, str]]) -> Parsed:
    from kctl.runtime.registry import protobuf

    try:
        file, imports = protobuf.files(text, named)
    except protobuf.ProtoError as e:
        raise invalid_schema(str(e)) from e
    if protobuf.is_base64(text):
        canonical = base64.standard_b64encode(file.SerializeToString(deterministic=True)
                                              ).decode("ascii")
    else:
        canonical = "\n".join(line.strip() for line in text.strip().splitlines()
                              if line.strip())
    return Parsed("PROTOBUF", canonical, (file, imports))


def _proto_messages(reader: Parsed, writer: Parsed) -> list[str]:
    from kctl.runtime.registry import protobuf

    (new, new_imports), (old, old_imports) = reader.value, writer.value
    return protobuf.differences(old, new, old_imports, new_imports)


PARSERS: dict[str, Callable[[str, list[tuple[str, str]]], Parsed]] = {
    "AVRO": _parse_avro, "JSON": _parse_json, "PROTOBUF": _parse_protobuf}
_CHECKS: dict[str, Callable[[Parsed, Parsed], list[str]]] = {
    "AVRO": _avro_messages, "JSON": _json_messages, "PROTOBUF": _proto_messages}


def parse(schema_type: str, text: str,
          references: list[tuple[str, str]] | None = None) -> Parsed:
    """A schema parsed, with its references as (name, schema text) pairs, each reference's
    own references before it."""
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
