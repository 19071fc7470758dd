"""FileSource: lines (text, csv, JSON lines) and Parquet files become records.

Spark cannot start reading a file at a byte offset, so the task reads each file's new
complete lines itself (seeking to its stored position), hands them to Spark as Arrow
to parse, and takes the result back as Arrow: a restart resumes at the exact line, and
appended lines are read without re-reading the file. Parquet files are read whole.
"""

from __future__ import annotations

import bisect
import codecs
import collections
import contextlib
import csv
import dataclasses
import fnmatch
import gzip
import hashlib
import itertools
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kctl.api import (
    ConfigDef,
    ConfigType,
    ConfigValue,
    DataError,
    Importance,
    NonEmptyString,
    Range,
    Schema,
    SourceBatch,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
    ValidString,
    partition_key,
)
from kctl.api.arrow import arrow_schema_to_connect
from kctl.api.data import STRING_SCHEMA
from kctl.api.paths import allowed_roots
from kctl.connectors.file._common import (
    SingleChar,
    SparkDdl,
    TextEncoding,
    decode_delimiter,
    list_files,
    owner_of,
    reads_local_files,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

FORMATS = ("text", "csv", "json", "parquet")
CORRUPT = "_corrupt_record"
_READ_CHUNK = 8 << 20
_INFER_SAMPLE = 1000
FINGERPRINT_BYTES = 1024  # how much of a file's head tells it from another at the same inode
_MAX_BACKOFF_S = 60.0
_MAX_OPEN = 256  # beyond this many files, idle ones are not kept open

TASK_INDEX = "task.index"
TASK_COUNT = "task.count"

CONFIG_DEF = (
    ConfigDef()
    .define("path", ConfigType.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
            doc="A file, a directory (its visible files) or a glob pattern (** recurses).",
            group="File")
    .define("format", ConfigType.STRING, "text", ValidString.in_(*FORMATS), Importance.HIGH,
            "text (one string record per line), csv, json (JSON lines) or parquet.", group="File")
    .define("topic", ConfigType.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
            doc="Topic the records are written to.", group="File")
    .define("poll.interval.ms", ConfigType.LONG, 1000, Range.at_least(1), Importance.MEDIUM,
            "How often new files and appended lines are looked for.", group="File")
    .define("batch.max.rows", ConfigType.INT, 100_000, Range.at_least(1), Importance.MEDIUM,
            "Most rows per poll, i.e. per Spark job: a job costs 0.1-0.2 s of JVM time "
            "however small, so batch big.", group="File")
    .define("batch.max.bytes", ConfigType.INT, 16 << 20, Range.at_least(1), Importance.LOW,
            "Most bytes of lines per poll (at least one line), so long lines do not make "
            "batch.max.rows a memory problem.", group="File")
    .define("schema", ConfigType.STRING, "", SparkDdl(), Importance.MEDIUM,
            "Spark DDL schema for csv/json (e.g. `id BIGINT, name STRING`); empty: inferred "
            "from the first lines read, and for json widened with every top-level field that "
            "appears later (so no field is dropped).", group="File")
    .define("file.exclude", ConfigType.STRING, "", None, Importance.MEDIUM,
            "Comma-separated glob patterns of files to leave alone although `path` matches "
            "them, tried on the file name and the full path (e.g. `*.gz` for rotated, "
            "compressed copies).", group="File")
    .define("file.close.inactive.ms", ConfigType.LONG, 300_000, Range.at_least(0),
            Importance.LOW,
            "How long a file renamed out of `path` is still followed (through its open "
            "handle) for lines its writer appends after the rename.", group="File")
    .define("file.encoding", ConfigType.STRING, "utf-8", TextEncoding(), Importance.MEDIUM,
            "Character set of text, csv and json files (one whose newline is the byte \\n, "
            "e.g. utf-8, latin-1, cp1252). Decoding is strict: a line that does not decode "
            "is reported like a malformed one (dead letter queue under "
            "errors.tolerance=all, else the task fails), never altered.", group="File")
    .define("schema.conflict", ConfigType.STRING, "dead-letter",
            ValidString.in_("fail", "dead-letter", "string"), Importance.MEDIUM,
            "json with an inferred schema, when a field's values differ in type (`\"id\": 1` "
            "and `\"id\": \"two\"`): the schema takes the type most lines have, and a line "
            "that conflicts with it fails the task (fail) or is reported like a malformed "
            "line (dead-letter: the DLQ under errors.tolerance=all); `string` widens the "
            "field to a string instead.", group="File")
    .define("csv.header", ConfigType.BOOLEAN, True, None, Importance.LOW,
            "The first line of each csv file is a header (names the columns, not a record).",
            group="CSV")
    .define("csv.delimiter", ConfigType.STRING, ",", SingleChar(), Importance.LOW,
            "Field separator of csv files (\\t for tab).", group="CSV")
)


def _joined_lines(texts: pa.Array) -> pa.Buffer:
    """The lines as one UTF-8 buffer, each ended by a newline."""
    joined = pc.binary_join_element_wise(texts, "", "\n").cast(pa.binary())
    offsets = joined.buffers()[1]
    first = int.from_bytes(offsets[:4].to_pybytes(), "little", signed=True)
    return joined.buffers()[2][first:first + int(pc.sum(pc.binary_length(joined)).as_py() or 0)]


def _may_add_keys(lines: pa.Buffer, known: list[str]) -> bool:
    """Whether some line (all start with `{`) may carry a top-level field the schema lacks.

    One pass of pyarrow's JSON reader over all lines finds their top-level names; only
    when that fails (a malformed or unusual line) or finds a new name does each line need
    Spark's own check, which costs a JSON parse per line.
    """
    import pyarrow.json as pj

    try:
        names = pj.read_json(pa.BufferReader(lines)).schema.names
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return True
    return not set(names) <= set(known)


# --- connector ----------------------------------------------------------------------------


class FileSourceConnector(SourceConnector):
    """Splits the matching files over tasks by a hash of their names, and watches for more."""

    def __init__(self) -> None:
        self._props: dict[str, str] = {}
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._task_count = 0
        self._max_tasks: int | None = None

    def local_paths(self, props: Mapping[str, Any]) -> dict[str, str]:
        return {"path": str(props["path"])} if props.get("path") else {}

    def config(self) -> ConfigDef:
        return CONFIG_DEF

    def task_class(self) -> type[Task]:
        return FileSourceTask

    def validate(self, props: Mapping[str, Any]) -> list[ConfigValue]:
        """Per-key checks, then the combinations a key alone cannot judge."""
        values = CONFIG_DEF.validate(props)
        by_name = {v.name: v for v in values}
        fmt = str(props.get("format") or "text").strip().lower()
        if str(props.get("schema") or "").strip() and fmt in ("text", "parquet") \
                and "schema" in by_name:
            by_name["schema"].errors.append(
                f"`schema` applies to csv and json files; format {fmt} has its own")
        for key in ("csv.header", "csv.delimiter"):
            if key in props and fmt != "csv" and key in by_name:
                by_name[key].errors.append(f"{key} applies to format csv, not {fmt}")
        return values

    def start(self, props: Mapping[str, str]) -> None:
        self._props = dict(props)
        parsed = CONFIG_DEF.parse(props)
        self._path = parsed["path"]
        self._roots = allowed_roots(props)
        self._exclude = _patterns(parsed["file.exclude"])
        self._interval = max(parsed["poll.interval.ms"], 200) / 1000
        self._stop.clear()

    def _wanted(self, max_tasks: int) -> int:
        files = [f for f in list_files(self._path, self._roots)
                 if not _excluded(f, self._exclude)]
        return max(1, min(max_tasks, len(files)))

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        self._max_tasks = max_tasks
        n = self._wanted(max_tasks)
        self._task_count = n
        if n < max_tasks and self._watcher is None:
            # fewer files than tasks: more files later deserve more tasks
            self._watcher = threading.Thread(target=self._watch, name="file-source-watch",
                                             daemon=True)
            self._watcher.start()
        return [{**self._props, TASK_INDEX: str(i), TASK_COUNT: str(n)} for i in range(n)]

    def _watch(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                if self._max_tasks is not None and self._wanted(self._max_tasks) != self._task_count:
                    log.info("File set under %s changed; reconfiguring tasks", self._path)
                    self.context.request_task_reconfiguration()
                if self._task_count >= (self._max_tasks or 1):
                    self._watcher = None
                    return
            except Exception as e:  # a transient listing failure must not kill the connector
                log.warning("Watching %s failed: %s", self._path, e)

    def stop(self) -> None:
        self._stop.set()
        w, self._watcher = self._watcher, None
        if w is not None and w is not threading.current_thread():
            w.join(timeout=5)


# --- task ---------------------------------------------------------------------------------


@dataclass
class _FileState:
    """One file, known by its identity (device and inode): its path may change (rename)
    without it becoming another file, and another file may appear at its path."""

    path: str
    partition: dict[str, str]
    ident: tuple[int, int] = (0, 0)
    position: int = 0
    line: int = 0
    row: int = 0  # parquet: rows already emitted
    complete: bool = False
    header: str | None = None
    fh: BinaryIO | None = None  # kept open: a renamed or deleted file is still readable
    fp: str = ""  # fingerprint of the first fp_len bytes: tells a rewrite from an append
    fp_len: int = 0
    seen: int = 0  # the largest size seen, to say how much a loss cost
    gone: bool = False  # no longer at a path `path` matches (renamed away or deleted)
    idle_since: float | None = None
    failures: int = 0
    retry_at: float = 0.0
    reported: bool = False
    # (fp, fp_len, position, line, bytes unread) before the last truncation: a copy made
    # just before it (copytruncate) continues from there
    before_cut: tuple[str, int, int, int, int] | None = None

    def close(self) -> None:
        fh, self.fh = self.fh, None
        if fh is not None:
            with contextlib.suppress(OSError):
                fh.close()


@dataclass(frozen=True, slots=True)
class FileStats:
    """What the task could not deliver and why, for its status and metrics."""

    truncations: int = 0
    deletions: int = 0
    bytes_lost: int = 0
    unreadable: int = 0
    renames: int = 0


def file_id(st: os.stat_result) -> str:
    return f"{st.st_dev}:{st.st_ino}"


def _patterns(value: str) -> list[str]:
    return [p.strip() for p in value.split(",") if p.strip()]


def _excluded(path: str, patterns: list[str]) -> bool:
    """Whether a file.exclude glob matches the file's name or its full path."""
    name = os.path.basename(path)
    return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(path, p) for p in patterns)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _kind(v: Any) -> str:
    return {bool: "boolean", int: "number", float: "number", str: "string", dict: "object",
            list: "array"}.get(type(v), "other")


def _without_conflicts(sample: list[str]) -> list[str]:
    """The sample without the lines whose top-level values have another json kind than
    most lines give that field: inferred from all, Spark would widen the field to a
    string (and every number with it); without them, those lines are the conflicts."""
    parsed: list[tuple[str, dict[str, str]]] = []
    votes: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for text in sample:
        try:
            obj = json.loads(text)
        except ValueError:
            obj = None
        kinds = {k: _kind(v) for k, v in obj.items() if v is not None} \
            if isinstance(obj, dict) else {}
        for k, kind in kinds.items():
            votes[k][kind] += 1
        parsed.append((text, kinds))
    winner = {k: c.most_common(1)[0][0] for k, c in votes.items() if len(c) > 1}
    if not winner:
        return sample
    return [t for t, kinds in parsed if all(kinds.get(k, w) == w for k, w in winner.items())]


def _deleted(fh: BinaryIO) -> bool:
    try:
        return os.fstat(fh.fileno()).st_nlink == 0
    except OSError:
        return True


def _fingerprint(fh: BinaryIO, n: int) -> str:
    data = os.pread(fh.fileno(), n, 0)
    return hashlib.blake2b(data, digest_size=8).hexdigest() if len(data) == n else ""


@dataclass(slots=True)
class _Chunk:
    """Complete lines of one file read in one go, as columns: each line's text, its
    number, and the byte position where the file continues after it."""

    state: _FileState
    texts: pa.Array
    lines: list[int]
    ends: list[int]
    bad: MalformedLine | None = None  # a line that could not be decoded: nothing else
    start: int = 0  # where the chunk begins in its file, and the line before it
    start_line: int = 0

    def __len__(self) -> int:
        return len(self.lines)

    def keep(self, mask: pa.Array) -> None:
        self.texts = self.texts.filter(mask)
        flags = mask.to_pylist()
        self.lines = [x for x, k in zip(self.lines, flags, strict=True) if k]
        self.ends = [x for x, k in zip(self.ends, flags, strict=True) if k]


@dataclass(frozen=True, slots=True)
class MalformedLine:
    """A line Spark could not parse: everything a DLQ or an error message needs."""

    filename: str
    line: int
    position: int
    text: str
    format: str
    end: int = 0  # where the file continues after this line
    partition: Mapping[str, str] | None = None
    fp: str = ""
    fplen: int = 0
    problem: str = ""  # set when the line is not malformed but undecodable

    def describe(self) -> str:
        preview = self.text if len(self.text) <= 200 else self.text[:200] + "..."
        if self.problem:
            return (f"Malformed {self.format} line {self.line} in {self.filename} "
                    f"({self.problem}): {preview!r}")
        return f"Malformed {self.format} line {self.line} in {self.filename}: {preview!r}"


class FileSourceTask(SourceTask):
    """Reads the files of its hash slice; one Spark job per poll parses up to batch.max.rows."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._stop = threading.Event()
        self._files: dict[tuple[int, int], _FileState] = {}
        self._gz: dict[tuple[int, int], bytes] = {}
        self._bad_chunks: list[_Chunk] = []
        self._copying: dict[tuple[int, int], int] = {}  # name-derived new files, by size
        self._stats = FileStats()
        self._file_errors: collections.deque[tuple[SourceRecord, DataError]] = \
            collections.deque()
        self._next_scan = 0.0
        self._round = 0
        self._schema_ddl: str | None = None
        self._schema_given = False
        self._csv_header_line: str | None = None
        self._connect_schemas: dict[pa.Schema, Schema] = {}
        self._items: collections.deque[SourceBatch | MalformedLine] = collections.deque()
        self._parquet: dict[str, pa.Table] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._ahead: Future[list[SourceBatch | MalformedLine]] | None = None

    # lifecycle

    def start(self, props: Mapping[str, str]) -> None:
        c = CONFIG_DEF.parse(props)
        self.path: str = c["path"]
        self.roots = allowed_roots(props)
        self.format: str = c["format"].lower()
        self.topic: str = c["topic"]
        self.interval = c["poll.interval.ms"] / 1000
        self.batch_max: int = c["batch.max.rows"]
        self.batch_bytes: int = c["batch.max.bytes"]
        self._schema_ddl = c["schema"].strip() or None
        self._schema_given = self._schema_ddl is not None
        self.csv_header: bool = c["csv.header"]
        self.delimiter = decode_delimiter(c["csv.delimiter"])
        self.conflict: str = c["schema.conflict"].lower()
        self.encoding: str = codecs.lookup(c["file.encoding"]).name
        self.utf8 = self.encoding == "utf-8"
        self.exclude = _patterns(c["file.exclude"])
        self.close_inactive = c["file.close.inactive.ms"] / 1000
        self.tolerance_all = str(props.get("errors.tolerance", "none")).lower() == "all"
        self.index = int(props.get(TASK_INDEX, "0"))
        self.count = int(props.get(TASK_COUNT, "1"))
        self._stop.clear()
        self._scan()

    def stop(self) -> None:
        self._stop.set()
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        for st in list(self._files.values()):
            st.close()

    # file discovery and offsets

    def _mine(self, ident: str) -> bool:
        # by identity, not name: a renamed file stays with the task that reads it
        return owner_of(ident, self.count) == self.index

    def _excluded(self, path: str) -> bool:
        return _excluded(path, self.exclude)

    @property
    def stats(self) -> FileStats:
        """Counts of losses and bad files so far (the log names each one)."""
        return self._stats

    def metrics(self) -> dict[str, int]:
        """The stats as counters for the worker's /metrics (connector-task-metrics)."""
        s = self._stats
        return {"file-truncations-total": s.truncations,
                "file-deleted-unread-total": s.deletions,
                "file-bytes-lost-total": s.bytes_lost,
                "file-unreadable-total": s.unreadable,
                "file-renames-total": s.renames}

    def _count(self, **inc: int) -> None:
        s = self._stats
        self._stats = FileStats(**{k: getattr(s, k) + inc.get(k, 0)
                                   for k in FileStats.__dataclass_fields__})

    def _scan(self) -> None:
        """Match the files `path` names to the files already tracked, by identity: a
        known identity at another path was renamed, a known one at no path was renamed
        away or deleted, and a new one resumes from its stored offset (or is a copy)."""
        self._next_scan = self._clock() + self.interval
        listed: dict[tuple[int, int], str] = {}
        sizes: dict[tuple[int, int], int] = {}
        for f in list_files(self.path, self.roots):
            if self._excluded(f):
                continue
            try:
                info = os.stat(f)
            except OSError:  # gone between listing and stat
                continue
            listed[(info.st_dev, info.st_ino)] = f
            sizes[(info.st_dev, info.st_ino)] = info.st_size
        for ident, st in list(self._files.items()):
            f = listed.get(ident)
            if f is not None and st.fh is not None and _deleted(st.fh):
                f = None  # the inode was reused by a new file: this one is gone
            if f is None:
                if not st.gone:
                    self._gone(st)
                continue
            if f != st.path:
                log.info("%s was renamed to %s; continuing at byte %d", st.path, f,
                         st.position)
                self._count(renames=1)
                st.path = f
            st.gone = False
            if st.fh is None and not f.endswith(".gz"):  # not open: what it would lose
                st.seen = max(st.seen, sizes[ident])  # (an open one's reads measure it)
        new = [(ident, f) for ident, f in listed.items()
               if ident not in self._files and self._mine(f"{ident[0]}:{ident[1]}")]
        if not new:
            return
        partitions = [{"file": f"{i[0]}:{i[1]}"} for i, _ in new]
        legacy = [{"filename": f} for _, f in new]
        stored = self.context.offset_storage_reader.offsets(partitions + legacy)
        for (ident, f), part, old in zip(new, partitions, legacy, strict=True):
            st = _FileState(f, part, ident)
            off = stored.get(partition_key(part))
            if not off and (off := stored.get(partition_key(old))):
                off = {**off, "legacy": True}
            if not self._resume(st, off or {}):
                st.close()  # a copy still being written: look again at the next scan
                continue
            if st.fh is None and not f.endswith(".gz"):
                st.seen = max(st.seen, sizes[ident])
            self._files[ident] = st

    def _resume(self, st: _FileState, off: Mapping[str, Any]) -> bool:
        """Continue where the stored offset says, if it is this file's; else from byte 0,
        or where a tracked file left off when this one is its copy (copytruncate)."""
        if self.format == "parquet":
            st.row = int(off.get("row", 0))
            st.complete = bool(off.get("complete", False))
            return True
        if off and self._open(st) is not None and self._matches(st, off):
            st.position = int(off.get("position", 0))
            st.line = int(off.get("line", 0))
            st.fp, st.fp_len = str(off.get("fp", "")), int(off.get("fplen", 0))
            st.seen = st.position
            log.debug("Tracking %s from byte %d (line %d)", st.path, st.position, st.line)
            return True
        if off:
            log.info("%s is a new file at a known place (its first bytes differ from what "
                     "was read there before): reading it from the start", st.path)
        return self._adopt_copy(st)

    def _matches(self, st: _FileState, off: Mapping[str, Any]) -> bool:
        assert st.fh is not None
        size = os.fstat(st.fh.fileno()).st_size
        if size < int(off.get("position", 0)) and not st.path.endswith(".gz"):
            return False  # (a .gz file's positions count decompressed bytes)
        n = int(off.get("fplen", 0))
        return off.get("legacy", False) or n == 0 or _fingerprint(st.fh, n) == off.get("fp")

    def _adopt_copy(self, st: _FileState) -> bool:
        """A new file named after a tracked one (app.log.1 after app.log) that starts with
        the same bytes is a copy of it: continue it where the tracked one is, so a
        copytruncate rotation neither repeats nor loses lines."""
        name = os.path.basename(st.path)
        for other in list(self._files.values()):
            base = os.path.basename(other.path)
            if not name.startswith(base) or name == base or name[len(base)] not in ".-_":
                continue
            for fp, fp_len, position, line, lost in (
                    (other.fp, other.fp_len, other.position, other.line, 0),
                    *([other.before_cut] if other.before_cut else [])):
                if not fp_len or not position or self._open(st) is None:
                    continue
                assert st.fh is not None
                size = os.fstat(st.fh.fileno()).st_size
                if size < position and self._copying.get(st.ident) != size:
                    self._copying[st.ident] = size  # maybe a copy still being written:
                    return False                    # wait while it grows
                if size < position or _fingerprint(st.fh, fp_len) != fp:
                    continue
                st.position, st.line, st.seen = position, line, position
                st.fp, st.fp_len = fp, fp_len
                if lost:  # the truncation's loss is what the copy does not have
                    self._count(bytes_lost=-min(lost, size - position))
                    other.before_cut = None
                log.info("%s is a copy of %s: continuing it at byte %d", st.path,
                         other.path, st.position)
                self._copying.pop(st.ident, None)
                return True
        self._copying.pop(st.ident, None)
        return True

    def _open(self, st: _FileState) -> BinaryIO | None:
        """The file's handle, opened at its path once (checking it is still this file)."""
        if st.fh is not None:
            return st.fh
        if st.retry_at > self._clock():
            return None
        try:
            fh: BinaryIO = open(st.path, "rb")  # noqa: SIM115 - kept open on purpose
        except OSError as e:
            self._bad_file(st, "reading", e)
            return None
        info = os.fstat(fh.fileno())
        if (info.st_dev, info.st_ino) != st.ident:
            fh.close()  # another file took its path; the next scan sorts it out
            return None
        st.fh = fh
        if st.failures:
            log.info("%s is readable again", st.path)
            st.failures = 0
        return fh

    def _bad_file(self, st: _FileState, doing: str, error: BaseException) -> None:
        """One file failing is that file's problem: log it, count it, dead-letter it once
        under errors.tolerance=all, and retry it later with backoff; others keep flowing."""
        st.failures += 1
        delay = min(_MAX_BACKOFF_S, self.interval * 2 ** min(st.failures, 16))
        st.retry_at = self._clock() + delay
        log.warning("Failed %s %s (attempt %d; retrying in %.1f s): %s", doing, st.path,
                    st.failures, delay, error)
        if st.reported:
            return
        st.reported = True
        self._count(unreadable=1)
        if self.tolerance_all:
            err = DataError(f"Failed {doing} {st.path}: {error}")
            self._file_errors.append((SourceRecord(
                self.topic, None, None, None, STRING_SCHEMA, None,
                source_partition=st.partition,
                source_offset={"path": st.path, "position": st.position, "line": st.line}),
                err))

    def _reporter(self) -> Any:
        get = getattr(self.context, "errant_record_reporter", None)
        return get() if get is not None else None

    def _gone(self, st: _FileState) -> None:
        """The file is at no path we read any more: if it is still open, read it to its
        end (a writer may still append to a renamed file); else what was unread is lost."""
        st.gone = True
        st.idle_since = None
        if st.fh is not None:
            what = "deleted" if _deleted(st.fh) else "renamed away"
            log.info("%s was %s; reading it to its end through its open handle", st.path, what)
            return
        self._drop(st, "deleted")

    def _drop(self, st: _FileState, why: str) -> None:
        lost = max(0, st.seen - st.position) if not st.complete else 0
        if lost and self.format != "parquet":
            log.warning("%s was %s before it was fully read: %d bytes after byte %d were "
                        "never read", st.path, why, lost, st.position)
            self._count(deletions=1, bytes_lost=lost)
        st.close()
        self._files.pop(st.ident, None)
        self._parquet.pop(st.path, None)

    def _idle(self, st: _FileState) -> None:
        """Nothing new in a file: forget a deleted one, and a renamed-away one after
        file.close.inactive.ms. With many files, an idle one at its path is closed (and
        opened again, checking its identity, when it is read next)."""
        if not st.gone:
            if len(self._files) > _MAX_OPEN:
                st.close()
            return
        now = self._clock()
        if st.idle_since is None:
            st.idle_since = now
        if st.fh is None or _deleted(st.fh) or now - st.idle_since >= self.close_inactive:
            log.info("Done with %s at byte %d", st.path, st.position)
            self._drop(st, "closed")

    # polling

    def poll(self) -> list[SourceBatch] | None:
        """Return the next records, parsed ahead while the runtime was busy with the last.

        Spark parses in the JVM, so reading the next batch in a helper thread overlaps
        it with the runtime converting and producing this one. Batches are still made
        one at a time, in order: the result is the same as reading synchronously.
        A malformed line ends a poll's records; the next poll reports it first (see
        `_report`), so the runtime sees records and rejects in file order.
        """
        if not self._items:
            ahead, self._ahead = self._ahead, None
            batch = ahead.result() if ahead is not None else self._next_batch()
            if not batch:
                self._stop.wait(max(0.0, min(self.interval, self._next_scan - self._clock())))
                return []
            if not self._stop.is_set():
                self._ahead = self._executor().submit(self._next_batch)
            self._items.extend(batch)
        while self._file_errors:  # a file that cannot be read, reported from this thread
            reporter = self._reporter()
            record, err = self._file_errors.popleft()
            if reporter is not None:
                reporter.report(record, err)
        items = self._items
        while items and isinstance(items[0], MalformedLine):
            self._report(items.popleft())
        out: list[SourceBatch] = []
        while items and not isinstance(items[0], MalformedLine):
            out.append(items.popleft())  # type: ignore[arg-type]
        return out

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix=f"file-source-{self.index}")
        return self._pool

    def _next_batch(self) -> list[SourceBatch | MalformedLine]:
        if self._clock() >= self._next_scan:
            self._scan()
        return self._poll_parquet() if self.format == "parquet" else self._poll_lines()

    def _ordered_files(self) -> list[_FileState]:
        """Start at a different file each poll so one big file cannot starve the others."""
        files = list(self._files.values())
        if not files:
            return files
        self._round = (self._round + 1) % len(files)
        return files[self._round:] + files[:self._round]

    def _read_chunk(self, st: _FileState, budget: int, byte_budget: int) -> _Chunk | None:
        """Up to `budget` complete lines after st.position, stopping after the line that
        reaches `byte_budget` bytes; a trailing partial line waits. A file that fails to
        read is that file's problem (reported, retried later), not the task's."""
        try:
            return self._read_open(st, budget, byte_budget)
        except (OSError, ValueError) as e:  # ValueError: its handle was closed by stop()
            st.close()
            if not self._stop.is_set():
                self._bad_file(st, "reading", e)
            return None

    def _read_open(self, st: _FileState, budget: int, byte_budget: int) -> _Chunk | None:
        if st.retry_at > self._clock():  # failed lately: wait for its backoff
            return None
        fh = self._open(st)
        if fh is None:
            return None
        if st.path.endswith(".gz"):
            return self._read_gz(st, fh, budget, byte_budget)
        size = os.fstat(fh.fileno()).st_size
        if size < st.position or (st.fp_len and size > st.position
                                  and _fingerprint(fh, st.fp_len) != st.fp):
            self._truncated(st, size)
        st.seen = max(st.seen, size)
        if size == st.position:
            self._idle(st)
            return None
        st.idle_since = None
        chunk = self._lines(st, fh, budget, byte_budget)
        if chunk is not None and st.fp_len < FINGERPRINT_BYTES and st.position > st.fp_len:
            st.fp_len = min(FINGERPRINT_BYTES, st.position)
            st.fp = _fingerprint(fh, st.fp_len)
        return chunk

    def _truncated(self, st: _FileState, size: int) -> None:
        """Same file, new content (copytruncate, `: > file`): read it again from byte 0.
        What was in it beyond our position when it was cut is lost, and said so."""
        lost = max(0, st.seen - st.position)
        log.warning("%s was truncated (now %d bytes, read up to byte %d): reading it again "
                    "from the start; %d bytes that were in it were never read (unless a copy "
                    "the rotation made has them)", st.path, size,
                    st.position, lost)
        self._count(truncations=1, bytes_lost=lost)
        st.before_cut = (st.fp, st.fp_len, st.position, st.line, lost)
        st.position = st.line = st.seen = st.fp_len = 0
        st.fp = ""
        st.header = None

    def _read_gz(self, st: _FileState, fh: BinaryIO, budget: int,
                 byte_budget: int) -> _Chunk | None:
        """A compressed (rotated) file is read whole once it decompresses completely; its
        offsets count decompressed bytes."""
        if st.complete:
            self._idle(st)
            return None
        data = self._gz.get(st.ident)
        if data is None:
            try:
                fh.seek(0)
                data = gzip.decompress(fh.read())
            except (EOFError, OSError, gzip.BadGzipFile) as e:  # still being written
                log.debug("Cannot decompress %s yet: %s", st.path, e)
                return None
            self._gz[st.ident] = data
            st.fp_len = min(FINGERPRINT_BYTES, os.fstat(fh.fileno()).st_size)
            st.fp = _fingerprint(fh, st.fp_len)
        import io

        chunk = self._lines(st, io.BytesIO(data), budget, byte_budget)  # type: ignore[arg-type]
        if st.position >= len(data) or chunk is None:
            st.complete = True
            self._gz.pop(st.ident, None)
            if st.position < len(data):
                log.warning("%s ends without a newline: its last %d bytes are not a line",
                            st.path, len(data) - st.position)
        return chunk

    def _lines(self, st: _FileState, fh: BinaryIO, budget: int,
               byte_budget: int) -> _Chunk | None:
        raw: list[bytes] = []
        crlf = False
        fh.seek(st.position)
        tail = b""
        taken = 0
        while len(raw) < budget and taken < byte_budget:
            data = fh.read(min(_READ_CHUNK, max(byte_budget - taken, 1 << 16)))
            if not data:
                break
            crlf = crlf or b"\r" in data
            parts = (tail + data).split(b"\n")
            tail = parts.pop()  # no newline yet: not a complete line
            parts = parts[:budget - len(raw)]
            raw.extend(parts)
            taken += sum(map(len, parts)) + len(parts)
        if not raw:
            return None
        ends = list(itertools.accumulate((len(r) + 1 for r in raw), initial=st.position))[1:]
        if ends[-1] - st.position > byte_budget:  # keep the lines within it (at least one)
            keep = max(1, bisect.bisect_right(ends, st.position + byte_budget))
            raw, ends = raw[:keep], ends[:keep]
        if crlf:
            raw = [r[:-1] if r.endswith(b"\r") else r for r in raw]
        try:
            if not self.utf8:
                raise UnicodeError
            texts = pa.array(raw, pa.binary()).cast(pa.string())
        except (pa.ArrowInvalid, UnicodeError):  # decode line by line, strictly
            decoded: list[str] = []
            for r in raw:
                try:
                    decoded.append(r.decode(self.encoding))
                except UnicodeDecodeError as e:
                    if decoded:  # the lines before it now; it comes next, on its own
                        raw, ends = raw[:len(decoded)], ends[:len(decoded)]
                        break
                    return self._undecodable(st, r, ends[0], e)
            texts = pa.array(decoded, pa.string())
        first = st.line + 1
        start = st.position
        st.position, st.line = ends[-1], st.line + len(raw)
        return _Chunk(st, texts, list(range(first, first + len(raw))), ends, None, start,
                      first - 1)

    def _undecodable(self, st: _FileState, raw: bytes, end: int,
                     error: UnicodeDecodeError) -> _Chunk:
        """A line that is not in file.encoding: a chunk of no lines carrying it as malformed
        (never replaced silently), the file continuing after it."""
        st.line += 1
        start, st.position = st.position, end
        text = raw.decode(self.encoding, errors="backslashreplace")
        bad = MalformedLine(st.path, st.line, start, text, self.format, end, st.partition,
                            st.fp, st.fp_len,
                            problem=f"not valid {self.encoding} ({error.reason} at byte "
                                    f"{error.start} of the line)")
        return _Chunk(st, pa.array([], pa.string()), [], [], bad)

    def _poll_lines(self) -> list[SourceBatch | MalformedLine]:
        out = self._poll_chunks()
        bad = [c.bad for c in self._bad_chunks if c.bad is not None]
        self._bad_chunks = []
        return out + bad  # (each bad line is its file's only line in this poll)

    def _poll_chunks(self) -> list[SourceBatch | MalformedLine]:
        chunks: list[_Chunk] = []
        total = size = 0
        for st in self._ordered_files():
            if total >= self.batch_max or size >= self.batch_bytes:
                break
            start = st.position
            chunk = self._read_chunk(st, self.batch_max - total, self.batch_bytes - size)
            if chunk is not None and chunk.bad is not None:
                self._bad_chunks.append(chunk)
                size += st.position - start
            elif chunk is not None:
                chunks.append(chunk)
                total += len(chunk)
                size += st.position - start
        if not chunks:
            return []
        if self.format == "text":
            return [self._batch(c.state, STRING_SCHEMA, c.texts, c.lines, c.ends)
                    for c in chunks]
        for c in chunks:
            if self.format == "csv" and self.csv_header and c.lines[0] == 1:
                c.state.header = c.texts[0].as_py()
                c.keep(pa.array([False] + [True] * (len(c) - 1)))
            blank = pc.equal(pc.utf8_trim_whitespace(c.texts), "")
            if pc.any(blank).as_py():  # blank lines carry no record
                c.keep(pc.invert(blank))
        chunks = [c for c in chunks if len(c)]
        if not chunks:
            return []
        return self._parse(chunks)

    def _batch(self, st: _FileState, schema: Schema, values: pa.Array, lines: list[int],
               ends: list[int]) -> SourceBatch:
        n = len(lines)
        return SourceBatch(self.topic, st.partition, schema, values,
                           {"position": ends, "line": lines, "path": [st.path] * n,
                            "fp": [st.fp] * n, "fplen": [st.fp_len] * n})

    # Spark parsing

    def _spark(self) -> SparkSession:
        return self.context.spark()

    def _parse(self, chunks: list[_Chunk]) -> list[SourceBatch | MalformedLine]:
        if self.format == "csv" and self.csv_header:
            return self._parse_csv(chunks)
        return self._parse_group(chunks)

    def _parse_csv(self, chunks: list[_Chunk]) -> list[SourceBatch | MalformedLine]:
        """csv columns are matched by header name, one Spark job per distinct header: a
        file without some column gives nulls for it, one with new columns widens an
        inferred schema (a given one ignores them), and a header that cannot be matched
        (duplicate or empty names, nothing in common with `schema`) is that file's error."""
        spark = self._spark()  # first: pyspark is imported while the session is built
        from pyspark.sql.types import StructType

        groups: dict[tuple[str, ...], list[_Chunk]] = {}
        for c in chunks:
            st = c.state
            if st.header is None:
                st.header = self._header_of(st.path, self.encoding)
            names = tuple(next(csv.reader([st.header], delimiter=self.delimiter), []))
            problem = self._header_problem(names)
            if problem:  # back to the chunk's start: retried later, with backoff
                err = DataError(f"the csv header {st.header!r} of {st.path} {problem}")
                st.position, st.line = c.start, c.start_line
                st.header = None if c.start == 0 else st.header
                self._bad_file(st, "parsing", err)
                continue
            groups.setdefault(names, []).append(c)
        out: list[SourceBatch | MalformedLine] = []
        for names, group in groups.items():
            if self._schema_ddl is None:
                self._infer(spark, group)
            current = StructType.fromDDL(self._schema_ddl or "")
            known = {f.name for f in current.fields}
            new = [n for n in names if n not in known]
            if new and not self._schema_given:
                sample = [t for c in group for t in c.texts.slice(0, _INFER_SAMPLE).to_pylist()]
                inferred = {f.name: f for f in self._infer_fields(
                    spark, sample, [group[0].state])}
                current = StructType([*current.fields, *(inferred[n] for n in new
                                                         if n in inferred)])
                self._schema_ddl = current.toDDL()
                log.info("Widened the csv schema for %s with %s from %s: %s", self.path, new,
                         group[0].state.path, self._schema_ddl)
            types = {f.name: f.dataType.simpleString() for f in current.fields}
            file_ddl = ", ".join(f"`{n}` {types.get(n, 'STRING')}" for n in names)
            out.extend(self._parse_group(group, (file_ddl, set(names))))
        return out

    def _header_problem(self, names: tuple[str, ...]) -> str:
        if not names or any(not n.strip() for n in names):
            return "has an empty column name"
        if len(set(names)) < len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            return f"names columns {dup} more than once"
        if self._schema_given and self._schema_ddl:
            from pyspark.sql.types import StructType

            if not set(names) & {f.name for f in StructType.fromDDL(self._schema_ddl).fields}:
                return f"has no column of the schema {self._schema_ddl!r}"
        return ""

    def _parse_group(self, chunks: list[_Chunk], layout: tuple[str, set[str]] | None = None
                     ) -> list[SourceBatch | MalformedLine]:
        """One Spark job for these chunks; `layout`: a csv file's own columns (DDL in its
        header's order, and their names) to project onto the task's schema."""
        spark = self._spark()
        texts = pa.concat_arrays([c.texts for c in chunks])
        ddl = self._schema_ddl or self._infer(spark, chunks)
        result, widen = self._parse_with(spark, texts, ddl, layout)
        if widen is not None:  # json fields the schema does not know yet: widen it, never drop them
            ddl = self._widen(spark, texts.filter(widen).to_pylist())
            result, _ = self._parse_with(spark, texts, ddl)
        corrupt = result.column(CORRUPT)
        malformed = pc.indices_nonzero(pc.is_valid(corrupt)).to_pylist() \
            if corrupt.null_count < len(corrupt) else []
        good = result.drop_columns([CORRUPT])
        if malformed:
            good = good.filter(pc.invert(pc.is_valid(corrupt)))
        schema = self._connect_schemas.get(good.schema)
        if schema is None:
            schema = arrow_schema_to_connect(good.schema)
            self._connect_schemas[good.schema] = schema
        values = good.to_struct_array().combine_chunks()
        out: list[SourceBatch | MalformedLine] = []
        bad = iter(malformed)
        next_bad = next(bad, None)
        row = taken = 0  # row: index in all chunks' lines; taken: good rows used
        for c in chunks:
            start = 0
            while start < len(c):
                stop = next_bad - row if next_bad is not None and next_bad < row + len(c) \
                    else len(c)
                if stop > start:
                    out.append(self._batch(c.state, schema, values.slice(taken, stop - start),
                                           c.lines[start:stop], c.ends[start:stop]))
                    taken += stop - start
                if stop < len(c):
                    out.append(self._malformed(c, stop))
                    next_bad = next(bad, None)
                start = stop + 1
            row += len(c)
        return out

    def _parse_with(self, spark: SparkSession, texts: pa.Array, ddl: str,
                    layout: tuple[str, set[str]] | None = None
                    ) -> tuple[pa.Table, pa.Array | None]:
        """One Spark job: the parsed rows in line order, and for an inferred json schema
        which lines carry top-level fields it lacks (None when none do)."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        lines = _joined_lines(texts)
        spool = self._spool(spark, lines)
        opts = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
        full = f"{ddl}, {CORRUPT} STRING"
        try:
            check_keys = False
            if self.format == "json":
                objects = pc.all(pc.starts_with(texts, "{")).as_py()
                known = [f.name for f in StructType.fromDDL(ddl).fields]
                check_keys = not self._schema_given and (
                    not objects or _may_add_keys(lines, known))
                if spool is not None and objects and not check_keys:
                    # Spark's json reader straight from the file: half the cost of from_json
                    # on a text column. Rows come back in file order (one file's splits stay
                    # in order); a line it reads as other than one row sends us the long way.
                    result = self._run(spark.read.schema(full).options(lineSep="\n", **opts)
                                       .json(spool), ddl)
                    if result.num_rows == len(texts):
                        return result, None
            if spool is not None:  # Spark reads the lines itself: no Python -> JVM transfer
                df: DataFrame = spark.read.option("lineSep", "\n").text(spool) \
                    .select("value", F.monotonically_increasing_id().alias("_i"))
            else:
                df = spark.createDataFrame(pa.table({
                    "value": texts, "_i": pa.array(np.arange(len(texts), dtype=np.int64))}))
            cols = []
            fields = [F.col("p.*")]
            if self.format == "csv":
                opts["sep"] = self.delimiter
                if layout is not None:  # this file's columns, projected by name
                    full = f"{layout[0]}, {CORRUPT} STRING"
                    fields = [F.col(f"p.`{f.name}`") if f.name in layout[1]
                              else F.lit(None).cast(f.dataType).alias(f.name)
                              for f in StructType.fromDDL(ddl).fields]
                    fields.append(F.col(f"p.{CORRUPT}"))
                parsed = F.from_csv(F.col("value"), full, opts)
            else:
                parsed = F.from_json(F.col("value"), full, opts)
                if check_keys:
                    cols.append(F.coalesce(F.exists(F.json_object_keys("value"),
                                                    lambda k: ~k.isin(known)),
                                           F.lit(False)).alias("_x"))
            result = self._run(df.select(parsed.alias("p"), "_i", *cols)
                               .select(*fields, "_i", *(["_x"] if cols else [])), ddl)
        finally:
            if spool is not None:
                with contextlib.suppress(OSError):
                    os.unlink(spool)
        if result.num_rows != len(texts):
            raise DataError(f"Spark returned {result.num_rows} rows for {len(texts)} "
                            f"{self.format} lines of {self.path}")
        result = result.sort_by("_i").drop_columns(["_i"])
        widen = None
        if cols:
            flags = result.column("_x")
            result = result.drop_columns(["_x"])
            if pc.any(flags).as_py():
                widen = flags.combine_chunks()
        return result, widen

    def _run(self, df: DataFrame, ddl: str) -> pa.Table:
        try:
            return df.toArrow()
        except Exception as e:
            raise DataError(f"Spark could not parse {self.format} lines of {self.path} "
                            f"with schema {ddl!r}: {e}") from e

    def _spool(self, spark: SparkSession, lines: pa.Buffer) -> str | None:
        """On a local master, the lines go to a temporary file Spark reads by itself (half
        the cost of sending them as Arrow); other masters may not see this machine's files."""
        if not reads_local_files(spark):
            return None
        fd, path = tempfile.mkstemp(prefix="kctl-lines-", suffix=".txt")
        with os.fdopen(fd, "wb") as fh:
            fh.write(lines)
        return path

    def _widen(self, spark: SparkSession, texts: list[str]) -> str:
        """Append the fields these lines add to the inferred schema; known fields keep
        their types (a line whose value does not fit is malformed, not silently cast)."""
        from pyspark.sql.types import StructType

        current = StructType.fromDDL(self._schema_ddl or "")
        names = {f.name for f in current.fields}
        added = [f for f in self._infer_fields(spark, texts, []) if f.name not in names]
        self._schema_ddl = StructType([*current.fields, *added]).toDDL()
        log.info("Widened the schema for %s with %s: %s", self.path,
                 [f.name for f in added], self._schema_ddl)
        return self._schema_ddl

    def _malformed(self, c: _Chunk, i: int) -> MalformedLine:
        text = c.texts[i].as_py()
        start = c.ends[i] - len(text.encode("utf-8")) - 1
        return MalformedLine(c.state.path, c.lines[i], max(start, 0), text, self.format,
                             c.ends[i], c.state.partition, c.state.fp, c.state.fp_len)

    def _report(self, bad: MalformedLine) -> None:
        """The one place malformed input is handled: the runtime's errant record reporter
        dead-letters it (errors.tolerance=all) or fails the task; without a reporter the
        task fails naming the file and line. Everything before it was already returned."""
        if self.format == "json" and not bad.problem and _is_json(bad.text):
            bad = dataclasses.replace(bad, problem=(
                f"a json line whose types conflict with the schema {self._schema_ddl!r}"))
            if self.conflict == "fail":
                err = DataError(f"Parsing failed (schema.conflict=fail): {bad.describe()}")
                err.malformed = [bad]  # type: ignore[attr-defined]
                raise err
        err = DataError(bad.describe())
        err.malformed = [bad]  # type: ignore[attr-defined]
        get = getattr(self.context, "errant_record_reporter", None)
        reporter = get() if get is not None else None
        if reporter is None:
            raise err
        record = SourceRecord(self.topic, None, None, None, STRING_SCHEMA, bad.text,
                              source_partition=bad.partition or {"filename": bad.filename},
                              source_offset={"position": bad.end, "line": bad.line,
                                             "path": bad.filename, "fp": bad.fp,
                                             "fplen": bad.fplen})
        reporter.report(record, err)

    def _infer(self, spark: SparkSession, chunks: list[_Chunk]) -> str:
        """Infer the schema from the first lines read (and the csv header)."""
        from pyspark.sql.types import StructType

        sample: list[str] = []
        for c in chunks:
            sample.extend(c.texts.slice(0, _INFER_SAMPLE - len(sample)).to_pylist())
            if len(sample) >= _INFER_SAMPLE:
                break
        fields = self._infer_fields(spark, sample, [c.state for c in chunks])
        if not fields:
            bad = self._malformed(chunks[0], 0)
            raise DataError(f"Cannot infer a schema: {bad.describe()}")
        self._schema_ddl = StructType(fields).toDDL()
        log.info("Inferred schema for %s: %s", self.path, self._schema_ddl)
        return self._schema_ddl

    def _infer_fields(self, spark: SparkSession, sample: list[str],
                      states: list[_FileState]) -> list[Any]:
        """Spark's inference over a sample of lines (`states`: the files they come from)."""
        sample = sample[:_INFER_SAMPLE]
        if self.format == "json" and self.conflict != "string":
            sample = _without_conflicts(sample)
        if self.format == "csv" and self.csv_header:
            header = states[0].header or self._header_of(states[0].path, self.encoding)
            if self._csv_header_line is None:
                self._csv_header_line = header
            sample = [header, *sample]
        try:
            rdd = spark.sparkContext.parallelize(sample, 1)
            reader: Any = rdd
        except Exception:  # Spark Connect has no RDDs: infer from the files themselves
            reader = sorted({st.path for st in states})
        if self.format == "csv":
            inferred = spark.read.csv(reader, header=self.csv_header, inferSchema=True,
                                      sep=self.delimiter).schema
        else:
            inferred = spark.read.json(reader).schema
        return [f for f in inferred.fields if f.name != CORRUPT]

    @staticmethod
    def _header_of(path: str, encoding: str = "utf-8") -> str:
        with open(path, "rb") as fh:
            return fh.readline().rstrip(b"\r\n").decode(encoding, errors="replace")

    # parquet

    def _poll_parquet(self) -> list[SourceBatch | MalformedLine]:
        out: list[SourceBatch | MalformedLine] = []
        total = 0
        for st in self._ordered_files():
            if total >= self.batch_max:
                break
            if st.complete:
                continue
            table = self._parquet.get(st.path)
            if table is None:
                table = self._read_parquet(st)
                if table is None:
                    continue
            rows = table.num_rows
            take = min(self.batch_max - total, rows - st.row)
            chunk = table.slice(st.row, take)
            schema = self._connect_schemas.get(chunk.schema)
            if schema is None:
                schema = arrow_schema_to_connect(chunk.schema)
                self._connect_schemas[chunk.schema] = schema
            first = st.row + 1
            st.row += take
            total += take
            out.append(SourceBatch(self.topic, st.partition, schema,
                                   chunk.to_struct_array().combine_chunks(),
                                   {"row": list(range(first, st.row + 1)),
                                    "complete": [r >= rows for r in range(first, st.row + 1)]}))
            if st.row >= rows:
                st.complete = True
                self._parquet.pop(st.path, None)
        return out

    def _read_parquet(self, st: _FileState) -> pa.Table | None:
        if st.retry_at > self._clock():
            return None
        try:
            table = self._spark().read.parquet(st.path).toArrow()
        except Exception as e:
            # a file still being written is not yet readable, a broken one never will be:
            # either way that file's problem, retried with backoff, while others flow
            self._bad_file(st, "reading", e)
            return None
        st.failures = 0
        if table.num_rows == 0 or st.row >= table.num_rows:
            st.complete = True
            return None
        self._parquet[st.path] = table
        return table
