"""The Schema Registry: Confluent's semantics over records of a compacted topic.

Every change is a record of `_schemas` with Confluent's keys and values, applied when it is
read back from the log, so every worker holds the same state and Confluent's registry could
take the topic over. Writes are made by one writer at a time (the group's leader; a
standalone worker is its own): it assigns ids and versions from what it has read, writes,
and waits until it has read its own record back before it answers.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from kctl.runtime.registry import formats
from kctl.runtime.registry.model import (
    Compatibility,
    Mode,
    Reference,
    RegistryError,
    SchemaVersion,
    compatibility_not_configured,
    incompatible,
    invalid_compatibility,
    invalid_mode,
    invalid_version,
    mode_not_configured,
    operation_not_permitted,
    schema_not_found,
    subject_not_found,
    subject_not_soft_deleted,
    subject_soft_deleted,
    version_not_found,
    version_not_soft_deleted,
    version_soft_deleted,
)

DEFAULT_COMPATIBILITY = Compatibility.BACKWARD
T = TypeVar("T")


class RecordLog(Protocol):
    """Where the registry's records go: append one, then wait until it was read back."""

    def append(self, key: bytes, value: bytes | None) -> None: ...

    def read_to_end(self) -> None: ...


def _key(**fields: Any) -> bytes:
    return json.dumps(fields, separators=(",", ":")).encode()


def _schema_key(subject: str, version: int) -> bytes:
    return _key(keytype="SCHEMA", subject=subject, version=version, magic=1)


def _schema_value(v: SchemaVersion) -> bytes:
    value: dict[str, Any] = {"subject": v.subject, "version": v.version, "id": v.id,
                             "schema": v.schema, "deleted": v.deleted}
    if v.schema_type != "AVRO":
        value["schemaType"] = v.schema_type
    if v.references:
        value["references"] = [{"name": r.name, "subject": r.subject, "version": r.version}
                               for r in v.references]
    return json.dumps(value, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Registered:
    id: int
    version: int


class SchemaRegistry:
    """The registry's state, read from its log, and its API's operations."""

    def __init__(self, log: RecordLog | None = None,
                 require_writer: Callable[[], None] = lambda: None):
        self._log = log
        self._require_writer = require_writer
        self._lock = threading.RLock()
        self._write_lock = threading.Lock()
        self._versions: dict[str, dict[int, SchemaVersion]] = {}
        self._by_id: dict[int, SchemaVersion] = {}
        self._config: dict[str | None, Compatibility] = {}
        self._mode: dict[str | None, Mode] = {}
        # a stored schema's canonical form, by (type, text, references): parsing one may
        # compile it (Protobuf text), and every registration compares against all of them
        self._canonicals: dict[tuple[str, str, tuple[Reference, ...]], str] = {}

    def attach(self, log: RecordLog) -> None:
        self._log = log

    # -- the log -----------------------------------------------------------------------------
    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """One record of the topic, in the topic's order (a malformed one is skipped)."""
        try:
            k = json.loads(key) if key else None
            v = json.loads(value) if value else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            return
        if not isinstance(k, dict):
            return
        with self._lock:
            keytype = k.get("keytype")
            subject = k.get("subject")
            if not (subject is None or isinstance(subject, str)):
                return
            if keytype == "SCHEMA" and subject is not None:
                self._apply_schema(subject, int(k.get("version", 0)), v)
            elif keytype == "CONFIG":
                if v is None:
                    self._config.pop(subject, None)
                else:
                    level = v.get("compatibilityLevel") or v.get("compatibility")
                    if level in Compatibility.__members__:
                        self._config[subject] = Compatibility(level)
            elif keytype == "MODE":
                if v is None:
                    self._mode.pop(subject, None)
                elif v.get("mode") in Mode.__members__:
                    self._mode[subject] = Mode(v["mode"])
            elif keytype == "DELETE_SUBJECT" and isinstance(v, dict) and subject is not None:
                upto = int(v.get("version", 0))
                for version, sv in list(self._versions.get(subject, {}).items()):
                    if version <= upto:
                        self._versions[subject][version] = replace(sv, deleted=True)

    def _apply_schema(self, subject: str, version: int, v: dict[str, Any] | None) -> None:
        versions = self._versions.setdefault(subject, {})
        if v is None:  # a hard delete
            gone = versions.pop(version, None)
            if not versions:
                self._versions.pop(subject, None)
            if gone is not None and not self._uses(gone.id):
                self._by_id.pop(gone.id, None)
            return
        sv = SchemaVersion(subject=subject, version=version, id=int(v["id"]),
                           schema=v["schema"], schema_type=v.get("schemaType") or "AVRO",
                           references=tuple(Reference(r["name"], r["subject"], int(r["version"]))
                                            for r in v.get("references") or ()),
                           deleted=bool(v.get("deleted")))
        versions[version] = sv
        self._by_id.setdefault(sv.id, sv)

    def _uses(self, schema_id: int) -> bool:
        return any(sv.id == schema_id for vs in self._versions.values() for sv in vs.values())

    def _write(self, key: bytes, value: bytes | None) -> None:
        if self._log is None:
            raise RegistryError(500, 50001, "the registry's log is not started")
        self._log.append(key, value)
        self._log.read_to_end()

    # -- reads -------------------------------------------------------------------------------
    def _fresh(self, read: Callable[[], T]) -> T:
        """`read`, and once more after catching up with the topic when it finds nothing: a
        follower may not yet have read what the leader just wrote (a client registers through
        one worker and reads through another)."""
        try:
            return read()
        except RegistryError as e:
            if e.status != 404 or self._log is None:
                raise
        self._log.read_to_end()
        return read()

    def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        with self._lock:
            return sorted(s for s, vs in self._versions.items()
                          if s.startswith(prefix) and any(deleted or not v.deleted
                                                          for v in vs.values()))

    def _live(self, subject: str, deleted: bool = False) -> dict[int, SchemaVersion]:
        versions = self._versions.get(subject)
        if not versions:
            raise subject_not_found(subject)
        live = {n: v for n, v in versions.items() if deleted or not v.deleted}
        if not live:
            raise subject_not_found(subject)
        return live

    def versions(self, subject: str, deleted: bool = False) -> list[int]:
        def read() -> list[int]:
            with self._lock:
                return sorted(self._live(subject, deleted))

        return self._fresh(read)

    def version(self, subject: str, version: str | int, deleted: bool = False) -> SchemaVersion:
        return self._fresh(lambda: self._version(subject, version, deleted))

    def _version(self, subject: str, version: str | int, deleted: bool) -> SchemaVersion:
        with self._lock:
            live = self._live(subject, deleted=True)
            if str(version) in ("latest", "-1"):
                candidates = [n for n, v in live.items() if deleted or not v.deleted]
                if not candidates:
                    raise subject_not_found(subject)
                return live[max(candidates)]
            number = _version_number(version)
            found = live.get(number)
            if found is None or (found.deleted and not deleted):
                raise version_not_found(subject, version)
            return found

    def by_id(self, schema_id: int) -> SchemaVersion:
        def read() -> SchemaVersion:
            with self._lock:
                found = self._by_id.get(schema_id)
                if found is None:
                    raise schema_not_found(f"Schema {schema_id} not found")
                return found

        return self._fresh(read)

    def id_versions(self, schema_id: int, deleted: bool = False) -> list[tuple[str, int]]:
        self.by_id(schema_id)
        with self._lock:
            return sorted((sv.subject, sv.version) for vs in self._versions.values()
                          for sv in vs.values() if sv.id == schema_id and (deleted or not sv.deleted))

    def lookup(self, subject: str, schema: str, schema_type: str = "AVRO",
               references: list[Reference] | None = None, deleted: bool = False) -> SchemaVersion:
        parsed = self._parse(schema_type, schema, references or [])

        def read() -> SchemaVersion:
            with self._lock:
                live = self._live(subject, deleted=True)
                for sv in sorted(live.values(), key=lambda s: s.version):
                    if (deleted or not sv.deleted) and sv.schema_type == parsed.schema_type and \
                            self._canonical(sv) == parsed.canonical:
                        return sv
                raise schema_not_found()

        return self._fresh(read)

    def compatibility(self, subject: str | None, default_to_global: bool = False) -> Compatibility:
        with self._lock:
            if subject is None:
                return self._config.get(None, DEFAULT_COMPATIBILITY)
            if subject in self._config:
                return self._config[subject]
            if default_to_global:
                return self._config.get(None, DEFAULT_COMPATIBILITY)
            raise compatibility_not_configured(subject)

    def mode(self, subject: str | None, default_to_global: bool = False) -> Mode:
        with self._lock:
            if subject is None:
                return self._mode.get(None, Mode.READWRITE)
            if subject in self._mode:
                return self._mode[subject]
            if default_to_global:
                return self._mode.get(None, Mode.READWRITE)
            raise mode_not_configured(subject)

    def test_compatibility(self, subject: str, schema: str, schema_type: str = "AVRO",
                           references: list[Reference] | None = None,
                           version: str | int | None = None) -> list[str]:
        """Why `schema` may not be registered under `subject` (empty: it may)."""
        parsed = self._parse(schema_type, schema, references or [])
        with self._lock:
            level = self._effective(subject)
            try:
                live = self._live(subject)
            except RegistryError:
                if version is not None and str(version) not in ("latest", "-1"):
                    raise
                return []
            if version is not None:
                against = [self._version(subject, version, False)]
            else:
                against = [live[n] for n in sorted(live)]
                if not level.transitive:
                    against = against[-1:]
            return self._check(level, parsed, against)

    # -- writes ------------------------------------------------------------------------------
    def register(self, subject: str, schema: str, schema_type: str = "AVRO",
                 references: list[Reference] | None = None, normalize: bool = False,
                 schema_id: int | None = None, version: int | None = None) -> Registered:
        refs = references or []
        parsed = self._parse(schema_type, schema, refs)
        with self._write_lock:
            self._require_writer()
            self._check_writable(subject, importing=schema_id is not None)
            with self._lock:
                existing = self._versions.get(subject, {})
                for sv in sorted(existing.values(), key=lambda s: s.version):
                    if not sv.deleted and sv.schema_type == parsed.schema_type and \
                            self._canonical(sv) == parsed.canonical:
                        return Registered(sv.id, sv.version)
                if schema_id is None:
                    live = [v for v in existing.values() if not v.deleted]
                    level = self._effective(subject)
                    against = sorted(live, key=lambda s: s.version)
                    if not level.transitive:
                        against = against[-1:]
                    problems = self._check(level, parsed, against)
                    if problems:
                        raise incompatible(subject, problems)
                    schema_id = self._same_schema_id(parsed) or (max(self._by_id, default=0) + 1)
                new_version = version or (max(existing, default=0) + 1)
                record = SchemaVersion(subject=subject, version=new_version, id=schema_id,
                                       schema=parsed.canonical if schema_type == "AVRO" else schema,
                                       schema_type=parsed.schema_type, references=tuple(refs))
            self._write(_schema_key(subject, new_version), _schema_value(record))
            return Registered(schema_id, new_version)

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        with self._write_lock:
            self._require_writer()
            self._check_writable(subject)
            with self._lock:
                versions = self._versions.get(subject)
                if not versions:
                    raise subject_not_found(subject)
                numbers = sorted(versions)
                live = [n for n in numbers if not versions[n].deleted]
            if permanent:
                if live:
                    raise subject_not_soft_deleted(subject)
                for n in numbers:
                    self._write(_schema_key(subject, n), None)
                self._write(_key(keytype="CONFIG", subject=subject, magic=0), None)
                return numbers
            if not live:
                raise subject_soft_deleted(subject)
            self._write(_key(keytype="DELETE_SUBJECT", subject=subject, magic=0),
                        json.dumps({"subject": subject, "version": max(live)}).encode())
            return live

    def delete_version(self, subject: str, version: str | int, permanent: bool = False) -> int:
        with self._write_lock:
            self._require_writer()
            self._check_writable(subject)
            sv = self.version(subject, version, deleted=permanent)
            if permanent:
                if not sv.deleted:
                    raise version_not_soft_deleted(subject, sv.version)
                self._write(_schema_key(subject, sv.version), None)
            else:
                if sv.deleted:
                    raise version_soft_deleted(subject, sv.version)
                self._write(_schema_key(subject, sv.version), _schema_value(replace(sv, deleted=True)))
            return sv.version

    def set_compatibility(self, subject: str | None, level: str) -> Compatibility:
        try:
            value = Compatibility(str(level).upper())
        except ValueError:
            raise invalid_compatibility(level) from None
        with self._write_lock:
            self._require_writer()
            self._write(_key(keytype="CONFIG", subject=subject, magic=0),
                        json.dumps({"compatibilityLevel": value.value}).encode())
        return value

    def delete_compatibility(self, subject: str | None) -> Compatibility:
        with self._write_lock:
            self._require_writer()
            previous = self.compatibility(subject, default_to_global=subject is None)
            self._write(_key(keytype="CONFIG", subject=subject, magic=0), None)
            return previous

    def set_mode(self, subject: str | None, mode: str, force: bool = False) -> Mode:
        try:
            value = Mode(str(mode).upper())
        except ValueError:
            raise invalid_mode(mode) from None
        with self._write_lock:
            self._require_writer()
            if value is Mode.IMPORT and not force and (
                    self.subjects() if subject is None else self._versions.get(subject)):
                raise operation_not_permitted("Cannot import since found existing subjects")
            self._write(_key(keytype="MODE", subject=subject, magic=0),
                        json.dumps({"mode": value.value}).encode())
        return value

    def delete_mode(self, subject: str) -> Mode:
        with self._write_lock:
            self._require_writer()
            previous = self.mode(subject)
            self._write(_key(keytype="MODE", subject=subject, magic=0), None)
            return previous

    # -- helpers -----------------------------------------------------------------------------
    def _effective(self, subject: str) -> Compatibility:
        return self._config.get(subject) or self._config.get(None, DEFAULT_COMPATIBILITY)

    def _check_writable(self, subject: str, importing: bool = False) -> None:
        mode = self._mode.get(subject) or self._mode.get(None, Mode.READWRITE)
        if mode is Mode.READONLY:
            raise operation_not_permitted(f"Subject {subject} is in read-only mode")
        if importing and mode is not Mode.IMPORT:
            raise operation_not_permitted(
                f"Subject {subject} is not in import mode: an id may be given only in IMPORT mode")

    def _check(self, level: Compatibility, parsed: formats.Parsed,
               against: list[SchemaVersion]) -> list[str]:
        problems: list[str] = []
        if level is Compatibility.NONE:
            return problems
        for sv in against:
            old = self._parse(sv.schema_type, sv.schema, list(sv.references))
            if level.backward:
                problems += formats.incompatibilities(parsed, old)
            if level.forward:
                problems += formats.incompatibilities(old, parsed)
        return problems

    def _resolve(self, references: list[Reference]) -> list[tuple[str, str]]:
        """(name, schema text) of each reference, each one's own references before it."""
        out: list[tuple[str, str]] = []
        seen: set[tuple[str, int]] = set()

        def visit(ref: Reference) -> None:
            if (ref.subject, ref.version) in seen:
                return
            seen.add((ref.subject, ref.version))
            sv = self._version(ref.subject, ref.version, False)
            for inner in sv.references:
                visit(inner)
            out.append((ref.name, sv.schema))

        for ref in references:
            visit(ref)
        return out

    def _parse(self, schema_type: str, schema: str,
               references: list[Reference]) -> formats.Parsed:
        return formats.parse((schema_type or "AVRO").upper(), schema, self._resolve(references))

    def _canonical(self, sv: SchemaVersion) -> str:
        key = (sv.schema_type, sv.schema, tuple(sv.references))
        found = self._canonicals.get(key)
        if found is None:
            try:
                found = self._parse(sv.schema_type, sv.schema, list(sv.references)).canonical
            except RegistryError:
                found = sv.schema
            self._canonicals[key] = found
        return found

    def _same_schema_id(self, parsed: formats.Parsed) -> int | None:
        """Confluent gives an identical schema the same id in every subject."""
        for sv in self._by_id.values():
            if sv.schema_type == parsed.schema_type and self._canonical(sv) == parsed.canonical:
                return sv.id
        return None


def _version_number(version: str | int) -> int:
    try:
        number = int(version)
    except (TypeError, ValueError):
        raise invalid_version(version) from None
    if not 1 <= number <= 2**31 - 1:
        raise invalid_version(version)
    return number
