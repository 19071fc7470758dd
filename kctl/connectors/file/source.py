"""FileSource: lines (text, csv, JSON lines) and Parquet files become records.

Spark cannot start reading a file at a byte offset, so the task reads each file's new
complete lines itself (seeking to its stored position), hands them to Spark as Arrow
to parse, and takes the result back as Arrow: a restart resumes at the exact line, and
appended lines are read without re-reading the file. Parquet files are read whole.
"""

from __future__ import annotations

import codecs
import collections
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

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
)
from kctl.api.arrow import arrow_schema_to_connect
from kctl.api.data import STRING_SCHEMA
from kctl.api.paths import allowed_roots
from kctl.connectors.file._common import (
    CONFLICT_MODES,
    SingleChar,
    SparkDdl,
    TextEncoding,
    decode_delimiter,
    list_files,
)
from kctl.connectors.file.parsing import SparkParsing
from kctl.connectors.file.reading import Chunk, LineReading, MalformedLine
from kctl.connectors.file.tracking import FileState, FileStats, FileTracking, excluded, patterns

log = logging.getLogger(__name__)

QUICK_CHECK_S = 0.05  # an idle task's look at its directories and open files (a few stats)

FORMATS = ("text", "csv", "json", "parquet")

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
            "How often `path` is listed for new, renamed and deleted files. Between listings "
            "an idle task looks at the directory and its open files every 50 ms and reads "
            "what changed at once.", group="File")
    .define("batch.max.rows", ConfigType.INT, 100_000, Range.at_least(1), Importance.MEDIUM,
            "Most rows per poll, i.e. per Spark job: a job costs 0.1-0.2 s of JVM time "
            "however small, so batch big.", group="File")
    .define("batch.max.bytes", ConfigType.INT, 16 << 20, Range.at_least(1), Importance.LOW,
            "Most bytes of lines per poll (at least one line), so long lines do not make "
            "batch.max.rows a memory problem.", group="File")
    .define("schema", ConfigType.STRING, "", SparkDdl(), Importance.MEDIUM,
            "Spark DDL schema for csv/json (e.g. `id BIGINT, name STRING`), kept as given; "
            "empty: inferred from the first lines read and evolved by every later line (new "
            "fields, nested ones too, and wider types: see schema.conflict), so nothing is "
            "dropped or cast away. Records keep the schema version they were read with; a "
            "poll's batch whose lines only widen the schema takes the wider one from its "
            "first line, one with conflicting lines changes it at the line that widens it. "
            "A field that was only ever null joins the schema with its first value.",
            group="File")
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
    .define("schema.conflict", ConfigType.STRING, "error",
            ValidString.in_(*CONFLICT_MODES), Importance.MEDIUM,
            "csv and json with an inferred schema, when a field's value cannot widen its "
            "type (a number against a string, an object against a scalar): `error` makes "
            "that line its record's error under errors.tolerance (the DLQ under all, naming "
            "the field and both types; none fails the task naming the field); `string` "
            "makes the field a string from then on, holding each value's JSON text. Values "
            "that widen never conflict (int -> long -> double, a decimal's precision, new "
            "and nested fields): each change is a new version of the value schema.",
            group="File")
    .define("csv.header", ConfigType.BOOLEAN, True, None, Importance.LOW,
            "The first line of each csv file is a header (names the columns, not a record).",
            group="CSV")
    .define("csv.delimiter", ConfigType.STRING, ",", SingleChar(), Importance.LOW,
            "Field separator of csv files (\\t for tab).", group="CSV")
)



# --- connector ----------------------------------------------------------------------------


class FileSourceConnector(SourceConnector):
    """Splits the matching files over tasks by a hash of their names, and watches for more."""

    def __init__(self) -> None:
        self._props: dict[str, str] = {}
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._task_count = 0
        self._max_tasks: int | None = None
        self._skipped: set[str] = set()

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
        self._exclude = patterns(parsed["file.exclude"])
        self._interval = max(parsed["poll.interval.ms"], 200) / 1000
        self._stop.clear()

    def _wanted(self, max_tasks: int) -> int:
        files = [f for f in list_files(self._path, self._roots, self._skipped)
                 if not excluded(f, self._exclude)]
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


class FileSourceTask(FileTracking, LineReading, SparkParsing, SourceTask):
    """Reads the files of its hash slice; one Spark job per poll parses up to batch.max.rows."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._stop = threading.Event()
        self._files: dict[tuple[int, int], FileState] = {}
        self._gz: dict[tuple[int, int], bytes] = {}
        self._bad_chunks: list[Chunk] = []
        self._copying: dict[tuple[int, int], int] = {}  # name-derived new files, by size
        self._stats = FileStats()
        self._file_errors: collections.deque[tuple[SourceRecord, DataError]] = \
            collections.deque()
        self._next_scan = 0.0
        self._skipped: set[str] = set()
        self._round = 0
        self._schema_ddl: str | None = None
        self._schema_given = False
        self._csv_header_line: str | None = None
        self._connect_schemas: dict[Any, Schema] = {}
        self._schema_type: Any = None
        self._arrow_schemas: dict[Any, tuple[pa.Schema, pa.Schema] | None] = {}
        self._ddls: dict[Any, str] = {}
        self._versions: dict[Any, int] = {}
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
        self.exclude = patterns(c["file.exclude"])
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

    def _reporter(self) -> Any:
        get = getattr(self.context, "errant_record_reporter", None)
        return get() if get is not None else None

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
                self._wait_idle()
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

    def _wait_idle(self) -> None:
        """Until the next scan, or sooner when a watched directory or an open file
        changes (then the next poll scans at once). Steps are counted up front, not read
        off the clock, so an injected clock that stands still cannot hold the task."""
        wait = max(0.0, min(self.interval, self._next_scan - self._clock()))
        steps = max(1, math.ceil(wait / QUICK_CHECK_S))
        before = self._changes()
        for _ in range(steps):
            if self._stop.wait(wait / steps):
                return
            if self._changes() != before:
                self._next_scan = self._clock()
                return

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix=f"file-source-{self.index}")
        return self._pool

    def _next_batch(self) -> list[SourceBatch | MalformedLine]:
        if self._clock() >= self._next_scan:
            self._scan()
        return self._poll_parquet() if self.format == "parquet" else self._poll_lines()

    def _poll_lines(self) -> list[SourceBatch | MalformedLine]:
        out = self._poll_chunks()
        bad = [c.bad for c in self._bad_chunks if c.bad is not None]
        self._bad_chunks = []
        return out + bad  # (each bad line is its file's only line in this poll)

    def _poll_chunks(self) -> list[SourceBatch | MalformedLine]:
        chunks: list[Chunk] = []
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

    def _batch(self, st: FileState, schema: Schema, values: pa.Array, lines: list[int],
               ends: list[int]) -> SourceBatch:
        n = len(lines)
        return SourceBatch(self.topic, st.partition, schema, values,
                           {"position": ends, "line": lines, "path": [st.path] * n,
                            "fp": [st.fp] * n, "fplen": [st.fp_len] * n})

    # malformed lines

    def _report(self, bad: MalformedLine) -> None:
        """The one place a line that gives no record is handled (malformed, undecodable,
        or conflicting with the schema, which its message names with the field): the
        runtime's errant record reporter dead-letters it (errors.tolerance=all) or fails
        the task; without a reporter the task fails naming the file and line. Everything
        before it was already returned."""
        err = DataError(bad.describe())
        err.malformed = [bad]  # type: ignore[attr-defined]
        reporter = self._reporter()
        if reporter is None:
            raise err
        record = SourceRecord(self.topic, None, None, None, STRING_SCHEMA, bad.text,
                              source_partition=bad.partition or {"filename": bad.filename},
                              source_offset={"position": bad.end, "line": bad.line,
                                             "path": bad.filename, "fp": bad.fp,
                                             "fplen": bad.fplen})
        reporter.report(record, err)

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

    def _read_parquet(self, st: FileState) -> pa.Table | None:
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
