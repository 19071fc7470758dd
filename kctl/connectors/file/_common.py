"""Helpers both file connectors share: validators, file listing, task hashing."""

from __future__ import annotations

import glob
import os
import re
import zlib
from typing import TYPE_CHECKING, Any

from kctl.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_DDL_FIELD = re.compile(r"^\s*`?[A-Za-z_][\w$]*`?\s*(?::\s*)?\S.*$", re.S)


class SingleChar:
    """A delimiter must be one character (or an escape such as \\t)."""

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        if len(decode_delimiter(str(value))) != 1:
            raise ConfigError("Must be a single character (\\t for tab)", key=name)

    def __str__(self) -> str:
        return "single character"


def decode_delimiter(value: str) -> str:
    return {"\\t": "\t", "tab": "\t", "\\|": "|"}.get(value, value)


class SparkDdl:
    """A cheap syntax check of a Spark DDL schema (`id INT, name STRING`); Spark has the last word."""

    def __call__(self, name: str, value: Any) -> None:
        if value is None or not str(value).strip():
            return
        depth = 0
        parts, cur = [], []
        for ch in str(value):
            depth += ch in "<("
            depth -= ch in ">)"
            if depth < 0:
                raise ConfigError("Unbalanced brackets in the schema", key=name)
            if ch == "," and depth == 0:
                parts.append("".join(cur))
                cur = []
            else:
                cur.append(ch)
        parts.append("".join(cur))
        if depth != 0:
            raise ConfigError("Unbalanced brackets in the schema", key=name)
        for p in parts:
            if not _DDL_FIELD.match(p) or len(p.split()) < 2:
                raise ConfigError(
                    f"Expected 'name TYPE' pairs separated by commas (Spark DDL), got {p.strip()!r}",
                    key=name)

    def __str__(self) -> str:
        return "Spark DDL, e.g. id INT, name STRING"


def _visible(path: str) -> bool:
    base = os.path.basename(path)
    return not base.startswith((".", "_")) and os.path.isfile(path)


def list_files(path: str) -> list[str]:
    """Absolute paths of the regular files `path` names: a file, a directory or a glob.

    Hidden (`.x`) and underscore (`_SUCCESS`) files are skipped, as Spark does, so a
    directory that another writer fills through temporary files never shows half files.
    """
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
