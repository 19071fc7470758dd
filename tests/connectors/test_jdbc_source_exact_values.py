"""JdbcSource reads values exactly (issue 23): numerics of every precision and scale
(finding 1: `numeric(38,10)` kept 28 digits, unconstrained `numeric` was rounded to 18
decimals, wider ones failed the read), times of day as Connect's Time to the microsecond
(finding 5: they were timestamps on 1970-01-01, milliseconds only, 24:00:00 the next day),
timestamps with their microseconds under Confluent's `timestamp.granularity`, doubles with
NaN, infinities and -0.0; an unconstrained numeric (or one wider than Arrow's 76 digits) is
a VariableScaleDecimal with each value's own scale; what becomes text (interval, json,
jsonb, uuid) is exact text. A value with no Connect form is its row's error (the DLQ).
Timestamp and time fields name their source column's kind (`kctl.temporal`), and
timestamp.granularity's int64/string forms say so (`kctl.temporal.encoding`), so a sink
makes the same column type."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import uuid
from typing import Any

import pytest
from file_support import OffsetStore
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_jdbc_source import Reporter, drain, insert, props_for, start_task, val

from kctl.api.arrow import PRECISION_PARAM
from kctl.api.data import (
    DECIMAL,
    TEMPORAL_ENCODING_PARAM,
    TEMPORAL_PARAM,
    TIME,
    TIMESTAMP,
    VARIABLE_SCALE_DECIMAL,
    Type,
)

pytestmark = pytest.mark.spark

UTC = dt.UTC
DB_PROPS = settings(max_examples=10, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow, HealthCheck.data_too_large])


def read_table(engine: Any, db: Any, table: str, reporter: Reporter | None = None,
               **props: Any) -> list[Any]:
    task = start_task(engine, OffsetStore(), props_for(db, **props), [table],
                      reporter or Reporter())
    try:
        return drain(task)
    finally:
        task.stop()


def field_schema(record: Any, name: str) -> Any:
    return record.value_schema.field(name).schema


def exact(v: Any) -> decimal.Decimal:
    """A VariableScaleDecimal struct's value, every digit and its scale."""
    unscaled = int.from_bytes(v["value"], "big", signed=True)
    return decimal.Decimal(unscaled).scaleb(-v["scale"], decimal.Context(prec=10_000))


def test_postgresql_types_arrive_exactly_and_what_becomes_text_is_exact_text(
        engine, postgres_db):
    postgres_db.execute(
        "CREATE TABLE kinds (id INT PRIMARY KEY, n NUMERIC, n50 NUMERIC(50,10), "
        "n3810 NUMERIC(38,10), t TIME, ttz TIMETZ, ts TIMESTAMP(6), tstz TIMESTAMPTZ, "
        "d DOUBLE PRECISION, iv INTERVAL, j JSON, jb JSONB, u UUID)",
        "INSERT INTO kinds VALUES (1, 12345678901234567890.123456789012, "
        "1234567890123456789012345678901234567890.0123456789, "
        "-9999999999999999999999999999.9999999999, '12:34:56.123456', '12:34:56.789+02', "
        "'0001-01-01 00:00:00.000001', '9999-12-31 23:59:59.999999+00', 'NaN', "
        "'1 day 02:00:00', '{\"a\": 1}', '{\"b\": 2}', "
        "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11')",
        "INSERT INTO kinds VALUES (2, 1e-30, 1, 1234567890123456789012345678.0123456789, "
        "'00:00:00', '23:30:00-01', '2024-05-01 12:30:15.123456', "
        "'2024-05-01 12:30:15.123456+05:30', '-0', '-3 mons', 'null', '[]', "
        "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12')",
        "INSERT INTO kinds (id, t, d) VALUES (3, '24:00:00', 'Infinity')")
    reporter = Reporter()
    records = read_table(engine, postgres_db, "kinds", reporter)
    by_id = {val(r)["id"]: val(r) for r in records}
    assert sorted(by_id) == [1, 2]
    one, two = by_id[1], by_id[2]
    assert str(exact(one["n"])) == "12345678901234567890.123456789012"
    assert exact(two["n"]) == decimal.Decimal("1e-30") and two["n"]["scale"] == 30
    assert one["n50"] == decimal.Decimal("1234567890123456789012345678901234567890.0123456789")
    assert one["n3810"] == decimal.Decimal("-9999999999999999999999999999.9999999999")
    assert two["n3810"] == decimal.Decimal("1234567890123456789012345678.0123456789")
    assert (one["t"], two["t"]) == (dt.time(12, 34, 56, 123456), dt.time(0))
    assert (one["ttz"], two["ttz"]) == (dt.time(10, 34, 56, 789000), dt.time(0, 30))
    assert one["ts"] == dt.datetime(1, 1, 1, 0, 0, 0, 1, tzinfo=UTC)
    assert one["tstz"] == dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    assert two["tstz"] == dt.datetime(2024, 5, 1, 7, 0, 15, 123456, tzinfo=UTC)
    assert math.isnan(one["d"]) and math.copysign(1, two["d"]) == -1
    assert (one["iv"], two["iv"]) == ("1 day 02:00:00", "-3 mons")
    assert (one["j"], one["jb"], two["j"], two["jb"]) == ('{"a": 1}', '{"b": 2}', "null", "[]")
    assert one["u"] == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
    r = records[0]
    assert field_schema(r, "n").name == VARIABLE_SCALE_DECIMAL
    n50 = field_schema(r, "n50")
    assert (n50.name, n50.parameters) == (DECIMAL, {"scale": "10", PRECISION_PARAM: "50"})
    assert field_schema(r, "t").name == TIME and field_schema(r, "ttz").name == TIME
    assert field_schema(r, "ts").name == TIMESTAMP
    assert [field_schema(r, c).parameters for c in ("t", "ttz", "ts", "tstz")] == [
        {TEMPORAL_PARAM: k} for k in ("time", "time", "timestamp", "timestamptz")]
    for name in ("iv", "j", "jb", "u"):
        assert field_schema(r, name).type is Type.STRING
    [(rejected, error)] = reporter.reports  # 24:00:00 is no time of day
    assert "'24:00:00' is outside a day" in str(error)
    assert '"id": 3' in rejected.value


def test_unconstrained_numerics_keep_every_digit_and_their_own_scale(engine, postgres_db):
    """PostgreSQL's `numeric` without a precision (and numerics wider than 76 digits): each
    value is a VariableScaleDecimal of the scale its text has; NaN has no decimal form and
    is its row's error."""
    digits = st.integers(0, 10**120)
    values = st.tuples(digits, st.integers(0, 80), st.booleans()).map(
        lambda t: decimal.Decimal(t[0]).scaleb(-t[1], decimal.Context(prec=10_000))
        .copy_sign(decimal.Decimal(-1 if t[2] and t[0] else 1)))  # numeric has no -0

    @DB_PROPS
    @given(st.lists(values, min_size=1, max_size=6))
    def check(numbers: list[decimal.Decimal]) -> None:
        table = "u" + uuid.uuid4().hex[:10]
        postgres_db.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, v NUMERIC, "
                            "w NUMERIC(200, 80))")
        texts = [format(n, "f") for n in numbers]
        insert(postgres_db, table, [(i, t, t) for i, t in enumerate(texts)], "id, v, w")
        postgres_db.execute(f"INSERT INTO {table} VALUES (-1, 'NaN', NULL), (-2, NULL, NULL)")
        reporter = Reporter()
        records = read_table(engine, postgres_db, table, reporter)
        got = {val(r)["id"]: val(r) for r in records}
        assert {i: format(exact(got[i]["v"]), "f") for i in range(len(texts))} == \
            dict(enumerate(texts))
        assert {i: exact(got[i]["w"]) for i in range(len(texts))} == dict(enumerate(numbers))
        assert got[-2]["v"] is None and -1 not in got
        [(_, error)] = reporter.reports
        assert "'NaN' is not a finite number" in str(error)
        assert {field_schema(records[0], c).name for c in "vw"} == {VARIABLE_SCALE_DECIMAL}

    check()


@pytest.mark.parametrize("granularity", ["nanos_long", "nanos_string",
                                         "nanos_iso_datetime_string"])
def test_times_keep_microseconds_under_a_timestamp_granularity(engine, postgres_db,
                                                                granularity):
    """A time of day takes timestamp.granularity's form as the timestamps do (nanoseconds
    of the day, or HH:MM:SS.nnnnnnnnn), so its microseconds survive Connect's millisecond
    Time; the parameters say which column each came from."""
    @DB_PROPS
    @given(st.lists(st.times(), min_size=1, max_size=6))
    def check(times: list[dt.time]) -> None:
        table = "g" + uuid.uuid4().hex[:10]
        postgres_db.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, t TIME(6), "
                            "ts TIMESTAMP(6), tz TIMESTAMPTZ(6))")
        insert(postgres_db, table, [(i, t, dt.datetime.combine(dt.date(2024, 2, 29), t),
                                     dt.datetime.combine(dt.date(1999, 1, 1), t, UTC))
                                    for i, t in enumerate(times)], "id, t, ts, tz")
        records = read_table(engine, postgres_db, table, timestamp_granularity=granularity)
        got = {val(r)["id"]: val(r)["t"] for r in records}
        micros = [((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond
                  for t in times]
        expect = {"nanos_long": [m * 1000 for m in micros],
                  "nanos_string": [str(m * 1000) for m in micros],
                  "nanos_iso_datetime_string": [f"{t:%H:%M:%S}.{t.microsecond:06d}000"
                                                for t in times]}[granularity]
        assert got == dict(enumerate(expect))
        params = [field_schema(records[0], c).parameters for c in ("t", "ts", "tz")]
        assert params == [{TEMPORAL_PARAM: k, TEMPORAL_ENCODING_PARAM: granularity}
                          for k in ("time", "timestamp", "timestamptz")]

    check()


@st.composite
def numeric_columns(draw: Any, max_p: int, max_s: int) -> tuple[int, int, list[str]]:
    precision = draw(st.integers(1, max_p))
    scale = draw(st.integers(0, min(precision, max_s)))
    edge = 10 ** precision - 1
    unscaled = draw(st.lists(st.integers(-edge, edge) | st.sampled_from([edge, -edge]),
                             min_size=1, max_size=6))
    texts = []
    for u in unscaled:
        d = decimal.Decimal((1 if u < 0 else 0, tuple(map(int, str(abs(u)))), -scale))
        texts.append(format(d, "f"))
    return precision, scale, texts


@pytest.mark.parametrize("server_db", ["postgres_db", "mariadb_db"])
def test_numerics_of_every_precision_and_scale_are_read_exactly(engine, request, server_db):
    db = request.getfixturevalue(server_db)
    limits = (76, 76) if server_db == "postgres_db" else (65, 30)

    @DB_PROPS
    @given(numeric_columns(*limits))
    def check(case: tuple[int, int, list[str]]) -> None:
        precision, scale, texts = case
        table = "n" + uuid.uuid4().hex[:10]
        db.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, v DECIMAL({precision},{scale}))")
        insert(db, table, [(i, t) for i, t in enumerate(texts)], "id, v")
        records = read_table(engine, db, table)
        got = {val(r)["id"]: val(r)["v"] for r in records}
        assert got == {i: decimal.Decimal(t) for i, t in enumerate(texts)}
        assert all(got[i].as_tuple().exponent == -scale for i in got)
        schema = field_schema(records[0], "v")
        assert schema.name == DECIMAL and schema.parameters["scale"] == str(scale)

    check()


def test_mariadb_times_of_day_and_durations(engine, mariadb_db):
    mariadb_db.execute("CREATE TABLE times (id INT PRIMARY KEY, t TIME(6))",
                       "INSERT INTO times VALUES (1, '12:34:56.123456'), (2, '838:59:59'), "
                       "(3, '-00:00:01'), (4, '23:59:59.999999')")
    reporter = Reporter()
    records = read_table(engine, mariadb_db, "times", reporter)
    assert {val(r)["id"]: val(r)["t"] for r in records} == {
        1: dt.time(12, 34, 56, 123456), 4: dt.time(23, 59, 59, 999999)}
    assert field_schema(records[0], "t").name == TIME
    assert len(reporter.reports) == 2
    assert all("outside a day" in str(e) for _, e in reporter.reports)


def test_mariadb_bits_arrive_as_their_bytes_and_booleans_as_booleans(engine, mariadb_db):
    """Spark read BIT(8) b'10101010' as the 32 characters '1111...10101010' (the sign-extended
    value spelled in binary); it arrives as the byte 0xAA, as CAST(... AS BINARY) gives it."""
    mariadb_db.execute(
        "CREATE TABLE flags (id INT PRIMARY KEY, ok BOOLEAN, one BIT(1), b8 BIT(8), "
        "b12 BIT(12), b64 BIT(64), kind ENUM('a', 'b'), tags SET('x', 'y'), doc JSON, "
        "y YEAR)",
        "INSERT INTO flags VALUES (1, TRUE, b'1', b'10101010', b'101010101010', "
        f"b'1{'0' * 62}1', 'b', 'x,y', '{{\"k\": 1}}', 2024), "
        "(2, FALSE, b'0', 0, 1, 0, 'a', '', '[]', 1901), "
        "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)")
    records = read_table(engine, mariadb_db, "flags")
    got = {val(r)["id"]: val(r) for r in records}
    assert [(got[i]["ok"], got[i]["one"], got[i]["b8"], got[i]["b12"], got[i]["b64"])
            for i in (1, 2, 3)] == [
        (True, True, b"\xaa", b"\x0a\xaa", b"\x80" + b"\x00" * 6 + b"\x01"),
        (False, False, b"\x00", b"\x00\x01", b"\x00" * 8),
        (None, None, None, None, None)]
    assert [field_schema(records[0], f).type for f in ("ok", "one", "b8", "kind", "doc")] == [
        Type.BOOLEAN, Type.BOOLEAN, Type.BYTES, Type.STRING, Type.STRING]
    assert (got[1]["kind"], got[1]["tags"], got[1]["doc"]) == ("b", "x,y", '{"k": 1}')
    assert got[1]["y"] == dt.date(2024, 1, 1)  # YEAR: a Date on January 1st, as Spark reads it


@pytest.mark.parametrize("granularity,expect", [
    ("connect_logical", dt.datetime(2024, 5, 1, 12, 30, 15, 123456, tzinfo=UTC)),
    ("nanos_long", 1714566615123456000),
    ("nanos_string", "1714566615123456000"),
    ("nanos_iso_datetime_string", "2024-05-01T12:30:15.123456000"),
])
def test_timestamp_granularity_keeps_microseconds_as_confluent_defines_it(
        engine, postgres_db, granularity, expect):
    postgres_db.execute("CREATE TABLE stamps (id INT PRIMARY KEY, at TIMESTAMP(6))",
                        "INSERT INTO stamps VALUES (1, '2024-05-01 12:30:15.123456'), "
                        "(2, '0001-01-01 00:00:00'), (3, NULL)")
    reporter = Reporter()
    records = read_table(engine, postgres_db, "stamps", reporter,
                         timestamp_granularity=granularity)
    got = {val(r)["id"]: val(r)["at"] for r in records}
    assert got[1] == expect and got[3] is None
    year_one = {"connect_logical": dt.datetime(1, 1, 1, tzinfo=UTC), "nanos_long": None,
                "nanos_string": "-62135596800000000000",
                "nanos_iso_datetime_string": "0001-01-01T00:00:00.000000000"}[granularity]
    if year_one is None:  # int64 nanoseconds end in 1677: the row's error, not a wrong value
        assert 2 not in got
        [(_, error)] = reporter.reports
        assert "nanos_long" in str(error)
    else:
        assert got[2] == year_one and reporter.reports == []


def test_sqlite_time_columns_are_times_of_day(engine, sqlite_db):
    sqlite_db.execute("CREATE TABLE times (id INTEGER PRIMARY KEY, t TIME)",
                      "INSERT INTO times VALUES (1, '12:34:56.123456'), (2, '00:00:00'), "
                      "(3, 'noon'), (4, NULL)")
    reporter = Reporter()
    records = read_table(engine, sqlite_db, "times", reporter)
    assert {val(r)["id"]: val(r)["t"] for r in records} == {
        1: dt.time(12, 34, 56, 123456), 2: dt.time(0), 4: None}
    assert field_schema(records[0], "t").name == TIME
    [(_, error)] = reporter.reports
    assert "'noon' is not a time of day" in str(error)
