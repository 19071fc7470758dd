"""FileSink writes values exactly (issue 23). Decimals (finding 1): every precision and
scale Spark holds (38 digits) goes into parquet, json and csv with every digit; wider ones
(PostgreSQL's numeric(p > 38)) as their exact text; and a value wider than its declared type
is that record's error for the DLQ instead of the failure of its file ("Decimal type with
precision 29 does not fit into precision inferred from first array element: 38").

The other types, per format, as FileSink promises them:
- timestamps keep their instant to the microsecond, years 1 to 9999, from any zone: parquet
  as TIMESTAMP_MICROS (UTC), json and csv as `yyyy-MM-ddTHH:mm:ss.ffffffZ`;
- Connect Times as their text `HH:MM:SS.ffffff` in every format (Spark's TIME type is off);
- doubles bit for bit, -0.0 with its sign: NaN and +-Infinity as themselves in parquet and
  csv, and in json, which has no such numbers, as the strings "NaN", "Infinity" and
  "-Infinity" (as Kafka Connect's JsonConverter writes them, and Spark reads them back);
- text exactly, quotes, separators, spaces and newlines included (csv as RFC 4180 quotes);
  a string that is no unicode text (a lone surrogate) is its record's error;
- bytes exactly: parquet as binary, json and csv as base64.
"""

from __future__ import annotations

import base64
import csv
import datetime as dt
import decimal
import io
import json
import math
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from file_support import SinkContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kctl.api import SchemaBuilder, SinkBatch, SinkRecord, Struct, TopicPartition
from kctl.api.arrow import PRECISION_PARAM, connect_to_arrow_type
from kctl.api.data import INT64_SCHEMA, Schema, Type, decimal_schema, time_schema, timestamp_schema
from kctl.connectors.file import FileSinkTask
from kctl.connectors.file.sink import committed_files

pytestmark = pytest.mark.spark

PROPS = settings(max_examples=10, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.function_scoped_fixture,
                                        HealthCheck.too_slow, HealthCheck.data_too_large])


class Reporter:
    def __init__(self) -> None:
        self.reported: list[tuple[SinkRecord, BaseException]] = []

    def report(self, record: SinkRecord, error: BaseException) -> None:
        self.reported.append((record, error))


class Context(SinkContext):
    def __init__(self, engine: Any, configs: dict[str, str], reporter: Reporter) -> None:
        super().__init__(engine, configs)
        self.reporter = reporter

    def errant_record_reporter(self) -> Reporter:
        return self.reporter


def decimal_type(precision: int, scale: int) -> Schema:
    base = decimal_schema(scale, True)
    return Schema(base.type, optional=True, name=base.name, version=base.version,
                  parameters={"scale": str(scale), PRECISION_PARAM: str(precision)})


def value_of(unscaled: int, scale: int) -> decimal.Decimal:
    return decimal.Decimal((1 if unscaled < 0 else 0, tuple(map(int, str(abs(unscaled)))),
                            -scale))


def write(engine: Any, root: Path, fmt: str, schema: Schema, values: list[Any],
          reporter: Reporter) -> list[Any]:
    """The values written as one file, read back as Decimals (None: the row's n was null)."""
    tp = TopicPartition("nums", 0)
    props = {"topics": "nums", "path": str(root), "format": fmt}
    task = FileSinkTask()
    task.initialize(Context(engine, props, reporter))
    task.start(props)
    task.open([tp])
    task.put([SinkRecord("nums", 0, None, None, schema, Struct(schema, {"id": i, "n": v}),
                         kafka_offset=i) for i, v in enumerate(values)])
    task.flush({})
    task.stop()
    out: list[Any] = []
    for _, _, path in committed_files(str(root), tp):
        if fmt == "parquet":
            out += pq.read_table(path).column("n").to_pylist()
        elif fmt == "json":
            out += [json.loads(line, parse_float=decimal.Decimal).get("n")
                    for line in Path(path).read_text().splitlines()]
        else:
            with open(path) as fh:
                out += [r["n"] or None for r in csv.DictReader(fh)]
    return [None if v is None else decimal.Decimal(str(v)) for v in out]


@pytest.mark.parametrize("fmt", ["parquet", "json", "csv"])
def test_decimals_of_every_precision_are_written_with_every_digit(engine, tmp_path_factory, fmt):
    @PROPS
    @given(st.integers(1, 60).flatmap(lambda p: st.tuples(
        st.just(p), st.integers(0, p),
        st.lists(st.integers(-(10 ** p) + 1, 10 ** p - 1) | st.sampled_from(
            [10 ** p - 1, -(10 ** p) + 1]), min_size=1, max_size=6))))
    def check(case: tuple[int, int, list[int]]) -> None:
        precision, scale, unscaled = case
        schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
                  .field("n", decimal_type(precision, scale)).build())
        values = [value_of(u, scale) for u in unscaled]
        reporter = Reporter()
        got = write(engine, tmp_path_factory.mktemp(fmt), fmt, schema, values, reporter)
        assert got == values
        assert reporter.reported == []

    check()


def test_finding_1_a_decimal_wider_than_its_type_is_the_records_error(engine, tmp_path):
    schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
              .field("n", decimal_type(38, 10)).build())
    values = [decimal.Decimal("1234567890123456789012345678.0123456789"),
              decimal.Decimal("-99999999999999999999999999999.9999999999"),  # 39 digits
              decimal.Decimal("-9999999999999999999999999999.9999999999")]
    reporter = Reporter()
    got = write(engine, tmp_path, "parquet", schema, values, reporter)
    assert got == [values[0], values[2]]
    assert [r.kafka_offset for r, _ in reporter.reported] == [1]
    assert "does not fit decimal128(38, 10)" in str(reporter.reported[0][1])


# --- the other types ------------------------------------------------------------------------

FORMATS = ["parquet", "json", "csv"]
FIRST = dt.datetime(1, 1, 1)
LAST = dt.datetime(9999, 12, 31, 23, 59, 59, 999999)


def written(engine: Any, root: Path, fmt: str, field: Schema, values: list[Any],
            reporter: Reporter) -> list[Any]:
    """Field `n` of each row FileSink wrote for `values`, as the format's reader gives it
    (csv: text, '' for null; json: None where Spark left a null field out)."""
    tp = TopicPartition("vals", 0)
    schema = SchemaBuilder.struct().field("id", INT64_SCHEMA).field("n", field).build()
    props = {"topics": "vals", "path": str(root), "format": fmt}
    task = FileSinkTask()
    task.initialize(Context(engine, props, reporter))
    task.start(props)
    task.open([tp])
    task.put([SinkRecord("vals", 0, None, None, schema, Struct(schema, {"id": i, "n": v}),
                         kafka_offset=i) for i, v in enumerate(values)])
    task.flush({})
    task.stop()
    out: list[Any] = []
    for _, _, path in committed_files(str(root), tp):
        text = Path(path).read_bytes()
        if fmt == "parquet":
            out += pq.read_table(path).column("n").to_pylist()
        elif fmt == "json":  # one record a line: "\n" (never \u2028 and kin) ends a line
            out += [json.loads(line).get("n") for line in text.decode().split("\n") if line]
        else:
            out += [r["n"] for r in csv.DictReader(io.StringIO(text.decode(), newline=""))]
    return out


def optional(t: Type) -> Schema:
    return Schema(t, optional=True)


def in_some_zone(utc: dt.datetime, minutes: int) -> dt.datetime:
    """The instant `utc` as seen from UTC+`minutes`, where that is still a datetime."""
    try:
        return utc.astimezone(dt.timezone(dt.timedelta(minutes=minutes)))
    except OverflowError:  # past year 1 or 9999 in that zone
        return utc


@pytest.mark.parametrize("fmt", FORMATS)
def test_timestamps_keep_their_instant_to_the_microsecond_from_year_1_to_9999(
        engine, tmp_path_factory, fmt):
    @PROPS
    @given(st.lists(st.tuples(
        st.datetimes(FIRST, LAST) | st.sampled_from([FIRST, LAST]),
        st.integers(-14 * 60 + 1, 14 * 60 - 1)), min_size=1, max_size=6))
    def check(cases: list[tuple[dt.datetime, int]]) -> None:
        instants = [naive.replace(tzinfo=dt.UTC) for naive, _ in cases]
        values = [in_some_zone(utc, m) for utc, (_, m) in zip(instants, cases, strict=True)]
        reporter = Reporter()
        got = written(engine, tmp_path_factory.mktemp(fmt), fmt, timestamp_schema(True),
                      values, reporter)
        if fmt == "parquet":
            assert got == instants
            assert all(g.utcoffset() == dt.timedelta(0) for g in got)
        else:
            assert got == [f"{u.year:04}" + u.strftime("-%m-%dT%H:%M:%S.%fZ")
                           for u in instants]
        assert reporter.reported == []

    check()


@pytest.mark.parametrize("fmt", FORMATS)
def test_connect_times_are_written_as_their_text_to_the_microsecond(engine, tmp_path_factory,
                                                                     fmt):
    @PROPS
    @given(st.lists(st.times() | st.sampled_from([dt.time(0), dt.time(23, 59, 59, 999999)]),
                    min_size=1, max_size=6))
    def check(values: list[dt.time]) -> None:
        reporter = Reporter()
        got = written(engine, tmp_path_factory.mktemp(fmt), fmt, time_schema(True), values,
                      reporter)
        assert got == [t.strftime("%H:%M:%S.%f") for t in values]
        assert reporter.reported == []

    check()


def bits(x: float) -> bytes:
    return struct.pack(">d", x)


JSON_NON_NUMBERS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


@pytest.mark.parametrize("fmt", FORMATS)
def test_doubles_are_written_bit_for_bit_and_json_names_what_it_cannot_hold(
        engine, tmp_path_factory, fmt):
    @PROPS
    @given(st.lists(st.floats() | st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 0.0,
                                                   5e-324, -1.7976931348623157e308]),
                    min_size=1, max_size=8))
    def check(values: list[float]) -> None:
        reporter = Reporter()
        got = written(engine, tmp_path_factory.mktemp(fmt), fmt, optional(Type.FLOAT64),
                      values, reporter)
        if fmt == "json":
            assert [type(g) is str for g in got] == [not math.isfinite(v) for v in values]
            got = [JSON_NON_NUMBERS[g] if isinstance(g, str) else g for g in got]
        elif fmt == "csv":
            got = [float(g) for g in got]
        assert [math.isnan(g) for g in got] == [math.isnan(v) for v in values]
        assert [bits(g) for g in got if not math.isnan(g)] == \
            [bits(v) for v in values if not math.isnan(v)]  # -0.0 keeps its sign
        assert reporter.reported == []

    check()


NASTY_TEXT = ['a,"b"\nc\r\n', " padded ", "\x00", "\r", '"', "\\", '\\"', "#comment",
              "", "\t", "\u2028", "null", "日本語", "\U0001f600", ";", "|"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_text_is_written_exactly_quotes_separators_and_newlines_included(
        engine, tmp_path_factory, fmt):
    @PROPS
    @given(st.lists(st.text(st.characters(exclude_categories=["Cs"])) |
                    st.sampled_from(NASTY_TEXT), min_size=1, max_size=8))
    def check(values: list[str]) -> None:
        reporter = Reporter()
        got = written(engine, tmp_path_factory.mktemp(fmt), fmt, optional(Type.STRING),
                      values, reporter)
        assert got == values
        assert reporter.reported == []

    check()


@pytest.mark.parametrize("fmt", FORMATS)
def test_bytes_are_written_exactly(engine, tmp_path_factory, fmt):
    @PROPS
    @given(st.lists(st.binary(max_size=40) | st.sampled_from([b"", b"\x00", b"\n", b",\""]),
                    min_size=1, max_size=8))
    def check(values: list[bytes]) -> None:
        reporter = Reporter()
        got = written(engine, tmp_path_factory.mktemp(fmt), fmt, optional(Type.BYTES), values,
                      reporter)
        if fmt != "parquet":
            got = [base64.b64decode(g, validate=True) for g in got]
        assert got == values
        assert reporter.reported == []

    check()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_string_with_a_lone_surrogate_is_its_records_error_not_its_files(engine, tmp_path,
                                                                           fmt):
    """JSON may escape one ("\\ud800") and Python's json decodes it, but no file holds it."""
    reporter = Reporter()
    got = written(engine, tmp_path, fmt, optional(Type.STRING), ["before", "\ud800", "after"],
                  reporter)
    assert got == ["before", "after"]
    assert [r.kafka_offset for r, _ in reporter.reported] == [1]
    assert "'n'" in str(reporter.reported[0][1])


EVERY_KIND = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
              .field("at", timestamp_schema(True)).field("t", time_schema(True))
              .field("x", optional(Type.FLOAT64)).field("s", optional(Type.STRING))
              .field("b", optional(Type.BYTES)).build())


def file_of(engine: Any, root: Path, fmt: str, rows: list[dict[str, Any]],
            as_columns: bool) -> str:
    """What FileSink writes for `rows`, put as records or as one column (the worker's way
    when its converter decodes a batch into one): the rows parquet holds, else the text."""
    tp = TopicPartition("kinds", 0)
    props = {"topics": "kinds", "path": str(root), "format": fmt}
    task = FileSinkTask()
    task.initialize(Context(engine, props, Reporter()))
    task.start(props)
    task.open([tp])
    n = len(rows)
    if as_columns:
        task.put_batch(SinkBatch("kinds", 0, list(range(n)), [0] * n, [()] * n, EVERY_KIND,
                                 pa.array(rows, connect_to_arrow_type(EVERY_KIND))))
    else:
        task.put([SinkRecord("kinds", 0, None, None, EVERY_KIND, Struct(EVERY_KIND, r),
                             kafka_offset=i) for i, r in enumerate(rows)])
    task.flush({})
    task.stop()
    [(_, _, path)] = committed_files(str(root), tp)
    if fmt == "parquet":  # repr: NaN equals NaN, -0.0 is not 0.0
        return repr(pq.read_table(path).to_pylist())
    return Path(path).read_bytes().decode()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_batch_put_as_one_column_is_written_as_its_records_are(engine, tmp_path_factory,
                                                                 fmt):
    """The worker hands FileSink a decoded batch as one Arrow column (put_batch): the file
    is the one the records would have made, value for value."""
    @PROPS
    @given(st.lists(st.fixed_dictionaries({
        "at": st.none() | st.datetimes(FIRST, LAST).map(lambda d: d.replace(tzinfo=dt.UTC)),
        "t": st.none() | st.times(),
        "x": st.none() | st.floats() | st.sampled_from([math.nan, -0.0, math.inf]),
        "s": st.none() | st.text(st.characters(exclude_categories=["Cs"])) |
        st.sampled_from(NASTY_TEXT),
        "b": st.none() | st.binary(max_size=20)}), min_size=1, max_size=6))
    def check(rows: list[dict[str, Any]]) -> None:
        rows = [{"id": i, **r} for i, r in enumerate(rows)]
        assert file_of(engine, tmp_path_factory.mktemp(fmt), fmt, rows, True) == \
            file_of(engine, tmp_path_factory.mktemp(fmt), fmt, rows, False)

    check()
