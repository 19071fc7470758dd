"""Protobuf schemas as files: .proto text compiled into a FileDescriptorProto, and Confluent's
compatibility rules over two such files.

A schema is registered either as .proto text (what Confluent's Java serializer and most
tools register) or as a base64 FileDescriptorProto (what Confluent's Python serializer
registers). Text is compiled by `protoc` (grpcio-tools bundles it), with the files a schema
may import without naming them as references: Google's well-known types, google/type's
Date and TimeOfDay, and Confluent's decimal and field metadata. Other imports are the
schema's references, by the name it imports them as.

Compatibility follows Confluent's protobuf diff: messages by name, fields by number, and
these changes are incompatible: a message removed, the package changed, a field's kind
(scalar, message, map) changed, a scalar moved to another wire group (int32, int64,
uint32, uint64, bool and enums are one group; sint32 and sint64; string and bytes; fixed32
and sfixed32; fixed64 and sfixed64; float; double), a field's message type renamed or
changed incompatibly, a required field added or removed, a field removed from a oneof, and
several fields moved into one oneof. Adding or removing optional fields, messages and
enums, renaming a field and moving a message are compatible.
"""

from __future__ import annotations

import base64
import binascii
import functools
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["ProtoError", "builtin_files", "differences", "file_descriptor", "files",
           "is_base64"]

_BUILTIN_PREFIXES = ("google/protobuf/", "google/type/", "confluent/")


class ProtoError(ValueError):
    """A schema that is neither a FileDescriptorProto nor .proto text protoc compiles."""


@functools.cache
def builtin_files() -> tuple[Any, ...]:
    """The FileDescriptorProtos a schema may import without a reference, dependencies first."""
    from confluent_kafka.schema_registry.confluent import meta_pb2
    from confluent_kafka.schema_registry.confluent.type import decimal_pb2
    from google.protobuf import (
        any_pb2,
        descriptor_pb2,
        duration_pb2,
        empty_pb2,
        field_mask_pb2,
        struct_pb2,
        timestamp_pb2,
        wrappers_pb2,
    )
    from google.type import date_pb2, timeofday_pb2

    return tuple(descriptor_pb2.FileDescriptorProto.FromString(m.DESCRIPTOR.serialized_pb)
                 for m in (descriptor_pb2, any_pb2, duration_pb2, empty_pb2, field_mask_pb2,
                           struct_pb2, timestamp_pb2, wrappers_pb2, date_pb2, timeofday_pb2,
                           decimal_pb2, meta_pb2))


def is_base64(text: str) -> bool:
    """Whether a schema's text is a base64 FileDescriptorProto rather than .proto text."""
    return _from_base64(text) is not None


def _from_base64(text: str) -> Any | None:
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    file = descriptor_pb2.FileDescriptorProto()
    try:
        file.ParseFromString(base64.b64decode(text.strip(), validate=True))
    except (binascii.Error, ValueError, DecodeError):
        return None
    if not file.name and not file.message_type and not file.enum_type:
        return None
    return file


def file_descriptor(text: str, references: Sequence[tuple[str, str]] = (),
                    name: str = "schema.proto") -> Any:
    """The FileDescriptorProto of a registered schema's text (base64 or .proto text);
    `references` are (import name, schema text) pairs, each file's imports before it."""
    return files(text, references, name)[0]


def files(text: str, references: Sequence[tuple[str, str]] = (),
          name: str = "schema.proto") -> tuple[Any, tuple[Any, ...]]:
    """The schema's FileDescriptorProto and those of its references."""
    return _files(text, tuple(references), name)


@functools.lru_cache(maxsize=256)
def _files(text: str, references: tuple[tuple[str, str], ...], name: str
           ) -> tuple[Any, tuple[Any, ...]]:
    deps: dict[str, Any] = {f.name: f for f in builtin_files()}
    refs = []
    for ref_name, ref_text in references:
        ref = _from_base64(ref_text)
        if ref is None:
            ref = _compile(ref_text, ref_name, tuple(deps.values()))
        deps[ref.name] = ref
        refs.append(ref)
    main = _from_base64(text)
    if main is None:
        main = _compile(text, name, tuple(deps.values()))
    return main, tuple(refs)


def _compile(text: str, name: str, deps: tuple[Any, ...]) -> Any:
    """`protoc`'s FileDescriptorProto of .proto text, its imports found among `deps`."""
    from google.protobuf import descriptor_pb2

    if "{" not in text:
        raise ProtoError("not a Protobuf schema: neither a base64 FileDescriptorProto nor "
                         ".proto text")
    name = name if name.endswith(".proto") else f"{name}.proto"
    with tempfile.TemporaryDirectory(prefix="kctl-proto-") as tmp:
        root = Path(tmp)
        source = root / "src" / name
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(text, encoding="utf-8")
        known = descriptor_pb2.FileDescriptorSet(file=[d for d in deps if d.name != name])
        (root / "deps.pb").write_bytes(known.SerializeToString())
        out = root / "out.pb"
        try:
            done = subprocess.run(
                [sys.executable, "-c", "import sys; from grpc_tools import protoc; "
                 "sys.exit(protoc.main(sys.argv))",
                 f"--proto_path={root / 'src'}", f"--descriptor_set_in={root / 'deps.pb'}",
                 f"--descriptor_set_out={out}", name],
                capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            raise ProtoError("protoc did not compile the schema within 60 s") from None
        if "No module named 'grpc_tools'" in done.stderr:
            raise ProtoError(".proto text needs protoc, from the grpcio-tools package, which "
                             "is not installed")
        if done.returncode != 0:
            lines = [line.replace(f"{root / 'src'}/", "").strip()
                     for line in done.stderr.splitlines()]
            message = " ".join(line for line in lines
                               if line.startswith(name) or line.startswith("--"))
            raise ProtoError(message or f"protoc exited with {done.returncode}")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    return files[-1]


def is_builtin(name: str) -> bool:
    return name.startswith(_BUILTIN_PREFIXES)


# --- Confluent's compatibility ------------------------------------------------------------

_COMPATIBLE = {"MESSAGE_ADDED", "MESSAGE_MOVED", "ENUM_ADDED", "ENUM_REMOVED",
               "ENUM_CONST_ADDED", "ENUM_CONST_CHANGED", "ENUM_CONST_REMOVED", "FIELD_ADDED",
               "FIELD_REMOVED", "FIELD_NAME_CHANGED", "FIELD_STRING_OR_BYTES_LABEL_CHANGED",
               "ONEOF_ADDED", "ONEOF_REMOVED", "ONEOF_FIELD_ADDED"}

_SCALAR_GROUPS = {"int32": "GENERAL_NUMBER", "int64": "GENERAL_NUMBER",
                  "uint32": "GENERAL_NUMBER", "uint64": "GENERAL_NUMBER",
                  "bool": "GENERAL_NUMBER", "enum": "GENERAL_NUMBER",
                  "sint32": "SIGNED_NUMBER", "sint64": "SIGNED_NUMBER",
                  "string": "STRING_OR_BYTES", "bytes": "STRING_OR_BYTES",
                  "fixed32": "FIXED32", "sfixed32": "FIXED32", "fixed64": "FIXED64",
                  "sfixed64": "FIXED64", "float": "FLOAT", "double": "DOUBLE"}


class _Types:
    """Every message and enum of one file (and the files it imports) by full name."""

    def __init__(self, file: Any, imports: Sequence[Any]) -> None:
        self.package = file.package
        self.messages: dict[str, Any] = {}
        self.enums: set[str] = set()
        for f in (*imports, file):
            self._walk(f.package, f.message_type, f.enum_type)

    def _walk(self, prefix: str, messages: Any, enums: Any) -> None:
        for e in enums:
            self.enums.add(f"{prefix}.{e.name}".lstrip("."))
        for m in messages:
            full = f"{prefix}.{m.name}".lstrip(".")
            self.messages[full] = m
            self._walk(full, m.nested_type, m.enum_type)

    def local(self, full: str) -> str:
        return full[len(self.package) + 1:] if self.package and \
            full.startswith(self.package + ".") else full


class _Diff:
    def __init__(self, original: _Types, update: _Types) -> None:
        self.original, self.update = original, update
        self.found: list[tuple[str, str]] = []
        self._seen: set[tuple[str, str]] = set()

    def add(self, kind: str, where: str) -> None:
        self.found.append((kind, where))

    def types(self, where: str, original: Any, update: Any) -> None:
        """Top-level or nested messages and enums of two scopes, by name."""
        before = {m.name: (i, m) for i, m in enumerate(original.message_type
                  if hasattr(original, "message_type") else original.nested_type)}
        after = {m.name: (i, m) for i, m in enumerate(update.message_type
                 if hasattr(update, "message_type") else update.nested_type)}
        for name in sorted(before.keys() | after.keys()):
            path = f"{where}.{name}".lstrip(".")
            if name not in after:
                if not before[name][1].options.map_entry:
                    self.add("MESSAGE_REMOVED", path)
            elif name not in before:
                if not after[name][1].options.map_entry:
                    self.add("MESSAGE_ADDED", path)
            elif not before[name][1].options.map_entry:  # a map's entry: with its field
                self.message(path, before[name][1], after[name][1])
                if before[name][0] != after[name][0]:
                    self.add("MESSAGE_MOVED", path)
        e_before = {e.name: e for e in original.enum_type}
        e_after = {e.name: e for e in update.enum_type}
        for name in sorted(e_before.keys() | e_after.keys()):
            path = f"{where}.{name}".lstrip(".")
            if name not in e_after:
                self.add("ENUM_REMOVED", path)
            elif name not in e_before:
                self.add("ENUM_ADDED", path)
            else:
                self._enum(path, e_before[name], e_after[name])

    def _enum(self, where: str, original: Any, update: Any) -> None:
        before = {v.number: v.name for v in original.value}
        after = {v.number: v.name for v in update.value}
        for number in sorted(before.keys() | after.keys()):
            if number not in after:
                self.add("ENUM_CONST_REMOVED", f"{where}.{number}")
            elif number not in before:
                self.add("ENUM_CONST_ADDED", f"{where}.{number}")
            elif before[number] != after[number]:
                self.add("ENUM_CONST_CHANGED", f"{where}.{number}")

    def message(self, where: str, original: Any, update: Any) -> None:
        key = (where, original.name)
        if key in self._seen:  # a recursive message is compared once
            return
        self._seen.add(key)
        o_oneofs, u_oneofs = _oneofs(original), _oneofs(update)
        o_plain = {f.number: f for f in original.field if _oneof(original, f) is None}
        u_plain = {f.number: f for f in update.field if _oneof(update, f) is None}
        o_all = {f.number: f for f in original.field}
        u_all = {f.number: f for f in update.field}
        o_in_oneof = {n for fields in o_oneofs.values() for n in fields}
        for name, fields in u_oneofs.items():
            moved = [n for n in fields if o_plain.pop(n, None) is not None]
            existing = [n for n in fields if n not in moved and n in o_in_oneof]
            if len(moved) > 1:
                self.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF", f"{where}.{name}")
            elif moved and existing:
                self.add("FIELD_MOVED_TO_EXISTING_ONEOF", f"{where}.{name}")
        for name in sorted(o_oneofs.keys() | u_oneofs.keys()):
            if name not in u_oneofs:
                self.add("ONEOF_REMOVED", f"{where}.{name}")
            elif name not in o_oneofs:
                self.add("ONEOF_ADDED", f"{where}.{name}")
            else:
                for number in sorted(set(o_oneofs[name]) | set(u_oneofs[name])):
                    if number not in u_oneofs[name]:
                        if number not in u_all:
                            self.add("ONEOF_FIELD_REMOVED", f"{where}.{name}.{number}")
                    elif number not in o_oneofs[name]:
                        self.add("ONEOF_FIELD_ADDED", f"{where}.{name}.{number}")
                    else:
                        self.field(f"{where}.{number}", o_all[number], u_all[number])
        for number in sorted(o_plain.keys() | u_plain.keys()):
            path = f"{where}.{number}"
            if number not in u_plain:
                required = o_plain[number].label == _label("LABEL_REQUIRED")
                self.add("REQUIRED_FIELD_REMOVED" if required else "FIELD_REMOVED", path)
            elif number not in o_plain:
                required = u_plain[number].label == _label("LABEL_REQUIRED")
                self.add("REQUIRED_FIELD_ADDED" if required else "FIELD_ADDED", path)
            else:
                self.field(path, o_plain[number], u_plain[number])
        for number in sorted(o_all.keys() & u_all.keys()):  # moved into or out of a oneof
            o_of, u_of = _oneof(original, o_all[number]), _oneof(update, u_all[number])
            if (o_of, u_of) != (None, None) and o_of != u_of:
                self.field(f"{where}.{number}", o_all[number], u_all[number])
        self.types(where, original, update)

    def field(self, where: str, original: Any, update: Any) -> None:
        if original.name != update.name:
            self.add("FIELD_NAME_CHANGED", where)
        self._types(where, _Kind.of(original, self.original), _Kind.of(update, self.update))

    def _types(self, where: str, original: _Kind, update: _Kind) -> None:
        if original.kind != update.kind:
            self.add("FIELD_KIND_CHANGED", where)
        elif original.kind == "SCALAR":
            if _SCALAR_GROUPS[original.scalar] != _SCALAR_GROUPS[update.scalar]:
                self.add("FIELD_SCALAR_KIND_CHANGED", where)
        elif original.kind == "MAP":
            assert original.entry is not None and update.entry is not None
            for o, u in zip(original.entry.field, update.entry.field, strict=False):
                self._types(where, _Kind.of(o, self.original), _Kind.of(u, self.update))
        else:
            o_local, u_local = self.original.local(original.name), self.update.local(update.name)
            if o_local != u_local:
                self.add("FIELD_NAMED_TYPE_CHANGED", where)
                return
            o_msg = self.original.messages.get(original.name)
            u_msg = self.update.messages.get(update.name)
            if o_msg is None or u_msg is None:
                return
            before = len(self.found)
            self.message(o_local, o_msg, u_msg)
            if any(kind not in _COMPATIBLE for kind, _ in self.found[before:]):
                self.add("FIELD_NAMED_TYPE_CHANGED", where)


class _Kind:
    """A field's type as Confluent's diff sees it: a scalar (enums count as int32), a
    message by full name, or a map with its entry."""

    def __init__(self, kind: str, scalar: str = "", name: str = "",
                 entry: Any | None = None) -> None:
        self.kind, self.scalar, self.name, self.entry = kind, scalar, name, entry

    @staticmethod
    def of(field: Any, types: _Types) -> _Kind:
        from google.protobuf import descriptor_pb2

        fd = descriptor_pb2.FieldDescriptorProto
        full = field.type_name.lstrip(".")
        if field.type == fd.TYPE_ENUM or full in types.enums:
            return _Kind("SCALAR", scalar="enum")
        if field.type in (fd.TYPE_MESSAGE, fd.TYPE_GROUP) or (field.type_name and not
                                                               field.type):
            message = types.messages.get(full)
            if message is not None and message.options.map_entry:
                return _Kind("MAP", entry=message)
            return _Kind("MESSAGE", name=full)
        return _Kind("SCALAR", scalar=fd.Type.Name(field.type).removeprefix("TYPE_").lower())


def _label(name: str) -> int:
    from google.protobuf import descriptor_pb2

    return int(descriptor_pb2.FieldDescriptorProto.Label.Value(name))


def _oneof(message: Any, field: Any) -> str | None:
    """The name of the real oneof `field` belongs to (a proto3 `optional` is no oneof)."""
    if not field.HasField("oneof_index") or field.proto3_optional:
        return None
    return str(message.oneof_decl[field.oneof_index].name)


def _oneofs(message: Any) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for f in message.field:
        name = _oneof(message, f)
        if name is not None:
            out.setdefault(name, []).append(f.number)
    return out


def differences(original: Any, update: Any, original_imports: Sequence[Any] = (),
                update_imports: Sequence[Any] = ()) -> list[str]:
    """Confluent's incompatible differences from FileDescriptorProto `original` (the schema
    data was written with) to `update` (the schema that reads it); empty: compatible."""
    diff = _Diff(_Types(original, [*builtin_files(), *original_imports]),
                 _Types(update, [*builtin_files(), *update_imports]))
    if original.package != update.package:
        diff.add("PACKAGE_CHANGED", original.package or "(no package)")
    diff.types("", original, update)
    return [f"{kind}: {where}" for kind, where in diff.found if kind not in _COMPATIBLE]
