"""Each schema format's parsing, canonical form and compatibility rules.

Avro's rules are Avro's own schema resolution (the `avro` library's reader/writer
checker, which Confluent's registry implements too). JSON Schema follows Confluent's json
diff (registry/json_schema_diff.py): content models, bounds, combinations. Protobuf follows Confluent's protobuf diff
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
    documents: dict[str, Any] = {}
    for name, ref_text in named:  # a $ref names a reference by its name or its $id
        try:
            ref = json.loads(ref_text)
        except json.JSONDecodeError as e:
            raise invalid_schema(f"reference {name}: {e}") from e
        documents[name] = ref
        if isinstance(ref, dict) and isinstance(ref.get("$id"), str):
            documents.setdefault(ref["$id"], ref)
    return Parsed("JSON", json.dumps(value, separators=(",", ":"), sort_keys=True),
                  (value, documents))


def _json_messages(reader: Parsed, writer: Parsed) -> list[str]:
    """Confluent's json diff from the writer's schema to the reader's (empty: it reads)."""
    from kctl.runtime.registry.json_schema_diff import differences

    (new, new_refs), (old, old_refs) = reader.value, writer.value
    return differences(old, new, old_refs, new_refs)


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
