"""Spark parsing of the lines read: csv and JSON lines into rows, through a spooled file
on a local master; schema inference, widening (new json fields, new csv columns) and json
type conflicts."""

from __future__ import annotations

import collections
import contextlib
import csv
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
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("kctl.connectors.file.source")  # the logger the task always had

CORRUPT = "_corrupt_record"
_INFER_SAMPLE = 1000


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


def _spark_arrow_schema(spark: SparkSession, ddl: str) -> pa.Schema | None:
    """The Arrow schema of the rows Spark's json reader returns for `ddl` (with the
    corrupt-record column), when Arrow's reader gives those types alike; else None."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    if spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true":
        return None
    schema = to_arrow_schema(StructType.fromDDL(f"{ddl}, {CORRUPT} STRING"),
                             timezone=spark.conf.get("spark.sql.session.timeZone", "UTC"))
    return schema if all(_read_alike(f.type) for f in schema) else None


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
    _schema_given: bool
    _csv_header_line: str | None
    _connect_schemas: dict[pa.Schema, Schema]
    _arrow_schemas: dict[str, pa.Schema | None]  # by DDL: Spark's rows' Arrow schema, if alike
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
        from pyspark.sql.types import StructType

        groups: dict[tuple[str, ...], list[Chunk]] = {}
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

    def _parse_group(self, chunks: list[Chunk], layout: tuple[str, set[str]] | None = None
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
        if self.format == "json":
            read = self._read_by_arrow(spark, texts, lines, ddl)
            if read is not None:
                return read, None
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

    def _read_by_arrow(self, spark: SparkSession, texts: pa.Array, lines: pa.Buffer,
                       ddl: str) -> pa.Table | None:
        """The rows Spark's json reader would give, read by Arrow's in this thread, or None.

        Spark infers and widens the schema and reads anything unusual; Arrow reads only a
        batch whose every line is an object whose every value fits the schema's type (no
        new top-level field unless the schema was given, when Spark ignores them too). Any
        line it cannot read that way makes it give the whole batch back to Spark, which
        then finds the malformed and conflicting lines. It saves a Spark job per batch:
        ~0.1 CPU-s per 100k lines against ~0.4 JVM CPU-s for Spark's reader (measured in
        a script on a warm local[2] SparkSession; README, Performance).
        """
        import pyarrow.json as pj

        if ddl not in self._arrow_schemas:
            self._arrow_schemas[ddl] = _spark_arrow_schema(spark, ddl)
        schema = self._arrow_schemas[ddl]
        if schema is None or len(lines) >= 1 << 30 or not pc.all(
                pc.starts_with(texts, "{")).as_py():
            return None
        if any(leaf == pa.float64() for f in schema for leaf in _leaves(f.type)) and pc.any(
                pc.match_substring_regex(texts, r"-0[^.0-9eE]")).as_py():
            return None  # Spark reads the integer -0 as 0.0 into a double, Arrow as -0.0
        fields = pa.schema([f for f in schema if f.name != CORRUPT])
        try:
            table = pj.read_json(
                pa.BufferReader(lines),
                read_options=pj.ReadOptions(use_threads=False,
                                            block_size=max(len(lines) + 1, 1 << 20)),
                parse_options=pj.ParseOptions(
                    explicit_schema=fields,
                    unexpected_field_behavior="ignore" if self._schema_given else "error"))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None
        if table.num_rows != len(texts) or not table.schema.equals(fields):
            return None  # e.g. two objects on one line, which Spark calls malformed
        return table.append_column(schema.field(CORRUPT), pa.nulls(len(texts), pa.string()))

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

    def _malformed(self, c: Chunk, i: int) -> MalformedLine:
        text = c.texts[i].as_py()
        start = c.ends[i] - len(text.encode("utf-8")) - 1
        return MalformedLine(c.state.path, c.lines[i], max(start, 0), text, self.format,
                             c.ends[i], c.state.partition, c.state.fp, c.state.fp_len)

    def _infer(self, spark: SparkSession, chunks: list[Chunk]) -> str:
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
                      states: list[FileState]) -> list[Any]:
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
