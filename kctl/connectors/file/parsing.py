"""Spark parsing of the lines read: csv and JSON lines into rows, through a spooled file
on a local master; the schema inferred from the first lines and evolved by each later line
(evolution.py: widening, new fields, conflicts)."""

from __future__ import annotations

import collections
import contextlib
import csv
import dataclasses
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kctl.api import DataError, Schema, SourceBatch, SourceTaskContext
from kctl.api.arrow import arrow_schema_to_connect
from kctl.connectors.file._common import reads_local_files
from kctl.connectors.file.reading import Chunk, MalformedLine
from kctl.connectors.file.tracking import FileState

if TYPE_CHECKING:
    from types import ModuleType

    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from kctl.connectors.file.evolution import Conflict, Evolution

log = logging.getLogger("kctl.connectors.file.source")  # the logger the task always had

CORRUPT = "_corrupt_record"


def _evolution() -> ModuleType:
    """evolution.py, which imports pyspark: imported once the task has its session."""
    from kctl.connectors.file import evolution

    return evolution

_INFER_SAMPLE = 1000


def _joined_lines(texts: pa.Array) -> pa.Buffer:
    """The lines as one UTF-8 buffer, each ended by a newline."""
    joined = pc.binary_join_element_wise(texts, "", "\n").cast(pa.binary())
    offsets = joined.buffers()[1]
    first = int.from_bytes(offsets[:4].to_pybytes(), "little", signed=True)
    return joined.buffers()[2][first:first + int(pc.sum(pc.binary_length(joined)).as_py() or 0)]


def _leaves(t: pa.DataType) -> Iterator[pa.DataType]:
    """The types of a type's values, through structs and lists."""
    if pa.types.is_struct(t):
        for f in t:
            yield from _leaves(f.type)
    elif pa.types.is_list(t):
        yield from _leaves(t.value_type)
    else:
        yield t


def _read_alike(t: pa.DataType) -> bool:
    """Whether Arrow's json reader gives a column of this type exactly the values Spark's
    gives (tests/connectors/test_file_source_arrow.py compares the two): booleans, longs,
    doubles, strings, and structs and arrays of them. Anything else (timestamps, decimals,
    ints, floats, maps) goes to Spark."""
    return all(leaf in (pa.bool_(), pa.int64(), pa.float64(), pa.string())
               for leaf in _leaves(t))


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
        kinds = {k: _evolution().json_kind(v) for k, v in obj.items() if v is not None} \
            if isinstance(obj, dict) else {}
        for k, kind in kinds.items():
            votes[k][kind] += 1
        parsed.append((text, kinds))
    winner = {k: c.most_common(1)[0][0] for k, c in votes.items() if len(c) > 1}
    if not winner:
        return sample
    return [t for t, kinds in parsed if all(kinds.get(k, w) == w for k, w in winner.items())]


def _arrow_schemas(spark: SparkSession, state: StructType
                   ) -> tuple[pa.Schema, pa.Schema] | None:
    """The schema Arrow's json reader reads with (fields only ever null as the null type,
    so a first value there is news) and the Arrow schema of the rows Spark's json reader
    returns for the schema records carry (with the corrupt-record column), when Arrow's
    reader gives those types alike; else None."""
    from pyspark.sql.pandas.types import to_arrow_schema

    if spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true":
        return None
    from pyspark.sql.types import StringType, StructField
    from pyspark.sql.types import StructType as Struct

    zone = spark.conf.get("spark.sql.session.timeZone", "UTC")
    target = to_arrow_schema(Struct([*_evolution().emitted(state).fields,
                                     StructField(CORRUPT, StringType(), True)]), timezone=zone)
    if not all(_read_alike(f.type) for f in target):
        return None
    return to_arrow_schema(state, timezone=zone), target


class SparkParsing:
    """Rows out of lines (a mixin of FileSourceTask, which sets these in start)."""

    context: SourceTaskContext
    path: str
    format: str
    csv_header: bool
    delimiter: str
    conflict: str
    encoding: str
    _schema_ddl: str | None
    _schema_type: StructType | None  # the evolving schema, fields only ever null included
    _schema_given: bool
    _csv_header_line: str | None
    _connect_schemas: dict[Any, Schema]
    _versions: dict[StructType, int]  # by the schema records carry
    _arrow_schemas: dict[StructType, tuple[pa.Schema, pa.Schema] | None]
    _ddls: dict[StructType, str]
    _bad_file: Callable[[FileState, str, BaseException], None]  # FileTracking's
    _batch: Callable[[FileState, Schema, pa.Array, list[int], list[int]], SourceBatch]

    def _spark(self) -> SparkSession:
        return self.context.spark()

    def _parse(self, chunks: list[Chunk]) -> list[SourceBatch | MalformedLine]:
        if self.format == "csv" and self.csv_header:
            return self._parse_csv(chunks)
        return self._parse_group(chunks)

    def _parse_csv(self, chunks: list[Chunk]) -> list[SourceBatch | MalformedLine]:
        """csv columns are matched by header name, one Spark job per distinct header: a
        file without some column gives nulls for it, one with new columns widens an
        inferred schema (a given one ignores them), and a header that cannot be matched
        (duplicate or empty names, nothing in common with `schema`) is that file's error."""
        spark = self._spark()  # first: pyspark is imported while the session is built
        from pyspark.sql.types import StructField, StructType

        groups: dict[tuple[str, ...], list[Chunk]] = {}
        for c in chunks:
            st = c.state
            if st.header is None:
                st.header = self._header_of(st.path, self.encoding)
            names = tuple(next(csv.reader([st.header], delimiter=self.delimiter), []))
            problem = self._header_problem(spark, names)
            if problem:  # back to the chunk's start: retried later, with backoff
                err = DataError(f"the csv header {st.header!r} of {st.path} {problem}")
                st.position, st.line = c.start, c.start_line
                st.header = None if c.start == 0 else st.header
                self._bad_file(st, "parsing", err)
                continue
            groups.setdefault(names, []).append(c)
        out: list[SourceBatch | MalformedLine] = []
        for names, group in groups.items():
            current = self._state(spark, group)
            new = [n for n in names if n not in current.names]
            if new and not self._schema_given:
                sample = [t for c in group for t in c.texts.slice(0, _INFER_SAMPLE).to_pylist()]
                inferred = {f.name: f for f in self._infer_fields(
                    spark, sample, [group[0].state])}
                self._schema_type = StructType([*current.fields, *(
                    StructField(n, inferred[n].dataType, True) for n in new if n in inferred)])
                log.info("Widened the csv schema for %s with %s from %s: %s", self.path, new,
                         group[0].state.path, self._ddl(spark, self._schema_type))
            out.extend(self._parse_group(group, names))
        return out

    def _header_problem(self, spark: SparkSession, names: tuple[str, ...]) -> str:
        if not names or any(not n.strip() for n in names):
            return "has an empty column name"
        if len(set(names)) < len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            return f"names columns {dup} more than once"
        if self._schema_given and self._schema_ddl and \
                not set(names) & set(self._state(spark, []).names):
            return f"has no column of the schema {self._schema_ddl!r}"
        return ""

    def _state(self, spark: SparkSession, chunks: list[Chunk]) -> StructType:
        """The schema so far: given, or inferred from these chunks' first lines."""
        if self._schema_type is None:
            if self._schema_ddl is not None:
                from pyspark.sql.types import StructType

                self._schema_type = StructType.fromDDL(self._schema_ddl)
            else:
                self._schema_type = self._infer(spark, chunks)
        return self._schema_type

    def _ddl(self, spark: SparkSession, state: StructType) -> str:
        """Spark's DDL of the schema records carry (see _evolution().emitted)."""
        ddl = self._ddls.get(state)
        if ddl is None:
            ddl = self._ddls[state] = _evolution().emitted(state).toDDL()
        return ddl

    def _parse_group(self, chunks: list[Chunk], names: tuple[str, ...] | None = None
                     ) -> list[SourceBatch | MalformedLine]:
        """These chunks' rows, each line under the schema version it evolved (one Spark
        job, or one Arrow read, per version); `names`: a csv file's header."""
        spark = self._spark()
        state = self._state(spark, chunks)
        texts = pa.concat_arrays([c.texts for c in chunks])
        if self._schema_given:
            return self._parse_run(spark, chunks, state, {}, names)
        if self.format == "json":
            lines = _joined_lines(texts)
            table = self._read_by_arrow(spark, texts, lines, state)
            if table is not None:  # every line fits: the fast way, no Python per line
                return self._rows(chunks, table, state, {})
            wider = _widened_by_arrow(texts, lines, state)
            if wider is not None:  # the batch as a whole widens the schema, no line conflicts
                evo = _evolution().Evolution(((0, wider),), {})
            else:  # line by line: where each change starts, which lines conflict
                evo = _evolution().evolve(
                    state, _evolution().json_line_types(texts.to_pylist(), state),
                    self.conflict)
        else:
            first = self._parse_with(spark, texts, state, names)
            corrupt = first.column(CORRUPT)
            if corrupt.null_count == len(corrupt):
                return self._rows(chunks, first, state, {})
            bad = set(pc.indices_nonzero(pc.is_valid(corrupt)).to_pylist())
            evo = _evolution().evolve(state, _evolution().csv_line_types(
                [t if i in bad else None for i, t in enumerate(texts.to_pylist())],
                names or [f.name for f in state.fields], self.delimiter, state),
                self.conflict)
            if len(evo.versions) == 1:
                return self._rows(chunks, first, state, evo.conflicts)
        return self._parse_versions(spark, chunks, evo, names)

    def _parse_versions(self, spark: SparkSession, chunks: list[Chunk], evo: Evolution,
                        names: tuple[str, ...] | None) -> list[SourceBatch | MalformedLine]:
        out: list[SourceBatch | MalformedLine] = []
        bounds = [start for start, _ in evo.versions[1:]] + [sum(map(len, chunks))]
        for (start, state), stop in zip(evo.versions, bounds, strict=True):
            if stop > start:
                part = _slice(chunks, start, stop)
                conflicts = {i - start: c for i, c in evo.conflicts.items() if start <= i < stop}
                out.extend(self._parse_run(spark, part, state, conflicts, names))
            if state != self._schema_type:
                self._schema_type = state
                log.info("Evolved the schema for %s at line %d of %s: %s", self.path,
                         _slice(chunks, start, start + 1)[0].lines[0],
                         _slice(chunks, start, start + 1)[0].state.path,
                         self._ddl(spark, state))
        return out

    def _parse_run(self, spark: SparkSession, chunks: list[Chunk], state: StructType,
                   conflicts: dict[int, Conflict], names: tuple[str, ...] | None
                   ) -> list[SourceBatch | MalformedLine]:
        texts = pa.concat_arrays([c.texts for c in chunks])
        return self._rows(chunks, self._parse_with(spark, texts, state, names), state,
                          conflicts)

    def _rows(self, chunks: list[Chunk], result: pa.Table, state: StructType,
              conflicts: dict[int, Conflict]) -> list[SourceBatch | MalformedLine]:
        """The parsed rows as batches per chunk, cut at each malformed or conflicting line
        (which comes in its place, for the errant record reporter)."""
        corrupt = result.column(CORRUPT)
        bad_rows = set(conflicts)
        if corrupt.null_count < len(corrupt):
            bad_rows.update(pc.indices_nonzero(pc.is_valid(corrupt)).to_pylist())
        good = result.drop_columns([CORRUPT])
        if bad_rows:
            keep = np.ones(len(result), dtype=bool)
            keep[sorted(bad_rows)] = False
            good = good.filter(pa.array(keep))
        schema = self._connect_schema(good.schema, state)
        values = good.to_struct_array().combine_chunks()
        out: list[SourceBatch | MalformedLine] = []
        bad = iter(sorted(bad_rows))
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
                    out.append(self._malformed(c, stop, conflicts.get(row + stop), state))
                    next_bad = next(bad, None)
                start = stop + 1
            row += len(c)
        return out

    def _connect_schema(self, arrow: pa.Schema, state: StructType) -> Schema:
        """The records' schema, its version counting the schemas this task has emitted
        (1 the first; each evolution the next)."""
        emitted = _evolution().emitted(state)
        version = self._versions.setdefault(emitted, len(self._versions) + 1)
        schema = self._connect_schemas.get((arrow, version))
        if schema is None:
            schema = dataclasses.replace(arrow_schema_to_connect(arrow), version=version)
            self._connect_schemas[(arrow, version)] = schema
        return schema

    def _parse_with(self, spark: SparkSession, texts: pa.Array, state: StructType,
                    names: tuple[str, ...] | None = None) -> pa.Table:
        """One Spark job (or one Arrow read): the parsed rows in line order, with the
        corrupt-record column. `names`: a csv file's own columns, projected by name."""
        from pyspark.sql import functions as F

        lines = _joined_lines(texts)
        ddl = self._ddl(spark, state)
        if self.format == "json":
            read = self._read_by_arrow(spark, texts, lines, state)
            if read is not None:
                return read
        spool = self._spool(spark, lines)
        opts = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
        full = f"{ddl}, {CORRUPT} STRING" if ddl else f"{CORRUPT} STRING"
        try:
            if self.format == "json" and spool is not None and \
                    pc.all(pc.starts_with(texts, "{")).as_py():
                # Spark's json reader straight from the file: half the cost of from_json
                # on a text column. Rows come back in file order (one file's splits stay
                # in order); a line it reads as other than one row sends us the long way.
                result = self._run(spark.read.schema(full).options(lineSep="\n", **opts)
                                   .json(spool), ddl)
                if result.num_rows == len(texts):
                    return result
            if spool is not None:  # Spark reads the lines itself: no Python -> JVM transfer
                df: DataFrame = spark.read.option("lineSep", "\n").text(spool) \
                    .select("value", F.monotonically_increasing_id().alias("_i"))
            else:
                df = spark.createDataFrame(pa.table({
                    "value": texts, "_i": pa.array(np.arange(len(texts), dtype=np.int64))}))
            fields = [F.col("p.*")]
            if self.format == "csv":
                opts["sep"] = self.delimiter
                if names is not None:  # this file's columns, projected by name
                    types = {f.name: f.dataType.simpleString()
                             for f in _evolution().emitted(state).fields}
                    full = ", ".join(f"`{n}` {types.get(n, 'STRING')}" for n in names) + \
                        f", {CORRUPT} STRING"
                    fields = [F.col(f"p.`{f.name}`") if f.name in names
                              else F.lit(None).cast(f.dataType).alias(f.name)
                              for f in _evolution().emitted(state).fields]
                    fields.append(F.col(f"p.{CORRUPT}"))
                parsed = F.from_csv(F.col("value"), full, opts)
            else:
                parsed = F.from_json(F.col("value"), full, opts)
            result = self._run(df.select(parsed.alias("p"), "_i").select(*fields, "_i"), ddl)
        finally:
            if spool is not None:
                with contextlib.suppress(OSError):
                    os.unlink(spool)
        if result.num_rows != len(texts):
            raise DataError(f"Spark returned {result.num_rows} rows for {len(texts)} "
                            f"{self.format} lines of {self.path}")
        return result.sort_by("_i").drop_columns(["_i"])

    def _read_by_arrow(self, spark: SparkSession, texts: pa.Array, lines: pa.Buffer,
                       state: StructType) -> pa.Table | None:
        """The rows Spark's json reader would give, read by Arrow's in this thread, or None.

        Arrow reads only a batch whose every line is an object whose every value fits the
        schema's type (no new field, nested ones too, unless the schema was given, when
        Spark ignores them too; no first value in a field only ever null). Any line it
        cannot read that way makes it give the whole batch back: the schema evolves, or
        Spark finds the malformed and conflicting lines. It saves a Spark job per batch:
        ~0.1 CPU-s per 100k lines against ~0.4 JVM CPU-s for Spark's reader (measured in
        a script on a warm local[2] SparkSession; README, Performance).
        """
        import pyarrow.json as pj

        if state not in self._arrow_schemas:
            self._arrow_schemas[state] = _arrow_schemas(spark, state)
        schemas = self._arrow_schemas[state]
        if schemas is None or len(lines) >= 1 << 30 or not pc.all(
                pc.starts_with(texts, "{")).as_py():
            return None
        probe, target = schemas
        if any(leaf == pa.float64() for f in target for leaf in _leaves(f.type)) and pc.any(
                pc.match_substring_regex(texts, r"-0[^.0-9eE]")).as_py():
            return None  # Spark reads the integer -0 as 0.0 into a double, Arrow as -0.0
        fields = pa.schema([f for f in target if f.name != CORRUPT])
        try:
            table = pj.read_json(
                pa.BufferReader(lines),
                read_options=pj.ReadOptions(use_threads=False,
                                            block_size=max(len(lines) + 1, 1 << 20)),
                parse_options=pj.ParseOptions(
                    explicit_schema=probe,
                    unexpected_field_behavior="ignore" if self._schema_given else "error"))
            if not table.schema.equals(fields):
                table = table.select(fields.names).cast(fields)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None
        if table.num_rows != len(texts) or not table.schema.equals(fields):
            return None  # e.g. two objects on one line, which Spark calls malformed
        return table.append_column(target.field(CORRUPT), pa.nulls(len(texts), pa.string()))

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

    def _malformed(self, c: Chunk, i: int, conflict: Conflict | None = None,
                   state: StructType | None = None) -> MalformedLine:
        text = c.texts[i].as_py()
        start = c.ends[i] - len(text.encode("utf-8")) - 1
        if conflict is None and self.format == "json" and state is not None:
            conflict = _conflict_of(state, text, self._schema_given)
        return MalformedLine(c.state.path, c.lines[i], max(start, 0), text, self.format,
                             c.ends[i], c.state.partition, c.state.fp, c.state.fp_len,
                             conflict=_describe(conflict))

    def _infer(self, spark: SparkSession, chunks: list[Chunk]) -> StructType:
        """Infer the schema from the first lines read (and the csv header): for json the
        join of their types (a field's minority kind left out: those lines conflict)."""
        from pyspark.sql.types import StructType

        sample: list[str] = []
        for c in chunks:
            sample.extend(c.texts.slice(0, _INFER_SAMPLE - len(sample)).to_pylist())
            if len(sample) >= _INFER_SAMPLE:
                break
        if self.format == "json":
            types = list(_evolution().json_line_types(_without_conflicts(sample)))
            state = _evolution().evolve(None, types).last
            # lines whose fields were all null so far carry an empty struct until a value
            # comes; no object at all (the first lines malformed) is nothing to infer from
            objects = any(isinstance(t, StructType) for _, t in types)
        else:
            state = StructType(self._infer_fields(spark, sample, [c.state for c in chunks]))
            objects = bool(state.fields)
        if not objects:
            bad = self._malformed(chunks[0], 0)
            raise DataError(f"Cannot infer a schema: {bad.describe()}")
        log.info("Inferred schema for %s: %s", self.path, self._ddl(spark, state))
        return state

    def _infer_fields(self, spark: SparkSession, sample: list[str],
                      states: list[FileState]) -> list[Any]:
        """Spark's csv inference over a sample of lines (`states`: the files they come from)."""
        sample = sample[:_INFER_SAMPLE]
        if self.csv_header:
            header = states[0].header or self._header_of(states[0].path, self.encoding)
            if self._csv_header_line is None:
                self._csv_header_line = header
            sample = [header, *sample]
        try:
            rdd = spark.sparkContext.parallelize(sample, 1)
            reader: Any = rdd
        except Exception:  # Spark Connect has no RDDs: infer from the files themselves
            reader = sorted({st.path for st in states})
        inferred = spark.read.csv(reader, header=self.csv_header, inferSchema=True,
                                  sep=self.delimiter).schema
        return [f for f in inferred.fields if f.name != CORRUPT]

    @staticmethod
    def _header_of(path: str, encoding: str = "utf-8") -> str:
        with open(path, "rb") as fh:
            return fh.readline().rstrip(b"\r\n").decode(encoding, errors="replace")


def _widened_by_arrow(texts: pa.Array, lines: pa.Buffer, state: StructType
                      ) -> StructType | None:
    """The schema widened by the types Arrow's json reader infers for the whole batch, when
    it reads every line as an object and nothing conflicts (one C++ pass instead of a
    json.loads per line); None otherwise, or when nothing would change. Integers beyond a
    long (Spark makes them decimals, Arrow doubles) are left to the line-by-line pass."""
    import pyarrow.json as pj

    evolution = _evolution()
    if len(lines) >= 1 << 30 or pc.any(pc.match_substring_regex(texts, "[0-9]{19}")).as_py():
        return None
    try:
        table = pj.read_json(pa.BufferReader(lines), read_options=pj.ReadOptions(
            use_threads=False, block_size=max(len(lines) + 1, 1 << 20)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    t = evolution.arrow_type(pa.struct(list(table.schema)))
    if table.num_rows != len(texts) or t is None:
        return None
    try:
        wider = evolution.widen(state, t)
    except evolution.Conflict:
        return None
    return None if wider == state else wider  # type: ignore[return-value]


def _slice(chunks: list[Chunk], start: int, stop: int) -> list[Chunk]:
    """The lines [start, stop) of these chunks taken together, as chunks."""
    out: list[Chunk] = []
    row = 0
    for c in chunks:
        a, b = max(start - row, 0), min(stop - row, len(c))
        if a < b:
            out.append(Chunk(c.state, c.texts.slice(a, b - a), c.lines[a:b], c.ends[a:b],
                             None, c.start, c.start_line))
        row += len(c)
    return out


def _conflict_of(state: StructType, text: str, given: bool) -> Conflict | None:
    """Why Spark could not read a line into the schema, when json reads it: the field
    and both types (None for a line json cannot read either, which is malformed)."""
    types = list(_evolution().json_line_types([text], state))
    if not types:
        return None
    evo = _evolution().evolve(state, types, fixed=given)
    return evo.conflicts.get(0) or _evolution().Conflict(
        "", "struct", f"a line Spark cannot read into {_evolution().emitted(state).simpleString()}")


def _describe(conflict: Conflict | None) -> str:
    if conflict is None:
        return ""
    if not conflict.path and conflict.got.startswith("a line"):
        return conflict.got
    return str(conflict)
