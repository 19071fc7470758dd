"""Issue 23's findings 1, 3 and 5 (types) as they were seen: through a standalone worker
process, JdbcSource -> topic -> JdbcSink, and records in a topic -> JdbcSink (MariaDB) and
FileSink under errors.tolerance=all.

- Finding 1: numeric(38,10) 1234567890123456789012345678.0123456789 arrived as
  ...678.0000000000, unconstrained numeric was rounded; a 38-digit negative value failed
  the JdbcSink and FileSink tasks ("Decimal type with precision 29 does not fit ...") and
  the batch's good rows were lost. Now every digit arrives, and a value wider than its
  declared type is that record's error in the DLQ while the rest is written.
- Finding 3: one NaN or Infinity failed the MariaDB sink task ("Unknown column 'NaN' in
  'VALUES'"), DLQ empty, nothing written. Now those records are in the DLQ, the rest in
  the table.
- Finding 5: `time` columns became 1970-01-01 timestamps; now a TIME column again.
  Timestamps lost their microseconds with no `timestamp.granularity` to keep them: under
  nanos_string every digit arrives, and the copy's column is a TIMESTAMP again (it was
  TEXT). `interval`, `json`, `jsonb` and `uuid` arrive as the exact text PostgreSQL prints.
- An unconstrained `numeric` travels as a VariableScaleDecimal: the copy's column is
  NUMERIC (it was TEXT), each value exact with its own scale. `dlq show -o json` cut a rejected value to ~80 characters
  (the schema part of the envelope, the payload never visible): now it prints it whole.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import json
import math
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from support.files import output_files
from support.waiting import wait_until
from support.worker import LISTENER, Worker

from kctl.api import SchemaBuilder, Struct
from kctl.api.arrow import PRECISION_PARAM
from kctl.api.data import INT64_SCHEMA, OPTIONAL_FLOAT64_SCHEMA, Schema, decimal_schema
from kctl.runtime.converters import JsonConverter
from kctl.transport.base import ProducerRecord, TopicSpec
from kctl.transport.embedded import EmbeddedTransport

pytestmark = [pytest.mark.slow, pytest.mark.spark]

D = decimal.Decimal
SOURCE_ROWS = [
    (1, D("1234567890123456789012345678.0123456789"), "12345678901234567890.123456789012",
     dt.time(12, 34, 56, 123456)),
    (2, D("-9999999999999999999999999999.9999999999"), "-0.000000000000000000000000000001",
     dt.time(0)),
    (3, D("9999999999999999999999999999.9999999999"), "1E+40", dt.time(23, 59, 59, 999000)),
]


def new_worker(tmp_path: Path) -> Worker:
    w = Worker(tmp_path)
    (tmp_path / "worker.yaml").write_text(
        f"state.dir: {tmp_path / 'state'}\nlisteners: {LISTENER}\noffset.flush.interval.ms: 500\n"
        "spark.master: local[2]\nspark.driver.memory: 1g\n"
        "spark.driver.extraJavaOptions: -XX:+UseSerialGC -XX:TieredStopAtLevel=1\n")
    return w


def config(path: Path, settings: dict[str, Any]) -> Path:
    path.write_text(json.dumps(settings))  # JSON is YAML
    return path


def decimal_type(precision: int, scale: int) -> Schema:
    base = decimal_schema(scale, True)
    return Schema(base.type, optional=True, name=base.name, version=base.version,
                  parameters={"scale": str(scale), PRECISION_PARAM: str(precision)})


VALUE = (SchemaBuilder.struct().name("Reading").field("id", INT64_SCHEMA)
         .field("x", OPTIONAL_FLOAT64_SCHEMA).field("n", decimal_type(38, 10)).build())
# (x, n): NaN and the infinities MariaDB cannot store; a 39-digit n wider than decimal(38,10)
READINGS = [(1.5, D("-9999999999999999999999999999.9999999999")), (math.nan, D("1")),
            (math.inf, D("2")), (-0.0, D("1234567890123456789012345678.0123456789")),
            (2.5, D("0.0000000001")), (3.0, D("-99999999999999999999999999999.9999999999")),
            (-math.inf, D("3"))]
MARIADB_REFUSES = {1, 2, 5, 6}
TOO_WIDE = {5}


def produce_readings(state: Path) -> list[bytes]:
    """The readings in topic `readings`; the bytes of each record's value."""
    conv = JsonConverter()
    values = [conv.from_connect_data("readings", VALUE, Struct(VALUE, {"id": i, "x": x, "n": n}))
              for i, (x, n) in enumerate(READINGS)]
    with EmbeddedTransport(state) as t:
        t.admin().create_topics([TopicSpec("readings", 1)], exist_ok=True)
        producer = t.producer()
        for value in values:
            producer.send(ProducerRecord("readings", value, partition=0))
        assert producer.flush(60) == 0
        producer.close()
    return values


# PostgreSQL's kinds Connect has no type for, and timestamps under nanos_string: (id, at,
# interval, json, jsonb, uuid) as inserted, and as the text each arrives as
KINDS = [
    (1, "2024-05-01 12:30:15.123456", "1 year 2 mons 3 days 04:05:06.789", '{"a": [1, 2.50]}',
     '{"b": {"c": null}}', "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
    (2, "0001-01-01 00:00:00.000001", "-00:00:00.000001", "null", "[]",
     "00000000-0000-0000-0000-000000000000"),
    (3, "9999-12-31 23:59:59.999999", "178000000 years", '"\\u00e9 \\n"',
     '{"z": 1, "a": 2}', "ffffffff-ffff-ffff-ffff-ffffffffffff"),
]
KINDS_TEXT = {
    1: (dt.datetime(2024, 5, 1, 12, 30, 15, 123456), "1 year 2 mons 3 days 04:05:06.789",
        '{"a": [1, 2.50]}', '{"b": {"c": null}}', "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
    2: (dt.datetime(1, 1, 1, 0, 0, 0, 1), "-00:00:00.000001", "null", "[]",
        "00000000-0000-0000-0000-000000000000"),
    3: (dt.datetime(9999, 12, 31, 23, 59, 59, 999999), "178000000 years", '"\\u00e9 \\n"',
        '{"a": 2, "z": 1}', "ffffffff-ffff-ffff-ffff-ffffffffffff"),
}


def dlq_offsets(w: Worker, connector: str) -> set[int]:
    return {int(r["offset"]) for r in json.loads(w.kctl("dlq", "show", connector,
                                                         "-o", "json").stdout)}


def rows(db: Any, sql: str) -> list[tuple]:
    try:
        return [tuple(r) for r in db.query(sql)]
    except Exception:  # not created yet
        return []


def insert_rows(db: Any, table: str, rows: list[tuple]) -> None:
    conn = db.connect()
    with conn:
        conn.cursor().executemany(
            f"INSERT INTO {table} VALUES ({', '.join(['%s'] * len(rows[0]))})", rows)
    conn.close()


def test_exact_values_through_a_worker(tmp_path, postgres_db, mariadb_db):
    postgres_db.execute("CREATE TABLE amounts (id BIGINT PRIMARY KEY, n NUMERIC(38,10), "
                        "free NUMERIC, t TIME)")
    insert_rows(postgres_db, "amounts", SOURCE_ROWS)
    postgres_db.execute("CREATE TABLE kinds (id BIGINT PRIMARY KEY, at TIMESTAMP(6), "
                        "iv INTERVAL, j JSON, jb JSONB, u UUID)")
    insert_rows(postgres_db, "kinds", KINDS)
    wire = produce_readings(tmp_path / "state")
    w = new_worker(tmp_path)
    dlq = {"errors.tolerance": "all", "errors.deadletterqueue.topic.replication.factor": 1,
           "errors.deadletterqueue.context.headers.enable": "true"}
    files = tmp_path / "files"
    connectors = [
        config(tmp_path / "src.yaml", {
            "name": "src", "connector.class": "JdbcSource", "connection.url": postgres_db.url,
            "mode": "incrementing", "topic.prefix": "pg-", "poll.interval.ms": 200,
            "table.include.list": "amounts"}),
        config(tmp_path / "copy.yaml", {
            "name": "copy", "connector.class": "JdbcSink", "topics": "pg-amounts",
            "connection.url": postgres_db.url, "table.name.format": "amounts_copy",
            "auto.create": "true", "insert.mode": "upsert", "pk.mode": "record_key"}),
        config(tmp_path / "kinds.yaml", {
            "name": "kinds", "connector.class": "JdbcSource", "connection.url": postgres_db.url,
            "mode": "incrementing", "topic.prefix": "pgk-", "poll.interval.ms": 200,
            "table.include.list": "kinds", "timestamp.granularity": "nanos_string"}),
        config(tmp_path / "kinds-copy.yaml", {
            "name": "kinds-copy", "connector.class": "JdbcSink", "topics": "pgk-kinds",
            "connection.url": postgres_db.url, "table.name.format": "kinds_copy",
            "auto.create": "true", "insert.mode": "upsert", "pk.mode": "record_key"}),
        config(tmp_path / "maria.yaml", {
            "name": "maria", "connector.class": "JdbcSink", "topics": "readings",
            "connection.url": mariadb_db.url, "auto.create": "true",
            "errors.deadletterqueue.topic.name": "maria-dlq", **dlq}),
        config(tmp_path / "files.yaml", {
            "name": "files", "connector.class": "FileSink", "topics": "readings",
            "path": str(files), "format": "parquet", "flush.size": 2,
            "errors.deadletterqueue.topic.name": "files-dlq", **dlq}),
    ]
    w.start()
    try:
        for c in connectors:
            w.kctl("connector", "create", str(c))
        # Connect's Time is milliseconds of the day on the wire (as in Kafka Connect)
        want = {(i, n, D(free), t.replace(microsecond=t.microsecond // 1000 * 1000))
                for i, n, free, t in SOURCE_ROWS}
        wait_until(lambda: set(rows(postgres_db, "SELECT id, n, free, t "
                                                 "FROM amounts_copy")) == want,
                   timeout=180, interval=0.5, message="every digit in the copy",
                   on_timeout=lambda: rows(postgres_db, "SELECT * FROM amounts_copy"))
        types = dict(postgres_db.query("SELECT column_name, data_type FROM "
                                       "information_schema.columns WHERE table_name = "
                                       "'amounts_copy'"))
        assert (types["t"], types["free"]) == ("time without time zone", "numeric")
        # the unconstrained numeric's values exactly as the source prints them, scale and all
        assert rows(postgres_db, "SELECT s.id FROM amounts s JOIN amounts_copy c USING (id) "
                                 "WHERE s.free::text = c.free::text ORDER BY 1") == \
            [(1,), (2,), (3,)]

        # microseconds under timestamp.granularity, and the kinds Connect has no type for,
        # each as the exact text PostgreSQL prints (read back from the copy's text columns)
        wait_until(lambda: {r[0]: r[1:] for r in rows(
                       postgres_db, "SELECT id, at, iv, j, jb, u FROM kinds_copy")} == KINDS_TEXT,
                   timeout=180, interval=0.5, message="the kinds as their exact text",
                   on_timeout=lambda: rows(postgres_db, "SELECT * FROM kinds_copy"))
        text_columns = postgres_db.query(
            "SELECT column_name FROM information_schema.columns WHERE table_name = "
            "'kinds_copy' AND data_type = 'text' ORDER BY column_name")
        assert [c for (c,) in text_columns] == ["iv", "j", "jb", "u"]
        [(at_type,)] = postgres_db.query(
            "SELECT data_type FROM information_schema.columns WHERE table_name = "
            "'kinds_copy' AND column_name = 'at'")
        assert at_type == "timestamp without time zone"  # as the source's column

        wait_until(lambda: dlq_offsets(w, "maria") == MARIADB_REFUSES, timeout=180,
                   message="NaN, the infinities and the too-wide decimal in MariaDB's DLQ")
        got = {i: (x, n) for i, x, n in rows(mariadb_db, "SELECT id, x, n FROM readings")}
        assert got == {i: READINGS[i] for i in range(len(READINGS)) if i not in MARIADB_REFUSES}
        dead = json.loads(w.kctl("dlq", "show", "maria", "-o", "json").stdout)
        assert any("MariaDB cannot store NaN" in r["message"] for r in dead), dead
        assert any("does not fit" in r["message"] for r in dead), dead
        # each rejected value whole (its schema alone is longer than 80 characters), and
        # its payload, what was rejected, visible beside it
        for r in dead:
            offset = int(r["offset"])
            assert r["value"] == wire[offset].decode()
            assert len(r["value"]) > 80 and '"payload":' in r["value"]
            payload = json.loads(r["value_payload"])
            assert payload["id"] == offset and set(payload) == {"id", "x", "n"}

        wait_until(lambda: dlq_offsets(w, "files") == TOO_WIDE, timeout=180,
                   message="the too-wide decimal in FileSink's DLQ")

        def written() -> dict[int, tuple[float, Any]]:
            out = {}
            for f in output_files(files, ".parquet"):
                with contextlib.suppress(FileNotFoundError):  # replaced while listed
                    for r in pq.read_table(f).to_pylist():
                        out[r["id"]] = (r["x"], r["n"])
            return out

        wait_until(lambda: len(written()) == len(READINGS) - len(TOO_WIDE), timeout=120,
                   message="every other reading in the files", on_timeout=written)
        for i, (x, n) in written().items():
            assert n == READINGS[i][1]
            assert (math.isnan(x) and math.isnan(READINGS[i][0])) or (
                x == READINGS[i][0] and math.copysign(1, x) == math.copysign(1, READINGS[i][0]))
        for name in ("src", "copy", "kinds", "kinds-copy", "maria", "files"):
            assert [t["state"] for t in w.status(name)["tasks"]] == ["RUNNING"], name
    finally:
        w.stop()
