"""Values keep every digit from a record's bytes to a PostgreSQL row (issue 23): encoded by
JsonConverter with its schema, decoded by it as the worker's sink loop decodes a batch, and
written by JdbcSink. The loop (`_decode_columns` in runtime/tasks/sink.py) decodes a
partition's batch into one Arrow column with `to_arrow` and hands it to `put_batch`; what
that cannot decode exactly (decimals, for one) goes record by record through
`to_connect_data` and `put`. Both paths are checked.

Kafka Connect's Timestamp and Time are milliseconds on the wire: the values here are whole
milliseconds, and what a finer value becomes is asserted on its own (its milliseconds).
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
from test_jdbc_exact_values import LIMITS, decimal_type, read, same_double, value_of
from test_jdbc_sink import Reporter, q, start_task

from kctl.api import SchemaBuilder, SinkBatch, SinkRecord, Struct, TopicPartition
from kctl.api.data import (
    INT64_SCHEMA,
    OPTIONAL_BYTES_SCHEMA,
    OPTIONAL_FLOAT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    Schema,
    time_schema,
    timestamp_schema,
)
from kctl.runtime.converters.json import JsonConverter

pytestmark = pytest.mark.spark

PROPS = settings(max_examples=10, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.function_scoped_fixture,
                                        HealthCheck.too_slow, HealthCheck.data_too_large])
# "columns": as the worker decodes a batch (one column when to_arrow can, else records);
# "records": one by one, as it decodes a batch with transforms or a column it refused
PATHS = ["columns", "records"]


def converter(**configs: str) -> JsonConverter:
    c = JsonConverter()
    c.configure({"schemas.enable": "true", **configs}, False)
    return c


def deliver(task: Any, schema: Schema, rows: list[dict[str, Any]], path: str,
            **configs: str) -> tuple[str, bool]:
    """The rows encoded by one JsonConverter (a source worker's), decoded by another (the
    sink worker's) along `path`, written to a new topic's table; and whether they went as
    one column."""
    topic = "c" + uuid.uuid4().hex[:12]
    wire = [converter(**configs).from_connect_data(topic, schema, Struct(schema, {"id": i, **r}))
            for i, r in enumerate(rows)]
    decoder = converter(**configs)
    task.open([TopicPartition(topic, 0)])
    decoded = decoder.to_arrow(topic, wire) if path == "columns" else None
    n = len(wire)
    if decoded is not None:
        value_schema, column = decoded
        task.put_batch(SinkBatch(topic, 0, list(range(n)), [0] * n, [()] * n, value_schema,
                                 column))
    else:
        values = [decoder.to_connect_data(topic, w) for w in wire]
        task.put([SinkRecord(topic, 0, None, None, v.schema, v.value, kafka_offset=i)
                  for i, v in enumerate(values)])
    task.flush({})
    return topic, decoded is not None


@pytest.fixture
def sink(engine: Any, postgres_db: Any) -> Any:
    reporter = Reporter()
    task, _ = start_task(engine, postgres_db, reporter)
    yield task, postgres_db, reporter
    task.stop()


@pytest.mark.parametrize("fmt", ["BASE64", "NUMERIC"])
@pytest.mark.parametrize("path", PATHS)
def test_decimals_of_every_precision_and_scale_reach_postgresql_through_the_converter(
        sink, path, fmt):
    task, db, reporter = sink
    max_p, _ = LIMITS["postgresql"]

    @PROPS
    @given(st.integers(1, max_p).flatmap(lambda p: st.tuples(
        st.just(p), st.integers(0, p),
        st.lists(st.integers(-(10 ** p) + 1, 10 ** p - 1) |
                 st.sampled_from([10 ** p - 1, -(10 ** p) + 1, 0]), min_size=1, max_size=6))))
    def check(case: tuple[int, int, list[int]]) -> None:
        precision, scale, unscaled = case
        schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
                  .field("n", decimal_type(precision, scale)).build())
        values = [value_of(u, scale) for u in unscaled]
        topic, _ = deliver(task, schema, [{"n": v} for v in values], path,
                           **{"decimal.format": fmt})
        got = read(db, topic, "n")
        assert got == dict(enumerate(values))
        assert all(got[i].as_tuple().exponent == -scale for i in got)  # every digit
        assert reporter.reported == []

    check()


MS_FIRST = dt.datetime(1, 1, 1, tzinfo=dt.UTC)
MS_LAST = dt.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=dt.UTC)


def whole_ms(t: Any) -> Any:
    return t.replace(microsecond=t.microsecond // 1000 * 1000)


def utc(v: dt.datetime) -> dt.datetime:
    return v.replace(tzinfo=dt.UTC) if v.tzinfo is None else v.astimezone(dt.UTC)


@pytest.mark.parametrize("path", PATHS)
def test_timestamps_and_times_reach_postgresql_to_the_millisecond_from_year_1_to_9999(
        sink, path):
    task, db, reporter = sink
    schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
              .field("at", timestamp_schema(True)).field("t", time_schema(True)).build())
    zones = st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=14)),
                             dt.timezone(dt.timedelta(hours=-9, minutes=-30))])

    @PROPS
    @given(st.lists(st.tuples(
        st.datetimes(dt.datetime(1, 1, 2), dt.datetime(9999, 12, 30), timezones=zones)
        .map(whole_ms), st.times().map(whole_ms)), min_size=1, max_size=8))
    def check(cases: list[tuple[dt.datetime, dt.time]]) -> None:
        rows = [{"at": a, "t": t} for a, t in cases] + [
            {"at": MS_FIRST, "t": dt.time(0)}, {"at": MS_LAST, "t": dt.time(23, 59, 59, 999000)},
            {"at": None, "t": None}]
        topic, columns = deliver(task, schema, rows, path)
        assert columns == (path == "columns")
        got = {i: (None if a is None else utc(a), t)
               for i, a, t in db.query(f"SELECT id, at, t FROM {q(db, topic)}")}
        assert got == {i: (None if r["at"] is None else r["at"].astimezone(dt.UTC), r["t"])
                       for i, r in enumerate(rows)}
        assert reporter.reported == []

    check()


@pytest.mark.parametrize("path", PATHS)
def test_a_finer_timestamp_or_time_keeps_its_milliseconds_through_the_converter(sink, path):
    """Connect's Timestamp and Time are milliseconds: the microseconds below are not on the
    wire, and nothing else changes (the instant before 1970 included)."""
    task, db, _ = sink
    schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
              .field("at", timestamp_schema(True)).field("t", time_schema(True)).build())
    rows = [{"at": dt.datetime(2024, 2, 29, 12, 0, 0, 123456, tzinfo=dt.UTC),
             "t": dt.time(23, 59, 59, 999999)},
            {"at": dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC),
             "t": dt.time(0, 0, 0, 1500)}]
    topic, _ = deliver(task, schema, rows, path)
    got = {i: (utc(a), t) for i, a, t in db.query(f"SELECT id, at, t FROM {q(db, topic)}")}
    assert got == {0: (dt.datetime(2024, 2, 29, 12, 0, 0, 123000, tzinfo=dt.UTC),
                       dt.time(23, 59, 59, 999000)),
                   1: (dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=dt.UTC),
                       dt.time(0, 0, 0, 1000))}


DOUBLES = [math.nan, math.inf, -math.inf, -0.0, 0.0, 5e-324, -1.7976931348623157e308]


@pytest.mark.parametrize("path", PATHS)
def test_doubles_text_and_bytes_reach_postgresql_exactly_through_the_converter(sink, path):
    task, db, reporter = sink
    schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
              .field("x", OPTIONAL_FLOAT64_SCHEMA).field("s", OPTIONAL_STRING_SCHEMA)
              .field("b", OPTIONAL_BYTES_SCHEMA).build())
    # PostgreSQL's text holds no NUL (its record's error: test_jdbc_exact_values)
    chars = st.characters(exclude_categories=["Cs"], exclude_characters="\x00")

    @PROPS
    @given(st.lists(st.tuples(st.floats() | st.sampled_from(DOUBLES),
                              st.text(chars) | st.sampled_from(['"', "\\", "\n\r", "\u2028"]),
                              st.binary()), min_size=1, max_size=8))
    def check(rows: list[tuple[float, str, bytes]]) -> None:
        topic, columns = deliver(task, schema, [{"x": x, "s": s, "b": b} for x, s, b in rows],
                                 path)
        if path == "records":
            assert not columns
        got = {i: (x, s, bytes(b)) for i, x, s, b in
               db.query(f"SELECT id, x, s, b FROM {q(db, topic)}")}
        assert sorted(got) == list(range(len(rows)))
        for i, (x, s, b) in enumerate(rows):
            assert same_double(got[i][0], x), (got[i][0], x)
            assert got[i][1:] == (s, b)
        assert reporter.reported == []

    check()


def test_a_batch_of_plain_values_is_decoded_as_one_column(sink):
    """The columnar path is the one the worker takes for JDBC batches: a property above
    that fell back to records would not test it."""
    task, db, _ = sink
    schema = (SchemaBuilder.struct().field("id", INT64_SCHEMA)
              .field("x", OPTIONAL_FLOAT64_SCHEMA).field("s", OPTIONAL_STRING_SCHEMA)
              .field("b", OPTIONAL_BYTES_SCHEMA).build())
    rows = [{"x": x, "s": "é\n\"", "b": b"\x00"} for x in DOUBLES]
    topic, columns = deliver(task, schema, rows, "columns")
    assert columns
    assert len(read(db, topic, "x")) == len(DOUBLES)


def test_decimal_exponents_are_not_lost_to_pythons_28_digit_context():
    """Finding 1's cause, on the converter alone: 38 digits in, 38 digits out."""
    schema = SchemaBuilder.struct().field("id", INT64_SCHEMA).field(
        "n", decimal_type(38, 10)).build()
    value = decimal.Decimal("1234567890123456789012345678.0123456789")
    for fmt in ("BASE64", "NUMERIC"):
        wire = converter(**{"decimal.format": fmt}).from_connect_data(
            "t", schema, Struct(schema, {"id": 0, "n": value}))
        assert converter(**{"decimal.format": fmt}).to_connect_data("t", wire).value["n"] == value


@pytest.mark.parametrize("path", PATHS)
def test_a_lone_surrogate_the_converter_decodes_is_its_records_error_not_its_batchs(sink,
                                                                                    path):
    """JSON may escape half a surrogate pair ("\\ud800"); Python's json decodes it into a
    str no UTF-8 holds. The record goes to the DLQ and its batch is written (it failed the
    batch: Arrow's UnicodeEncodeError was no value error to JdbcSink)."""
    task, db, reporter = sink
    schema = SchemaBuilder.struct().field("id", INT64_SCHEMA).field(
        "s", OPTIONAL_STRING_SCHEMA).build()
    topic = "c" + uuid.uuid4().hex[:12]
    prefix = converter().from_connect_data(topic, schema, Struct(schema, {"id": 0, "s": ""}))
    prefix = prefix[:prefix.index(b'"payload":') + len(b'"payload":')]
    wire = [prefix + b'{"id":%d,"s":%s}}' % (i, s)
            for i, s in enumerate([b'"before"', b'"\\ud800 half"', b'"after"'])]
    decoder = converter()
    task.open([TopicPartition(topic, 0)])
    assert path == "records" or decoder.to_arrow(topic, wire) is None  # no column holds it
    values = [decoder.to_connect_data(topic, w) for w in wire]
    task.put([SinkRecord(topic, 0, None, None, v.schema, v.value, kafka_offset=i)
              for i, v in enumerate(values)])
    task.flush({})
    assert read(db, topic, "s") == {0: "before", 2: "after"}
    assert [r.kafka_offset for r, _ in reporter.reported] == [1]
    assert "surrogates not allowed" in str(reporter.reported[0][1])
