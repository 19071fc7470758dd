"""Helpers both file connectors share: validators, file listing, task hashing."""

from __future__ import annotations

import codecs
import glob
import logging
import os
import re
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kctl.api import ConfigError
from kctl.api.paths import within

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)



class SingleChar:
    """A delimiter must be one character (or an escape such as \\t)."""

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        if len(decode_delimiter(str(value))) != 1:
            raise ConfigError("Must be a single character (\\t for tab)", key=name)

    def __str__(self) -> str:
        return "single character"


# schema.conflict (FileSource): what a value that cannot widen its field's type does
CONFLICT_ERROR = "error"
CONFLICT_STRING = "string"
CONFLICT_MODES = (CONFLICT_ERROR, CONFLICT_STRING)


def decode_delimiter(value: str) -> str:
    return {"\\t": "\t", "tab": "\t", "\\|": "|"}.get(value, value)


_SIMPLE_TYPES = frozenset({
    "boolean", "tinyint", "byte", "smallint", "short", "int", "integer", "bigint", "long",
    "float", "real", "double", "string", "binary", "date", "timestamp", "timestamp_ntz",
    "timestamp_ltz", "void", "variant", "decimal", "dec", "numeric", "varchar", "char",
    "character"})
_SIZED = frozenset({"decimal", "dec", "numeric", "varchar", "char", "character"})
_TOKEN = re.compile(r"\s*(`(?:[^`]|``)*`|'(?:[^'\\]|\\.)*'|[A-Za-z_][\w$]*|\d+|[<>(),:]|\S)")


class _Ddl:
    """A recursive-descent reading of Spark's DDL (`id INT, tags ARRAY<STRING>,
    m MAP<STRING, STRUCT<x: INT>>`), enough to name the first wrong type or token."""

    def __init__(self, text: str) -> None:
        self.tokens = [m.group(1) for m in _TOKEN.finditer(text)]
        self.i = 0

    def peek(self) -> str:
        return self.tokens[self.i] if self.i < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if expected is not None and tok.lower() != expected:
            raise ValueError(f"expected {expected!r}" + (f", got {tok!r}" if tok else
                                                         " at the end"))
        if not tok:
            raise ValueError("unexpected end of the schema")
        self.i += 1
        return tok

    def fields(self, end: str) -> None:
        while True:
            name = self.take()
            if not (name.startswith("`") or re.match(r"[A-Za-z_]", name)):
                raise ValueError(f"expected a field name, got {name!r}")
            if self.peek() == ":":
                self.take()
            self.type(name)
            while self.peek().lower() in ("not", "comment"):
                if self.take().lower() == "not":
                    self.take("null")
                elif not self.take().startswith("'"):
                    raise ValueError(f"COMMENT of {name} needs a quoted string")
            if self.peek() != ",":
                break
            self.take(",")
        if self.peek() != end:
            raise ValueError(f"expected ',' between fields, got {self.peek()!r}")

    def type(self, owner: str) -> None:
        tok = self.take().lower()
        if tok in ("array", "map", "struct"):
            self.take("<")
            if tok == "array":
                self.type(owner)
            elif tok == "map":
                self.type(owner)
                self.take(",")
                self.type(owner)
            elif self.peek() != ">":  # STRUCT<> is an empty struct
                self.fields(">")
            self.take(">")
        elif tok == "interval":
            while re.match(r"[A-Za-z]", self.peek()) and self.peek().lower() not in (
                    "not", "comment"):
                self.take()
        elif tok in _SIMPLE_TYPES:
            if tok in _SIZED and self.peek() == "(":
                self.take("(")
                while self.peek() not in (")", ""):
                    t = self.take()
                    if not (t.isdigit() or t == ","):
                        raise ValueError(f"bad size {t!r} for {tok.upper()}")
                self.take(")")
        else:
            raise ValueError(f"unknown type {tok.upper()!r} for field {owner}")


def check_ddl(text: str) -> None:
    """Raise ValueError naming the first problem of a Spark DDL schema."""
    p = _Ddl(text)
    p.fields("")
    if p.peek():
        raise ValueError(f"unexpected {p.peek()!r}")


class SparkDdl:
    """A Spark DDL schema (`id INT, name STRING`): checked here so `validate` (and so
    `create`) rejects an unknown type at once instead of a task failing later."""

    def __call__(self, name: str, value: Any) -> None:
        if value is None or not str(value).strip():
            return
        try:
            check_ddl(str(value))
        except ValueError as e:
            raise ConfigError(f"Not a Spark DDL schema ({e}): {str(value).strip()!r}",
                              key=name) from None

    def __str__(self) -> str:
        return "Spark DDL, e.g. id INT, name STRING"


class TextEncoding:
    """A Python codec whose newline is the byte \\n (lines are split before decoding)."""

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        try:
            codec = codecs.lookup(str(value))
        except LookupError:
            raise ConfigError(f"Unknown encoding {value!r}", key=name) from None
        try:
            ok = "a\nb".encode(codec.name).split(b"\n") == [b"a", b"b"]
        except (UnicodeError, LookupError):
            ok = False
        if not ok:
            raise ConfigError(f"{value!r} does not end lines with the byte \\n (use an "
                              "ASCII-compatible encoding such as utf-8 or latin-1)", key=name)

    def __str__(self) -> str:
        return "a codec name such as utf-8, latin-1, cp1252"


def _visible(path: str) -> bool:
    base = os.path.basename(path)
    return not base.startswith((".", "_")) and os.path.isfile(path)


def list_files(path: str, roots: Sequence[str] = (), warned: set[str] | None = None
               ) -> list[str]:
    """Absolute paths of the regular files `path` names: a file, a directory or a glob.

    Hidden (`.x`) and underscore (`_SUCCESS`) files are skipped, as Spark does, so a
    directory that another writer fills through temporary files never shows half files.
    With `roots` (the worker's allowed paths), a file a symlink leads outside them is
    skipped with a warning; `warned`: the files already warned about, each warned once
    (a task lists its path every poll.interval.ms).
    """
    found = _list_files(path)
    if not roots:
        return found
    allowed = [f for f in found if within(f, roots)]
    for f in sorted(set(found) - set(allowed)):
        if warned is not None:
            if f in warned:
                continue
            warned.add(f)
        log.warning("Skipping %s: it leads outside file.connector.allowed.paths (%s)",
                    f, ", ".join(roots))
    return allowed


def _list_files(path: str) -> list[str]:
    path = os.path.expanduser(path)
    if glob.has_magic(path):
        found = glob.glob(path, recursive=True)
    elif os.path.isdir(path):
        found = [os.path.join(path, n) for n in os.listdir(path)]
    elif os.path.exists(path):
        return [os.path.abspath(path)]
    else:
        found = []
    return sorted(os.path.abspath(p) for p in found if _visible(p))


def watched_dirs(path: str) -> list[str]:
    """The directories whose modification time changes when a file `path` names appears,
    is renamed or goes: the directory itself, a glob's directory when only its last part
    has wildcards, a single file's parent. None for deeper globs (`**`, `a/*/b`)."""
    path = os.path.abspath(os.path.expanduser(path))
    if glob.has_magic(path):
        head = os.path.dirname(path)
        return [] if glob.has_magic(head) else [head]
    return [path] if os.path.isdir(path) else [os.path.dirname(path)]


def reads_local_files(spark: SparkSession) -> bool:
    """Whether Spark's executors see this machine's files (a local master), so data can
    travel through a temporary file instead of as Arrow over the gateway; a cluster or a
    Spark Connect server may run elsewhere. Cheap: SparkContext keeps its master."""
    try:
        return str(spark.sparkContext.master).startswith("local")
    except Exception:  # Spark Connect: no SparkContext
        return False


def owner_of(filename: str, count: int) -> int:
    """The task index (0..count-1) that reads `filename`: stable across restarts and tasks,
    so a file that appears later is picked up by exactly one task without reconfiguring."""
    return zlib.crc32(filename.encode("utf-8")) % max(count, 1)
