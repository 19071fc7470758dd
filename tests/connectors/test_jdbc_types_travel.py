"""Numerics and times keep their type from a source column to a sink column.

A value travels as JdbcSource gives it (a VariableScaleDecimal for an unconstrained
`numeric`, Connect's Timestamp and Time with the `kctl.temporal` parameter naming the
source column's kind, timestamp.granularity's int64/string forms with
`kctl.temporal.encoding`), through JsonConverter (encoded by one converter, decoded by
another along both of the worker's paths: one column, or record by record) into JdbcSink,
whose auto.create makes NUMERIC, TIMESTAMP, TIMESTAMPTZ, DATETIME(6) and TIME columns
instead of TEXT, and whose rows hold every digit and every microsecond.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_jdbc_converter_exact_values import PATHS, converter, deliver
from test_jdbc_exact_values import aware, read
from test_jdbc_sink import Reporter, start_task

from kctl.api import SchemaBuilder, Struct
from kctl.api.data import (
    INT64_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    TEMPORAL_ENCODING_PARAM,
    TEMPORAL_PARAM,
    Schema,
    Type,
    time_schema,
    timestamp_schema,
    variable_scale_decimal_schema,
)
from kctl.connectors.jdbc._common import dialect_for

pytestmark = pytest.mark.spark

PROPS = settings(max_examples=8, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.function_scoped_fixture,
                                        HealthCheck.too_slow, HealthCheck.data_too_large])
EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
VSD = variable_scale_decimal_schema(optional=True)


def vsd(d: decimal.Decimal) -> Struct:
    """A decimal as VariableScaleDecimal's struct (the scale its text has)."""
    exponent = d.as_tuple().exponent
    assert isinstance(exponent, int)
    scale = max(0, -exponent)
    unscaled = int(d.scaleb(scale, EXACT))
    raw = unscaled.to_bytes(max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1), "big",
                            signed=True)
    return Struct(VSD, {"scale": scale, "value": raw})


def with_params(schema: Schema, **params: str) -> Schema:
    return Schema(schema.type, optional=True, name=schema.name, version=schema.version,
                  parameters={**(schema.parameters or {}), **params})


def is_maria(db: Any) -> bool:
    return dialect_for(db.url).name == "mariadb"


def column_types(db: Any, table: str) -> dict[str, str]:
    rows = db.query("SELECT column_name, data_type FROM information_schema.columns WHERE "
                    "table_name = %s", (table,))
    return {name: str(kind).lower() for name, kind in rows}


def decimals(max_whole: int, max_scale: int) -> st.SearchStrategy[decimal.Decimal]:
    """Decimals of any scale up to `max_scale` (each keeps its own) and up to `max_whole`
    digits before the point."""
    def build(scale: int) -> st.SearchStrategy[decimal.Decimal]:
        edge = 10 ** max_whole - 1
        whole = st.integers(-edge, edge) | st.sampled_from([edge, -edge, 0])
        frac = st.integers(0, 10 ** scale - 1) if scale else st.just(0)
        return st.tuples(whole, frac, st.booleans()).map(
            lambda t, s=scale: decimal.Decimal(
                f"{'-' if t[2] and t[0] <= 0 else ''}{abs(t[0])}" +
                (f".{t[1]:0{s}d}" if s else "")))
    return st.integers(0, max_scale).flatmap(build)


@pytest.fixture(params=["postgres_db", "mariadb_db"])
def sink(engine: Any, request: Any) -> Any:
    db = request.getfixturevalue(request.param)
    reporter = Reporter()
    task, _ = start_task(engine, db, reporter)
    yield task, db, reporter
    task.stop()


@pytest.mark.parametrize("path", PATHS)
def test_variable_scale_decimals_make_numeric_columns_and_keep_every_digit(sink, path):
    task, db, reporter = sink
    maria = is_maria(db)
    # MariaDB's widest DECIMAL(65,30) holds 35 digits before the point and 30 after;
    # PostgreSQL's numeric holds any of these
    max_whole, max_scale = (35, 30) if maria else (90, 60)
    schema = SchemaBuilder.struct().field("id", INT64_SCHEMA).field("n", VSD).build()

    @PROPS
    @given(st.lists(decimals(max_whole, max_scale), min_size=1, max_size=8))
    def check(values: list[decimal.Decimal]) -> None:
        rows = [{"n": vsd(v)} for v in values] + [{"n": None}]
        topic, _ = deliver(task, schema, rows, path)
        got = read(db, topic, "n")
        assert got == {**dict(enumerate(values)), len(values): None}
        if not maria:  # an unconstrained numeric keeps each value's own scale
            assert [got[i].as_tuple().exponent for i in range(len(values))] == \
                [min(0, v.as_tuple().exponent) for v in values]
        assert column_types(db, topic)["n"] == ("decimal" if maria else "numeric")
        assert reporter.reported == []

    check()


@pytest.mark.parametrize("path", PATHS)
def test_timestamp_kinds_make_their_own_column_types(sink, path):
    """`timestamp` stays without a zone (PostgreSQL TIMESTAMP, MariaDB DATETIME(6)),
    `timestamptz` is an instant; Connect's Timestamp without the parameter keeps
    TIMESTAMPTZ, as before."""
    task, db, reporter = sink
    maria = is_maria(db)
    schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
              .field("naive", with_params(timestamp_schema(True), **{TEMPORAL_PARAM: "timestamp"}))
              .field("zoned", with_params(timestamp_schema(True),
                                          **{TEMPORAL_PARAM: "timestamptz"}))
              .field("plain", timestamp_schema(True)).build())
    low = dt.datetime(1000, 1, 2) if maria else dt.datetime(1, 1, 2)

    @PROPS
    @given(st.lists(st.datetimes(low, dt.datetime(9999, 12, 30)).map(
        lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000, tzinfo=dt.UTC)),
        min_size=1, max_size=8))
    def check(stamps: list[dt.datetime]) -> None:
        rows = [{"naive": t, "zoned": t, "plain": t} for t in stamps]
        topic, _ = deliver(task, schema, rows, path)
        for column in ("naive", "zoned", "plain"):
            got = read(db, topic, column)
            assert {i: aware(v) for i, v in got.items()} == dict(enumerate(stamps))
        kinds = column_types(db, topic)
        if maria:
            assert (kinds["naive"], kinds["zoned"]) == ("datetime", "datetime")
        else:
            assert (kinds["naive"], kinds["zoned"], kinds["plain"]) == (
                "timestamp without time zone", "timestamp with time zone",
                "timestamp with time zone")
        assert reporter.reported == []

    check()


ENCODINGS = ["nanos_long", "nanos_string", "nanos_iso_datetime_string"]


def encoded_timestamp(micros: int, encoding: str) -> Any:
    if encoding == "nanos_long":
        return micros * 1000
    if encoding == "nanos_string":
        return str(micros * 1000)
    t = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)
    return f"{t.year:04d}-{t:%m-%dT%H:%M:%S}.{t.microsecond:06d}000"


def encoded_time(micros: int, encoding: str) -> Any:
    if encoding != "nanos_iso_datetime_string":
        return encoded_timestamp(micros, encoding)
    sec, us = divmod(micros, 1_000_000)
    return f"{sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}.{us:06d}000"


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("path", PATHS)
def test_granularity_microseconds_arrive_as_timestamps_and_times(sink, path, encoding):
    """timestamp.granularity's int64 and string forms, told apart by their parameters,
    become timestamp and time columns to the microsecond, not BIGINT or TEXT."""
    task, db, reporter = sink
    maria = is_maria(db)
    base = OPTIONAL_INT64_SCHEMA if encoding == "nanos_long" else OPTIONAL_STRING_SCHEMA
    enc = {TEMPORAL_ENCODING_PARAM: encoding}
    schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
              .field("at", with_params(base, **{TEMPORAL_PARAM: "timestamp"}, **enc))
              .field("t", with_params(base, **{TEMPORAL_PARAM: "time"}, **enc)).build())
    first = dt.datetime(1000, 1, 1) if maria else dt.datetime(1678, 1, 1)
    lo = int((first - dt.datetime(1970, 1, 1)).total_seconds()) * 1_000_000
    hi = int((dt.datetime(2262, 1, 1) - dt.datetime(1970, 1, 1)).total_seconds()) * 1_000_000
    if encoding == "nanos_long":
        lo = max(lo, -(2**63) // 1000 + 1)

    @PROPS
    @given(st.lists(st.tuples(st.integers(lo, hi), st.integers(0, 86_400_000_000 - 1)),
                    min_size=1, max_size=8))
    def check(values: list[tuple[int, int]]) -> None:
        rows = [{"at": encoded_timestamp(a, encoding), "t": encoded_time(t, encoding)}
                for a, t in values]
        topic, _ = deliver(task, schema, rows, path)
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        assert {i: aware(v) for i, v in read(db, topic, "at").items()} == {
            i: epoch + dt.timedelta(microseconds=a) for i, (a, _) in enumerate(values)}
        times = read(db, topic, "t")
        if maria:  # PyMySQL reads TIME as a timedelta
            times = {i: (dt.datetime.min + v).time() for i, v in times.items()}
        assert times == {i: (dt.datetime.min + dt.timedelta(microseconds=t)).time()
                         for i, (_, t) in enumerate(values)}
        kinds = column_types(db, topic)
        assert kinds["at"] == ("datetime" if maria else "timestamp without time zone")
        assert kinds["t"] == ("time" if maria else "time without time zone")
        assert reporter.reported == []

    check()


def test_a_nanosecond_the_column_cannot_hold_is_the_records_error(engine, postgres_db):
    reporter = Reporter()
    task, _ = start_task(engine, postgres_db, reporter)
    try:
        schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
                  .field("at", with_params(OPTIONAL_INT64_SCHEMA, **{
                      TEMPORAL_PARAM: "timestamptz", TEMPORAL_ENCODING_PARAM: "nanos_long"}))
                  .build())
        topic, _ = deliver(task, schema, [{"at": 1_000}, {"at": 1_001}], "records")
        assert read(postgres_db, topic, "at") == {
            0: dt.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=dt.UTC)}
        [(record, error)] = reporter.reported
        assert record.value["id"] == 1 and "has nanoseconds" in str(error)
    finally:
        task.stop()


def test_time_of_day_keeps_microseconds_with_its_parameter(engine, postgres_db):
    """Connect's Time is milliseconds on the wire; a time column read with a
    timestamp.granularity travels as nanoseconds of the day instead (above). Here: a
    Time with `kctl.temporal` still makes a TIME column."""
    reporter = Reporter()
    task, _ = start_task(engine, postgres_db, reporter)
    try:
        schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
                  .field("t", with_params(time_schema(True), **{TEMPORAL_PARAM: "time"}))
                  .build())
        topic, _ = deliver(task, schema, [{"t": dt.time(12, 34, 56, 789000)}], "columns")
        assert read(postgres_db, topic, "t") == {0: dt.time(12, 34, 56, 789000)}
        assert column_types(postgres_db, topic)["t"] == "time without time zone"
    finally:
        task.stop()


def test_the_converter_carries_the_parameters_and_the_struct_exactly():
    """JsonConverter's envelope keeps the parameters and VariableScaleDecimal's name on
    both paths, so the sink sees what the source said."""
    schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA).field("n", VSD)
              .field("at", with_params(timestamp_schema(True), **{TEMPORAL_PARAM: "timestamp"}))
              .field("ns", with_params(OPTIONAL_INT64_SCHEMA, **{
                  TEMPORAL_PARAM: "time", TEMPORAL_ENCODING_PARAM: "nanos_long"})).build())
    value = Struct(schema, {"id": 1, "n": vsd(decimal.Decimal("-1234.5000")),
                            "at": dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC),
                            "ns": 45_296_789_012_000})
    wire = converter().from_connect_data("t", schema, value)
    decoded = converter().to_connect_data("t", wire)
    assert decoded.schema == schema and decoded.value == value
    column = converter().to_arrow("t", [wire])
    assert column is not None and column[0] == schema
    n = column[1].field("n")[0].as_py()
    assert n == {"scale": 4, "value": vsd(decimal.Decimal("-1234.5000"))["value"]}
    assert schema.field("n").schema.type is Type.STRUCT


@pytest.mark.parametrize("fmt", ["parquet", "json", "csv"])
def test_filesink_keeps_variable_scale_decimals_exactly(engine, tmp_path_factory, fmt):
    """FileSink keeps VariableScaleDecimal's struct in parquet and json, every byte and the
    scale; csv, which holds no struct, gets its exact decimal text."""
    import base64

    from test_file_sink_exact_values import Reporter as FileReporter
    from test_file_sink_exact_values import written

    @PROPS
    @given(st.lists(decimals(60, 40), min_size=1, max_size=6))
    def check(values: list[decimal.Decimal]) -> None:
        reporter = FileReporter()
        structs = [vsd(v) for v in values]
        got = written(engine, tmp_path_factory.mktemp(fmt), fmt, VSD, [*structs, None],
                      reporter)
        expect: list[Any] = []
        for v, s in zip(values, structs, strict=True):
            if fmt == "parquet":
                expect.append({"scale": s["scale"], "value": s["value"]})
            elif fmt == "json":
                expect.append({"scale": s["scale"],
                               "value": base64.b64encode(s["value"]).decode()})
            else:
                expect.append(format(v.copy_abs() if v == 0 else v, "f"))  # no -0
        assert got == [*expect, "" if fmt == "csv" else None]
        assert reporter.reported == []

    check()
