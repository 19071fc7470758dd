"""JdbcSink writes values exactly (issue 23): decimals of every precision and scale the
databases allow, doubles with NaN, infinities and -0.0 where the database can hold them,
timestamps to the microsecond from year 1 to 9999 (MariaDB: 1000 to 9999), times of day,
unicode text and bytes; read back from PostgreSQL and MariaDB bit for bit.

A value the target cannot hold is that record's error, never a rounded value and never the
batch's failure: a decimal wider than its declared precision (finding 1: "Decimal type with
precision 29 does not fit into precision inferred from first array element: 38" failed the
batch under errors.tolerance=all), a NaN or an infinity in MariaDB (finding 3: "Unknown
column 'NaN' in 'VALUES'" failed the batch, the DLQ stayed empty). Those records reach the
errant record reporter (the DLQ) and the rest of their batch is written.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_jdbc_sink import Reporter, q, start_task

from kctl.api import SchemaBuilder, SinkRecord, Struct, TopicPartition
from kctl.api.arrow import PRECISION_PARAM
from kctl.api.data import (
    INT64_SCHEMA,
    OPTIONAL_BYTES_SCHEMA,
    OPTIONAL_FLOAT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    Schema,
    decimal_schema,
    time_schema,
    timestamp_schema,
)
from kctl.connectors.jdbc._common import dialect_for

DB_PROPS = settings(max_examples=12, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow, HealthCheck.data_too_large])
# the largest precision and scale each database's auto-created column takes
LIMITS = {"postgresql": (76, 76), "mariadb": (65, 30)}
# PostgreSQL stages a batch with COPY by default; "+spark" runs the same story through
# Spark's JDBC writer (staging.method=spark), the path MariaDB and SQLite take
SPARK_STAGED = "+spark"


def target(request: Any, server_db: str) -> tuple[Any, dict[str, str]]:
    """The database of a parametrized story and the sink settings it runs with."""
    name, spark, _ = server_db.partition(SPARK_STAGED)
    return request.getfixturevalue(name), {"staging.method": "spark"} if spark else {}


def decimal_type(precision: int, scale: int) -> Schema:
    base = decimal_schema(scale, True)
    return Schema(base.type, optional=True, name=base.name, version=base.version,
                  parameters={"scale": str(scale), PRECISION_PARAM: str(precision)})


def value_of(unscaled: int, scale: int) -> decimal.Decimal:
    return decimal.Decimal((1 if unscaled < 0 else 0, tuple(map(int, str(abs(unscaled)))),
                            -scale))


def write(task: Any, schema: Schema, rows: list[dict[str, Any]]) -> str:
    """The rows as records of a new topic (its table: auto-created), written and flushed."""
    topic = "t" + uuid.uuid4().hex[:12]
    task.open([TopicPartition(topic, 0)])
    task.put([SinkRecord(topic, 0, None, None, schema, Struct(schema, {"id": i, **r}),
                         kafka_offset=i) for i, r in enumerate(rows)])
    task.flush({})
    return topic


def read(db: Any, topic: str, column: str) -> dict[int, Any]:
    return {i: v for i, v in db.query(f"SELECT id, {q(db, column)} FROM {q(db, topic)}")}


@st.composite
def decimal_rows(draw: Any, dialect: str) -> tuple[int, int, list[decimal.Decimal]]:
    max_p, max_s = LIMITS[dialect]
    precision = draw(st.integers(1, max_p))
    scale = draw(st.integers(0, min(precision, max_s)))
    edge = 10 ** precision - 1  # the widest value: all nines, both signs
    unscaled = draw(st.lists(st.integers(-edge, edge) | st.sampled_from([edge, -edge, 0]),
                             min_size=1, max_size=8))
    return precision, scale, [value_of(u, scale) for u in unscaled]


@pytest.mark.parametrize("server_db", ["postgres_db", "postgres_db+spark", "mariadb_db"])
def test_decimals_of_every_precision_and_scale_are_written_exactly(engine, request, server_db):
    db, props = target(request, server_db)
    dialect = dialect_for(db.url).name
    reporter = Reporter()
    task, _ = start_task(engine, db, reporter, **props)

    @DB_PROPS
    @given(decimal_rows(dialect))
    def check(case: tuple[int, int, list[decimal.Decimal]]) -> None:
        precision, scale, values = case
        schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
                  .field("n", decimal_type(precision, scale)).build())
        topic = write(task, schema, [{"n": v} for v in values])
        got = read(db, topic, "n")
        assert got == dict(enumerate(values))
        for i, v in enumerate(values):  # the digits, not only the value
            assert got[i].as_tuple().exponent == v.as_tuple().exponent or v == 0
        assert reporter.reported == []

    check()
    task.stop()


def test_finding_1_the_38_digit_decimals_of_the_issue_reach_postgresql(engine, postgres_db):
    task, _ = start_task(engine, postgres_db, Reporter())
    schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
              .field("n", decimal_type(38, 10)).build())
    values = [decimal.Decimal("1234567890123456789012345678.0123456789"),
              decimal.Decimal("-9999999999999999999999999999.9999999999")]
    topic = write(task, schema, [{"n": v} for v in values])
    assert read(postgres_db, topic, "n") == dict(enumerate(values))
    task.stop()


@pytest.mark.parametrize("server_db", ["postgres_db", "postgres_db+spark", "mariadb_db",
                                       "sqlite_db"])
def test_a_decimal_wider_than_its_type_goes_to_the_dlq_and_its_batch_is_written(
        engine, request, server_db):
    """Finding 1: one value that does not fit failed the JdbcSink batch, good rows lost."""
    db, props = target(request, server_db)
    reporter = Reporter()
    task, _ = start_task(engine, db, reporter, **props)
    schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
              .field("n", decimal_type(12, 2)).build())
    values = [decimal.Decimal("1.25"), decimal.Decimal("-9999999999999999999999999999.99"),
              decimal.Decimal("9999999999.99")]
    topic = write(task, schema, [{"n": v} for v in values])
    got = read(db, topic, "n")
    assert {i: decimal.Decimal(str(v)) for i, v in got.items()} == {0: values[0], 2: values[2]}
    assert [r.kafka_offset for r, _ in reporter.reported] == [1]
    assert "does not fit" in str(reporter.reported[0][1])
    task.stop()


DOUBLES = [math.nan, math.inf, -math.inf, -0.0, 0.0, 5e-324, -1.7976931348623157e308, 0.1]


def same_double(a: float | None, b: float) -> bool:
    if a is None:
        return False
    if math.isnan(b):
        return math.isnan(a)
    return a == b and math.copysign(1, a) == math.copysign(1, b)


@pytest.mark.parametrize("server_db", ["postgres_db", "postgres_db+spark"])
def test_postgresql_keeps_nan_infinities_and_negative_zero(engine, request, server_db):
    postgres_db, props = target(request, server_db)
    reporter = Reporter()
    task, _ = start_task(engine, postgres_db, reporter, **props)
    schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
              .field("x", OPTIONAL_FLOAT64_SCHEMA).build())

    @DB_PROPS
    @given(st.lists(st.floats() | st.sampled_from(DOUBLES), min_size=1, max_size=10))
    def check(xs: list[float]) -> None:
        topic = write(task, schema, [{"x": x} for x in xs])
        got = read(postgres_db, topic, "x")
        assert all(same_double(got[i], x) for i, x in enumerate(xs)), (got, xs)

    check()
    assert reporter.reported == []
    task.stop()


@pytest.mark.parametrize("server_db", ["mariadb_db", "sqlite_db"])
def test_finding_3_a_double_the_database_cannot_store_is_the_records_error(
        engine, request, server_db):
    """MariaDB has no NaN or infinities (its driver wrote `NaN` into the statement, which
    failed the whole batch); SQLite turns NaN into NULL. The rest of the batch is written."""
    db = request.getfixturevalue(server_db)
    dialect = dialect_for(db.url).name
    reporter = Reporter()
    task, _ = start_task(engine, db, reporter)
    schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
              .field("x", OPTIONAL_FLOAT64_SCHEMA).build())
    topic = write(task, schema, [{"x": x} for x in DOUBLES])
    refused = {0, 1, 2} if dialect == "mariadb" else {0}
    got = read(db, topic, "x")
    assert set(got) == set(range(len(DOUBLES))) - refused
    for i in got:
        assert got[i] == DOUBLES[i]
    assert sorted(r.kafka_offset for r, _ in reporter.reported) == sorted(refused)
    assert all("cannot store" in str(e) or "NaN as NULL" in str(e) for _, e in reporter.reported)
    task.stop()


def aware(t: Any) -> dt.datetime:
    return t.replace(tzinfo=dt.UTC) if t.tzinfo is None else t.astimezone(dt.UTC)


@pytest.mark.parametrize("server_db", ["postgres_db", "postgres_db+spark", "mariadb_db"])
def test_timestamps_keep_microseconds_and_their_instant(engine, request, server_db):
    db, props = target(request, server_db)
    dialect = dialect_for(db.url).name
    reporter = Reporter()
    task, _ = start_task(engine, db, reporter, **props)
    schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
              .field("at", timestamp_schema(True)).build())
    low = dt.datetime(1, 1, 2) if dialect == "postgresql" else dt.datetime(1000, 1, 2)
    zones = st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=14)),
                             dt.timezone(dt.timedelta(hours=-9, minutes=-30))])

    @DB_PROPS
    @given(st.lists(st.datetimes(min_value=low, max_value=dt.datetime(9999, 12, 30),
                                 timezones=zones), min_size=1, max_size=10))
    def check(ts: list[dt.datetime]) -> None:
        edges = [low.replace(tzinfo=dt.UTC),
                 dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC)]
        values = [*ts, *edges]
        topic = write(task, schema, [{"at": t} for t in values])
        got = read(db, topic, "at")
        assert {i: aware(v) for i, v in got.items()} == \
            {i: t.astimezone(dt.UTC) for i, t in enumerate(values)}

    check()
    assert reporter.reported == []
    task.stop()


@pytest.mark.parametrize("server_db", ["postgres_db", "postgres_db+spark", "mariadb_db"])
def test_times_of_day_become_time_columns(engine, request, server_db):
    """Connect's Time had no column type in JdbcSink (the task failed on such a field)."""
    db, props = target(request, server_db)
    reporter = Reporter()
    task, _ = start_task(engine, db, reporter, **props)
    schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
              .field("t", time_schema(True)).build())

    @DB_PROPS
    @given(st.lists(st.times(), min_size=1, max_size=10))
    def check(times: list[dt.time]) -> None:
        values = [*times, dt.time(0), dt.time(23, 59, 59, 999999)]
        topic = write(task, schema, [{"t": t} for t in values])
        got = read(db, topic, "t")
        as_time = {i: (v if isinstance(v, dt.time) else (dt.datetime.min + v).time())
                   for i, v in got.items()}  # PyMySQL reads TIME as a timedelta
        assert as_time == dict(enumerate(values))

    check()
    assert reporter.reported == []
    task.stop()


@pytest.mark.parametrize("server_db", ["postgres_db", "postgres_db+spark", "mariadb_db"])
def test_unicode_text_and_bytes_are_written_as_they_are(engine, request, server_db):
    db, props = target(request, server_db)
    dialect = dialect_for(db.url).name
    reporter = Reporter()
    task, _ = start_task(engine, db, reporter, **props)
    schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
              .field("s", OPTIONAL_STRING_SCHEMA).field("b", OPTIONAL_BYTES_SCHEMA).build())
    # PostgreSQL's text cannot hold NUL (a record with one is its error, tested elsewhere);
    # MariaDB's utf8mb4 holds every code point but the surrogates, which no UTF-8 holds
    chars = st.characters(blacklist_categories=("Cs",),
                          blacklist_characters="\x00" if dialect == "postgresql" else "")

    @DB_PROPS
    @given(st.lists(st.tuples(st.text(chars), st.binary()), min_size=1, max_size=10))
    def check(rows: list[tuple[str, bytes]]) -> None:
        topic = write(task, schema, [{"s": s, "b": b} for s, b in rows])
        got = {i: (s, bytes(b)) for i, s, b in
               db.query(f"SELECT id, s, b FROM {q(db, topic)}")}
        assert got == dict(enumerate(rows))

    check()
    assert reporter.reported == []
    task.stop()


@pytest.mark.parametrize("server_db", ["postgres_db", "postgres_db+spark"])
def test_a_nul_in_text_is_its_records_error_and_the_rest_of_the_batch_is_written(
        engine, request, server_db):
    """PostgreSQL's text cannot hold NUL: staging refuses the whole COPY (or Spark write),
    and halving the batch finds the records to set aside."""
    db, props = target(request, server_db)
    reporter = Reporter()
    task, _ = start_task(engine, db, reporter, **props)
    schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
              .field("s", OPTIONAL_STRING_SCHEMA).build())
    texts = [f"row {i}" if i not in (3, 7) else f"row\x00{i}" for i in range(10)]
    topic = write(task, schema, [{"s": s} for s in texts])
    assert read(db, topic, "s") == {i: s for i, s in enumerate(texts) if i not in (3, 7)}
    assert [r.kafka_offset for r, _ in reporter.reported] == [3, 7]
    assert all("0x00" in str(e) for _, e in reporter.reported), reporter.reported
    task.stop()


@pytest.mark.parametrize("method", ["copy", "spark"])
@pytest.mark.parametrize("mode", ["insert", "upsert"])
def test_a_timestamp_in_a_column_without_a_zone_is_its_utc_wall_clock(engine, postgres_db,
                                                                      method, mode):
    """Confluent's db.timezone=UTC: an existing TIMESTAMP (no zone) column gets the UTC
    wall clock even when the server's sessions default to another zone (the statement's
    conversion used to take the server's zone: 07:30 UTC arrived as 02:30)."""
    postgres_db.execute(f"ALTER DATABASE {postgres_db.name} SET timezone TO 'America/New_York'",
                        "CREATE TABLE clock (id BIGINT PRIMARY KEY, at TIMESTAMP)")
    task, _ = start_task(engine, postgres_db, Reporter(), **{
        "staging.method": method, "insert.mode": mode, "pk.mode": "record_value",
        "pk.fields": "id", "table.name.format": "clock"})
    schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
              .field("at", timestamp_schema(True)).build())
    moment = dt.datetime(2026, 1, 15, 7, 30, 0, 123456, tzinfo=dt.UTC)
    write(task, schema, [{"at": moment}])
    assert postgres_db.query("SELECT at FROM clock") == [(moment.replace(tzinfo=None),)]
    task.stop()
