"""JdbcSink stories on real databases (SQLite in a file, PostgreSQL and MariaDB on loopback):
records become rows, upserts keep the last record of a key, tombstones delete, tables are
created and widened, names stay names, rows the database rejects reach the DLQ with its
message while the rest of their batch is written, and in exactly_once mode a task resumes
from the offsets the database holds, so no row is lost or written twice."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from file_support import SinkContext

from kctl.api import (
    OffsetAndMetadata,
    RetriableError,
    SchemaBuilder,
    SinkBatch,
    SinkRecord,
    Struct,
    TopicPartition,
)
from kctl.api.arrow import connect_to_arrow_type
from kctl.api.data import (
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_BOOLEAN_SCHEMA,
    OPTIONAL_BYTES_SCHEMA,
    OPTIONAL_FLOAT64_SCHEMA,
    OPTIONAL_INT8_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    date_schema,
    decimal_schema,
    timestamp_schema,
)
from kctl.connectors.jdbc import JdbcSinkConnector, JdbcSinkTask
from kctl.connectors.jdbc._common import dialect_for
from kctl.connectors.jdbc.sink import JdbcSinkError, RowRejected
from kctl.errors import ValidationError

TOPIC = "orders"
TP = TopicPartition(TOPIC, 0)
VALUE = (SchemaBuilder.struct().name("Order").field("id", INT64_SCHEMA)
         .field("name", OPTIONAL_STRING_SCHEMA).field("qty", OPTIONAL_INT32_SCHEMA).build())
KEY = SchemaBuilder.struct().name("OrderKey").field("id", INT64_SCHEMA).build()


class Reporter:
    """The errant record reporter: what the runtime would dead-letter."""

    def __init__(self) -> None:
        self.reported: list[tuple[SinkRecord, BaseException]] = []

    def report(self, record: SinkRecord, error: BaseException) -> None:
        self.reported.append((record, error))

    @property
    def offsets(self) -> list[int]:
        return sorted(r.kafka_offset for r, _ in self.reported)


class Context(SinkContext):
    def __init__(self, engine: Any, configs: dict[str, str], reporter: Reporter | None) -> None:
        super().__init__(engine, configs)
        self.reporter = reporter
        self.timeouts: list[int] = []

    def errant_record_reporter(self) -> Reporter | None:  # type: ignore[override]
        return self.reporter

    def timeout(self, timeout_ms: int) -> None:
        self.timeouts.append(timeout_ms)


def start_task(engine: Any, db: Any, reporter: Reporter | None = None,
               **props: str) -> tuple[JdbcSinkTask, Context]:
    props = {"name": "jdbc-sink", "topics": TOPIC, "connection.url": db.url,
             "auto.create": "true", **props}
    task = JdbcSinkTask()
    ctx = Context(engine, props, reporter)
    task.initialize(ctx)
    task.start(props)
    return task, ctx


def rec(offset: int, id_: int | None = None, name: str | None = "n", qty: int | None = 1, *,
        key: Any = ..., tombstone: bool = False, topic: str = TOPIC,
        partition: int = 0) -> SinkRecord:
    id_ = offset if id_ is None else id_
    value = None if tombstone else Struct(VALUE, {"id": id_, "name": name, "qty": qty})
    k = Struct(KEY, {"id": id_}) if key is ... else key
    return SinkRecord(topic, partition, KEY if isinstance(k, Struct) else None, k,
                      None if tombstone else VALUE, value, kafka_offset=offset)


def batch(offsets: Sequence[int], values: list[dict[str, Any]], schema=VALUE,
          tp: TopicPartition = TP) -> SinkBatch:
    """Records as the runtime hands keyless ones over: one Arrow column."""
    arr = pa.array(values, connect_to_arrow_type(schema))
    return SinkBatch(tp.topic, tp.partition, list(offsets), [0] * len(offsets),
                     [()] * len(offsets), schema, arr)


def q(db: Any, name: str) -> str:
    return dialect_for(db.url).quote_identifier(name)


def rows(db: Any, table: str = TOPIC, cols: str = "id, name, qty",
         order: str = "id") -> list[tuple]:
    return [tuple(r) for r in db.query(f"SELECT {cols} FROM {q(db, table)} ORDER BY {order}")]


def current(upto: int, tp: TopicPartition = TP) -> dict[TopicPartition, OffsetAndMetadata]:
    return {tp: OffsetAndMetadata(upto)}


# --- writes ---------------------------------------------------------------------------------


TYPED = (SchemaBuilder.struct().field("id", INT64_SCHEMA).field("name", OPTIONAL_STRING_SCHEMA)
         .field("price", decimal_schema(2, True)).field("day", date_schema(True))
         .field("at", timestamp_schema(True)).field("ok", OPTIONAL_BOOLEAN_SCHEMA)
         .field("raw", OPTIONAL_BYTES_SCHEMA).field("ratio", OPTIONAL_FLOAT64_SCHEMA)
         .field("tiny", OPTIONAL_INT8_SCHEMA).build())
MOMENT = dt.datetime(2024, 5, 1, 12, 30, 15, 250000, tzinfo=dt.UTC)


def typed_value(i: int) -> dict[str, Any]:
    return {"id": i, "name": f"név {i}", "price": decimal.Decimal("12.34"),
            "day": dt.date(2024, 5, 1), "at": MOMENT, "ok": i % 2 == 0, "raw": b"\x00\xff",
            "ratio": 0.25, "tiny": -3}


def normalise(dialect: str, row: tuple) -> tuple:
    """What each database hands back for TYPED, in Python terms the test compares."""
    id_, name, price, day, at, ok, raw, ratio, tiny = row
    if dialect == "sqlite":  # xerial stores dates and timestamps as epoch milliseconds
        day = dt.datetime.fromtimestamp(day / 1000, dt.UTC).date()
        at = dt.datetime.fromtimestamp(at / 1000, dt.UTC)
        price = decimal.Decimal(str(price))
    if isinstance(at, dt.datetime) and at.tzinfo is None:
        at = at.replace(tzinfo=dt.UTC)
    return (id_, name, decimal.Decimal(price).quantize(decimal.Decimal("0.01")), day,
            at.astimezone(dt.UTC), bool(ok), bytes(raw), ratio, tiny)


def test_insert_creates_the_table_and_writes_every_type(engine, jdbc_db):
    """Records (put) and columns (put_batch) write the same rows."""
    task, _ = start_task(engine, jdbc_db)
    task.open([TP])
    task.put([SinkRecord(TOPIC, 0, None, None, TYPED, Struct(TYPED, typed_value(i)),
                         kafka_offset=i) for i in range(3)])
    task.put_batch(batch(range(3, 6), [typed_value(i) for i in range(3, 6)], TYPED))
    task.put([SinkRecord(TOPIC, 0, None, None, TYPED, Struct(TYPED, {"id": 6}), kafka_offset=6)])
    assert task.pre_commit(current(7)) == current(7)
    assert task.batches_written == 1, "one table, one schema: one batch"
    dialect = dialect_for(jdbc_db.url).name
    cols = "id, name, price, day, at, ok, raw, ratio, tiny"
    got = rows(jdbc_db, cols=cols)
    moment = MOMENT if dialect != "sqlite" else MOMENT.replace(microsecond=250000)
    for i, row in enumerate(got[:6]):
        v = typed_value(i)
        assert normalise(dialect, row) == (i, v["name"], v["price"], v["day"], moment,
                                           v["ok"], v["raw"], 0.25, -3)
    assert got[6] == (6, None, None, None, None, None, None, None, None)
    task.stop()


def test_upsert_keeps_the_last_record_of_each_key_and_tombstones_delete(engine, jdbc_db):
    task, _ = start_task(engine, jdbc_db, **{"insert.mode": "upsert", "pk.mode": "record_key",
                                             "delete.enabled": "true"})
    task.open([TP])
    task.put([rec(0, 1, "a"), rec(1, 2, "b"), rec(2, 3, "c"), rec(3, 2, "b2"),
              rec(4, 3, tombstone=True), rec(5, 4, "d"), rec(6, 4, tombstone=True),
              rec(7, 4, "d2"), rec(8, 9, tombstone=True)])  # 9 never existed
    task.flush({})
    assert rows(jdbc_db) == [(1, "a", 1), (2, "b2", 1), (4, "d2", 1)]
    # a later batch updates, deletes and inserts again
    task.put([rec(9, 1, "a2", 5), rec(10, 2, tombstone=True), rec(11, 3, "c3")])
    task.flush({})
    assert rows(jdbc_db) == [(1, "a2", 5), (3, "c3", 1), (4, "d2", 1)]
    # a batch of tombstones alone
    task.put([rec(12, 1, tombstone=True), rec(13, 3, tombstone=True)])
    task.flush({})
    assert rows(jdbc_db) == [(4, "d2", 1)]
    task.stop()


def test_update_changes_only_rows_that_exist(engine, jdbc_db):
    jdbc_db.execute(f"CREATE TABLE {q(jdbc_db, TOPIC)} (id BIGINT PRIMARY KEY, "
                    "name VARCHAR(20), qty INTEGER)",
                    f"INSERT INTO {q(jdbc_db, TOPIC)} VALUES (1, 'a', 1), (2, 'b', 2)")
    task, _ = start_task(engine, jdbc_db, **{"insert.mode": "update", "pk.mode": "record_value",
                                             "pk.fields": "id", "auto.create": "false"})
    task.open([TP])
    task.put_batch(batch(range(4), [{"id": 2, "name": "b2", "qty": 20},
                                    {"id": 3, "name": "c", "qty": 3},
                                    {"id": 1, "name": "a2", "qty": None},
                                    {"id": 2, "name": "b3", "qty": 21}]))
    task.flush({})
    assert rows(jdbc_db) == [(1, "a2", None), (2, "b3", 21)]
    task.stop()


def test_keyed_batches_upsert_by_their_record_keys_as_columns(engine, postgres_db):
    """pk.mode=record_key with keys in the batch (JdbcSource records through a worker):
    the key column comes from the keys, the latest record of a key wins, and no record is
    built one by one."""
    task, _ = start_task(engine, postgres_db, **{"insert.mode": "upsert",
                                                 "pk.mode": "record_key"})
    task.open([TP])

    def one_by_one(records):
        raise AssertionError("a keyed batch went record by record")

    task.put = one_by_one  # type: ignore[method-assign]
    keyed = batch(range(4), [{"id": 100 + i, "name": f"v{i}", "qty": i} for i in range(4)])
    keys = pa.array([{"id": k} for k in (1, 2, 1, 3)], connect_to_arrow_type(KEY))
    task.put_batch(SinkBatch(keyed.topic, keyed.partition, keyed.offsets, keyed.timestamps,
                             keyed.headers, keyed.value_schema, keyed.values, KEY, keys))
    task.flush({})
    assert rows(postgres_db) == [(1, "v2", 2), (2, "v1", 1), (3, "v3", 3)]
    task.stop()


def test_insert_mode_applies_deletes_and_inserts_in_their_order(engine, jdbc_db):
    """Without upsert's one-record-per-key, a key deleted and inserted again in one batch
    must end up inserted (and inserted then deleted must end up gone)."""
    task, _ = start_task(engine, jdbc_db, **{"pk.mode": "record_key", "delete.enabled": "true"})
    task.open([TP])
    task.put([rec(0, 1, "a"), rec(1, 2, "b")])
    task.flush({})
    task.put([rec(2, 1, tombstone=True), rec(3, 1, "a-again"), rec(4, 3, "c"),
              rec(5, 2, tombstone=True), rec(6, 3, tombstone=True)])
    task.flush({})
    assert rows(jdbc_db) == [(1, "a-again", 1)]
    task.stop()


def test_kafka_coordinates_as_the_key_and_a_field_whitelist(engine, sqlite_db):
    task, _ = start_task(engine, sqlite_db, **{"pk.mode": "kafka", "fields.whitelist": "name",
                                               "insert.mode": "upsert"})
    task.open([TP, TopicPartition(TOPIC, 1)])
    task.put([rec(0, 10, "a"), rec(1, 11, "b"), rec(0, 12, "c", partition=1)])
    task.put_batch(batch([2], [{"id": 13, "name": "d", "qty": 1}]))
    task.flush({})
    assert [tuple(r) for r in sqlite_db.query(
        "SELECT __connect_topic, __connect_partition, __connect_offset, name FROM orders "
        "ORDER BY 2, 3")] == [(TOPIC, 0, 0, "a"), (TOPIC, 0, 1, "b"), (TOPIC, 0, 2, "d"),
                              (TOPIC, 1, 0, "c")]
    cols = [r[1] for r in sqlite_db.query("PRAGMA table_info(orders)")]
    assert cols == ["__connect_topic", "__connect_partition", "__connect_offset", "name"]
    pk = [r[1] for r in sqlite_db.query("PRAGMA table_info(orders)") if r[5]]
    assert pk == ["__connect_topic", "__connect_partition", "__connect_offset"]
    task.stop()


def test_a_primitive_key_names_its_column(engine, postgres_db):
    task, _ = start_task(engine, postgres_db, **{"pk.mode": "record_key", "pk.fields": "order_id",
                                                 "insert.mode": "upsert"})
    task.open([TP])
    task.put([SinkRecord(TOPIC, 0, STRING_SCHEMA, "k1", VALUE, Struct(VALUE, {"id": 1}),
                         kafka_offset=0),
              SinkRecord(TOPIC, 0, STRING_SCHEMA, "k1", VALUE, Struct(VALUE, {"id": 2}),
                         kafka_offset=1)])
    task.flush({})
    assert [tuple(r) for r in postgres_db.query("SELECT order_id, id FROM orders")] == [("k1", 2)]
    task.stop()


# --- tables ---------------------------------------------------------------------------------

WIDER = (SchemaBuilder.struct().name("Order").field("id", INT64_SCHEMA)
         .field("name", OPTIONAL_STRING_SCHEMA).field("qty", OPTIONAL_INT32_SCHEMA)
         .field("note", OPTIONAL_STRING_SCHEMA).build())


def test_auto_evolve_adds_a_nullable_column_for_a_new_optional_field(engine, jdbc_db):
    task, _ = start_task(engine, jdbc_db, **{"auto.evolve": "true"})
    task.open([TP])
    task.put([rec(0, 1, "a")])
    task.put([SinkRecord(TOPIC, 0, None, None, WIDER, Struct(WIDER, {"id": 2, "note": "new"}),
                         kafka_offset=1)])
    task.flush({})
    assert rows(jdbc_db, cols="id, name, note") == [(1, "a", None), (2, None, "new")]
    task.stop()


def test_without_auto_evolve_or_auto_create_the_task_fails_naming_what_is_missing(
        engine, jdbc_db):
    task, _ = start_task(engine, jdbc_db, **{"auto.create": "false"})
    task.open([TP])
    task.put([rec(0)])
    with pytest.raises(JdbcSinkError, match=r"Table orders does not exist and auto\.create is "
                                            r"false"):
        task.flush({})
    task.stop()
    task, _ = start_task(engine, jdbc_db)
    task.open([TP])
    task.put([rec(0)])
    task.put([SinkRecord(TOPIC, 0, None, None, WIDER, Struct(WIDER, {"id": 2}), kafka_offset=1)])
    with pytest.raises(JdbcSinkError, match=r"no column for note and auto\.evolve is false"):
        task.flush({})
    task.stop()
    required = SchemaBuilder.struct().field("id", INT64_SCHEMA).field("must", INT32_SCHEMA).build()
    task, _ = start_task(engine, jdbc_db, **{"auto.evolve": "true"})
    task.open([TP])
    task.put([SinkRecord(TOPIC, 0, None, None, required, Struct(required, {"id": 3, "must": 1}),
                         kafka_offset=2)])
    with pytest.raises(JdbcSinkError, match="must, a required field without a default"):
        task.flush({})
    task.stop()


SQL_NAME = 'x"; DROP TABLE victim; --'
ODD = "b`q'%s"


def test_names_like_sql_stay_names(engine, jdbc_db):
    """A topic, table format and fields named like SQL (quotes of every dialect, a %
    that drivers read as a placeholder) cannot inject: they become those exact names."""
    odd = (SchemaBuilder.struct().field("id", INT64_SCHEMA).field(SQL_NAME, OPTIONAL_STRING_SCHEMA)
           .field(ODD, OPTIONAL_INT32_SCHEMA).build())
    jdbc_db.execute("CREATE TABLE victim (id INTEGER)", "INSERT INTO victim VALUES (1)")
    topic = "t`x'; DROP TABLE victim; --"
    task, _ = start_task(engine, jdbc_db, **{"table.name.format": 'k"${topic}',
                                             "insert.mode": "upsert", "pk.mode": "record_value",
                                             "pk.fields": "id", "auto.evolve": "true"})
    tp = TopicPartition(topic, 0)
    task.open([tp])
    task.put([SinkRecord(topic, 0, None, None, odd, Struct(odd, {"id": i, SQL_NAME: f"v{i}",
                                                                 ODD: i}), kafka_offset=i)
              for i in range(3)])
    task.put([SinkRecord(topic, 0, None, None, odd, Struct(odd, {"id": 1, SQL_NAME: "w"}),
                         kafka_offset=3)])
    task.flush({})
    table = 'k"' + topic
    cols = f"id, {q(jdbc_db, SQL_NAME)}, {q(jdbc_db, ODD)}"
    if dialect_for(jdbc_db.url).name != "sqlite":
        cols = cols.replace("%", "%%")  # psycopg and PyMySQL read % as a placeholder
    assert rows(jdbc_db, table, cols=cols) == [(0, "v0", 0), (1, "w", None), (2, "v2", 2)]
    assert jdbc_db.query("SELECT id FROM victim") == [(1,)]
    task.stop()


# --- errors ---------------------------------------------------------------------------------


def constrained_table(db: Any) -> None:
    """id unique, qty >= 0, name NOT NULL and at most 8 characters."""
    sqlite = dialect_for(db.url).name == "sqlite"
    length = "CHECK (length(name) <= 8)" if sqlite else ""
    db.execute(f"CREATE TABLE {q(db, TOPIC)} (id BIGINT PRIMARY KEY, "
               f"name {'TEXT' if sqlite else 'VARCHAR(8)'} NOT NULL {length}, "
               "qty INTEGER CHECK (qty >= 0))")


def test_rows_the_database_rejects_go_to_the_dlq_and_the_rest_is_written(engine, jdbc_db):
    constrained_table(jdbc_db)
    reporter = Reporter()
    task, _ = start_task(engine, jdbc_db, reporter, **{"auto.create": "false"})
    task.open([TP])
    n = 3000
    bad = {17: "duplicate", 600: "negative", 1501: "long", 2999: "null", 2000: "negative"}
    records = []
    for i in range(n):
        kind = bad.get(i)
        records.append(rec(i, 5 if kind == "duplicate" else i,
                           None if kind == "null" else ("far too long" if kind == "long" else "ok"),
                           -1 if kind == "negative" else 1))
    task.put(records[:1000])
    task.put_batch(batch(range(1000, n), [
        {"id": r.value["id"], "name": r.value.get("name"), "qty": r.value["qty"]}
        for r in records[1000:]]))
    task.flush({})
    assert reporter.offsets == sorted(bad)
    assert all(isinstance(e, RowRejected) for _, e in reporter.reported)
    messages = {r.kafka_offset: str(e).lower() for r, e in reporter.reported}
    assert any(w in messages[17] for w in ("duplicate", "unique")), messages[17]
    assert any(w in messages[600] for w in ("check", "constraint")), messages[600]
    assert any(w in messages[1501] for w in ("too long", "check", "constraint")), messages[1501]
    assert any(w in messages[2999] for w in ("null",)), messages[2999]
    assert [r[0] for r in rows(jdbc_db)] == sorted(set(range(n)) - set(bad))
    assert task.rows_rejected == len(bad)
    task.stop()


def test_a_rejected_last_record_of_a_key_falls_back_to_its_latest_accepted_one(
        engine, jdbc_db):
    """An upsert batch writes one record per key; when the database rejects it, the key's
    earlier records are not lost: the latest one it accepts is written, as record-by-record
    upserts would have left the row."""
    constrained_table(jdbc_db)
    reporter = Reporter()
    task, _ = start_task(engine, jdbc_db, reporter, **{
        "auto.create": "false", "insert.mode": "upsert", "pk.mode": "record_key"})
    task.open([TP])
    task.put([rec(0, 1, "old", 1)])
    task.flush({})
    task.put([rec(1, 1, "a", 2), rec(2, 1, "b", -1), rec(3, 1, "c", -2),  # 1: back to a
              rec(4, 2, "x", -1), rec(5, 2, "y", -1),  # 2: nothing accepted
              rec(6, 3, "p", 1), rec(7, 3, "q", 3),  # 3: q wins
              rec(8, 1, "too long a name", 9)])  # 1's last record, rejected too
    task.flush({})
    assert rows(jdbc_db) == [(1, "a", 2), (3, "q", 3)]
    assert reporter.offsets == [2, 3, 4, 5, 8]
    task.stop()


def test_without_a_dlq_a_rejected_row_fails_the_task_and_its_batch_writes_nothing(
        engine, jdbc_db):
    constrained_table(jdbc_db)
    task, _ = start_task(engine, jdbc_db, None, **{"auto.create": "false"})
    task.open([TP])
    task.put([rec(0), rec(1, qty=-5), rec(2)])
    with pytest.raises(JdbcSinkError, match=r"errors\.tolerance=all") as e:
        task.pre_commit(current(3))
    assert "\n" not in str(e.value)
    assert rows(jdbc_db) == []
    task.stop()


def test_records_that_cannot_be_rows_are_reported_when_they_arrive(engine, sqlite_db):
    reporter = Reporter()
    task, _ = start_task(engine, sqlite_db, reporter, **{"pk.mode": "record_value",
                                                         "pk.fields": "id"})
    task.open([TP])
    task.put([rec(0), rec(1, tombstone=True), SinkRecord(TOPIC, 0, None, None, None,
                                                         {"id": 2}, kafka_offset=2), rec(3)])
    task.put_batch(batch([4, 5], [{"id": None, "name": "x", "qty": 1},
                                  {"id": 5, "name": "y", "qty": 1}],
                         SchemaBuilder.struct().name("Order").field("id", OPTIONAL_INT64_SCHEMA)
                         .field("name", OPTIONAL_STRING_SCHEMA)
                         .field("qty", OPTIONAL_INT32_SCHEMA).build()))
    task.flush({})
    assert reporter.offsets == [1, 2, 4]
    messages = [str(e) for _, e in sorted(reporter.reported, key=lambda x: x[0].kafka_offset)]
    assert "tombstone" in messages[0] and "delete.enabled is false" in messages[0]
    assert "struct values with a schema" in messages[1]
    assert "primary key (id)" in messages[2]
    assert [r[0] for r in rows(sqlite_db)] == [0, 3, 5]
    task.stop()


def connections_of(db: Any) -> list[int]:
    """Ids of the server connections to the test's database other than the asker's."""
    if db.server.kind == "postgresql":
        return [r[0] for r in db.query(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()")]
    return [r[0] for r in db.query(
        "SELECT id FROM information_schema.processlist WHERE db = DATABASE() "
        "AND id <> CONNECTION_ID()")]


def kill_connections(db: Any) -> None:
    for pid in connections_of(db):
        db.execute(f"SELECT pg_terminate_backend({pid})" if db.server.kind == "postgresql"
                   else f"KILL {pid}")


@pytest.mark.parametrize("server_db", ["postgres_db", "mariadb_db"])
def test_a_lost_connection_is_retried_with_backoff_and_nothing_is_written_twice(
        engine, request, server_db):
    db = request.getfixturevalue(server_db)
    task, ctx = start_task(engine, db, **{"batch.size": "3", "retry.backoff.ms": "5"})
    task.open([TP])
    task.put([rec(0), rec(1), rec(2)])  # the first batch: table and staging exist
    assert rows(db) == [(0, "n", 1), (1, "n", 1), (2, "n", 1)]
    kill_connections(db)
    records = [rec(3), rec(4), rec(5), rec(6)]
    with pytest.raises(RetriableError, match="will retry"):
        task.put(records)  # the runtime waits retry.backoff.ms, then delivers them again
    assert ctx.timeouts == [5]
    task.put(records)
    assert task.pre_commit(current(7)) == current(7)
    assert [r[0] for r in rows(db)] == list(range(7))
    # columns: the write of the first full piece fails, the batch comes again
    kill_connections(db)
    columns = batch(range(7, 14), [{"id": i, "name": "n", "qty": 1} for i in range(7, 14)])
    with pytest.raises(RetriableError):
        task.put_batch(columns)
    task.put_batch(columns)
    assert task.pre_commit(current(14)) == current(14)
    assert [r[0] for r in rows(db)] == list(range(14))
    task.stop()


def test_retries_run_out_after_max_retries(engine, postgres_db):
    task, _ = start_task(engine, postgres_db, **{"batch.size": "1", "max.retries": "1"})
    task.open([TP])
    task.put([rec(0)])
    task._db.url = task._db.url.replace(f":{postgres_db.server.port}/", ":1/")  # the server is gone
    kill_connections(postgres_db)
    with pytest.raises(RetriableError):
        task.put([rec(1)])
    with pytest.raises(JdbcSinkError, match="failed 2 times in a row") as e:
        task.put([rec(1)])
    assert "\n" not in str(e.value)
    task.stop()


def test_an_unreachable_database_a_wrong_login_and_a_missing_driver_are_one_line(
        engine, postgres_db, mariadb_db, monkeypatch):
    from support.broker import free_port

    url = f"jdbc:postgresql://127.0.0.1:{free_port()}/x?user=u&password=s3cret"
    with pytest.raises(JdbcSinkError) as e:
        start_task(engine, postgres_db, **{"connection.url": url, "connection.attempts": "2",
                                           "connection.backoff.ms": "10"})
    assert str(e.value).startswith("Cannot connect to jdbc:postgresql://127.0.0.1:")
    assert "s3cret" not in str(e.value) and "\n" not in str(e.value)
    assert "refused" in str(e.value) or "failed" in str(e.value)

    url = mariadb_db.url + "&password=wr0ng"
    with pytest.raises(JdbcSinkError, match="Access denied") as e:
        start_task(engine, mariadb_db, **{"connection.url": url})
    assert "wr0ng" not in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(JdbcSinkError, match="Access denied") as e:
        start_task(engine, mariadb_db, **{"connection.password": "wr0ng"})
    assert "wr0ng" not in str(e.value)

    missing = postgres_db.url.rsplit("/", 1)[0] + "/kctl_no_such_db?user=postgres"
    with pytest.raises(JdbcSinkError, match='database "kctl_no_such_db" does not exist'):
        start_task(engine, postgres_db, **{"connection.url": missing})

    # a driver class the JVM cannot load, as when the driver jar is missing
    import dataclasses

    import kctl.connectors.jdbc.sink as sink

    real = sink.dialect_for(postgres_db.url)
    gone = dataclasses.replace(real, driver_class="org.example.NoSuchDriver")
    monkeypatch.setattr(sink, "dialect_for", lambda url, **kw: gone)
    with pytest.raises(JdbcSinkError) as e:
        start_task(engine, postgres_db, **{"staging.method": "spark"})
    assert "\n" not in str(e.value)
    assert "org.example.NoSuchDriver" in str(e.value)
    assert "apt-get install libpostgresql-jdbc-java" in str(e.value)
    # PostgreSQL's COPY stages without Spark's JDBC writer: no driver jar needed
    start_task(engine, postgres_db)[0].stop()


class NoSpark:
    """An engine that fails the story if a task asks it for Spark."""

    def spark(self) -> Any:
        raise AssertionError("the task asked for Spark")


def test_postgresql_batches_are_staged_by_copy_without_spark(postgres_db):
    """COPY of the batch's columns instead of a Spark job per batch: a PostgreSQL sink
    starts, writes, upserts and stops without a SparkSession."""
    task, _ = start_task(NoSpark(), postgres_db, **UPSERT_BY_ID)
    task.open([TP])
    task.put([rec(i, id_=i % 3, name=f"n{i}", qty=i) for i in range(7)])
    task.flush({})
    assert postgres_db.query(f"SELECT id, name, qty FROM {TOPIC} ORDER BY id") == [
        (0, "n6", 6), (1, "n4", 4), (2, "n5", 5)]
    task.stop()

    # plain inserts COPY straight into the table: no staging table is made for them
    task, _ = start_task(NoSpark(), postgres_db, **{"table.name.format": "plain"})
    task.open([TP])
    task.put([rec(i) for i in range(5)])
    task.flush({})
    assert [r[0] for r in postgres_db.query("SELECT id FROM plain ORDER BY id")] == [
        0, 1, 2, 3, 4]
    assert staging_tables(postgres_db) == []
    task.stop()

    with pytest.raises(AssertionError, match="asked for Spark"):
        start_task(NoSpark(), postgres_db, **{"staging.method": "spark"})


UPSERT_BY_ID = {"insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id"}


def staging_tables(db: Any) -> list[str]:
    if db.server.kind == "postgresql":
        q_ = ("SELECT table_name FROM information_schema.tables WHERE table_schema = "
              "current_schema() AND table_name LIKE 'kctl%%stage%%' ORDER BY 1")
    else:
        q_ = ("SELECT table_name FROM information_schema.tables WHERE table_schema = "
              "DATABASE() AND table_name LIKE 'kctl%%stage%%' ORDER BY 1")
    return [r[0] for r in db.query(q_)]


@pytest.mark.parametrize("server_db", ["postgres_db", "mariadb_db"])
def test_staging_tables_of_dead_tasks_are_swept_and_live_ones_kept(engine, request, server_db):
    db = request.getfixturevalue(server_db)
    dead, _ = start_task(engine, db, **UPSERT_BY_ID)  # upserts go through staging
    dead.open([TP])
    dead.put([rec(0)])
    dead.flush({})
    other_table, _ = start_task(engine, db, **{"table.name.format": "other", **UPSERT_BY_ID})
    other_table.open([TP])
    other_table.put([rec(0)])
    other_table.flush({})
    alive, _ = start_task(engine, db, **UPSERT_BY_ID)
    alive.open([TP])
    alive.put([rec(1)])
    alive.flush({})
    assert len(staging_tables(db)) == 3
    dead._db.conn.close()  # SIGKILL: stop() never runs, the session (and its lock) ends
    late, _ = start_task(engine, db, **UPSERT_BY_ID)
    late.open([TP])
    late.put([rec(2)])
    late.flush({})
    kept = staging_tables(db)
    assert len(kept) == 3, "the dead task's staging went, the live ones stayed"
    assert all(st.name in kept for t in (alive, late, other_table)
               for st in t._writer.staging.values())
    for t in (alive, late, other_table):
        t.stop()
    assert staging_tables(db) == [], "stop() drops a task's staging tables"
    assert [r[0] for r in rows(db)] == [0, 1, 2]


def test_the_connector_validates_combinations():
    c = JdbcSinkConnector()
    errors = {v.name: v.errors for v in c.validate({
        "connection.url": "jdbc:sqlite:/tmp/x.db", "delete.enabled": "true",
        "insert.mode": "upsert"}) if v.errors}
    assert "needs pk.mode=record_key" in errors["delete.enabled"][0]
    assert "insert.mode=upsert needs a primary key" in errors["pk.mode"][0]
    errors = {v.name: v.errors for v in c.validate({
        "connection.url": "jdbc:sqlite:/tmp/x.db", "pk.mode": "kafka",
        "pk.fields": "a,b"}) if v.errors}
    assert "three column names" in errors["pk.fields"][0]
    with pytest.raises(JdbcSinkError, match=r"delete\.enabled"):
        c.start({"connection.url": "jdbc:sqlite:/tmp/x.db", "delete.enabled": "true"})
    with pytest.raises(ValidationError, match=r"insert\.mode"):
        c.start({"connection.url": "jdbc:sqlite:/tmp/x.db", "insert.mode": "merge"})
    c.start({"connection.url": "jdbc:sqlite:/tmp/x.db", "pk.mode": "record_key",
             "delete.enabled": "true"})
    assert len(c.task_configs(3)) == 3


# --- exactly once ---------------------------------------------------------------------------


def eos(engine: Any, db: Any, name: str, **props: str) -> tuple[JdbcSinkTask, Context]:
    return start_task(engine, db, Reporter(), **{"name": name,
                                                 "delivery.guarantee": "exactly_once", **props})


def test_exactly_once_resumes_from_the_offsets_in_the_database(engine, jdbc_db):
    """Insert mode into a table without a key: only the offsets in the database keep
    a redelivered record from being written twice."""
    name = f"eos-{uuid.uuid4().hex[:6]}"
    other = TopicPartition(TOPIC, 1)
    task, ctx = eos(engine, jdbc_db, name, **{"batch.size": "100"})
    task.open([TP, other])
    assert ctx.rewinds == {}
    task.put([rec(i) for i in range(250)])  # two batches of 100 written, 50 buffered
    task.put([rec(i, 1000 + i, partition=1) for i in range(30)])
    assert len(rows(jdbc_db)) == 200
    # crash: the consumer committed nothing, the last 50 (and partition 1) are lost in memory
    task2, ctx2 = eos(engine, jdbc_db, name, **{"batch.size": "100"})
    task2.open([TP, other])
    assert ctx2.rewinds == {TP: 200}, "partition 1 has no offsets yet: no rewind"
    # the consumer redelivers from its own committed offset (0) until the rewind takes
    task2.put([rec(i) for i in range(0, 260)])
    task2.put([rec(i, 1000 + i, partition=1) for i in range(30)])
    committed = task2.pre_commit({TP: OffsetAndMetadata(260), other: OffsetAndMetadata(30)})
    assert committed == {TP: OffsetAndMetadata(260), other: OffsetAndMetadata(30)}
    ids = [r[0] for r in rows(jdbc_db)]
    assert ids == list(range(260)) + list(range(1000, 1030))
    held = jdbc_db.query(f"SELECT topic, {q(jdbc_db, 'partition')}, next_offset FROM "
                         f"__kctl_sink_offsets WHERE connector = '{name}' ORDER BY 2")
    assert [tuple(r) for r in held] == [(TOPIC, 0, 260), (TOPIC, 1, 30)]
    task.stop()
    task2.stop()


class Crash(BaseException):
    """The process dies here (not an Exception: nothing in the task may handle it)."""


def test_exactly_once_a_crash_before_the_commit_leaves_nothing_behind(engine, jdbc_db):
    name = f"eos-{uuid.uuid4().hex[:6]}"
    task, _ = eos(engine, jdbc_db, name)
    task.open([TP])
    task.put([rec(i) for i in range(10)])
    task.flush({})
    conn = task._db.connect()  # the crash comes right before the transaction commits

    class Dying:
        def __getattr__(self, attr: str) -> Any:
            return getattr(conn, attr)

        def commit(self) -> None:
            raise Crash()
    task._db.conn = Dying()
    task.put([rec(i) for i in range(10, 25)])
    with pytest.raises(Crash):
        task.flush({})
    conn.rollback()
    assert len(rows(jdbc_db)) == 10, "staged, never committed"
    task2, ctx2 = eos(engine, jdbc_db, name)
    task2.open([TP])
    assert ctx2.rewinds == {TP: 10}
    task2.put([rec(i) for i in range(10, 30)])
    assert task2.pre_commit(current(30)) == current(30)
    assert [r[0] for r in rows(jdbc_db)] == list(range(30))
    task2.stop()
    conn.close()


def test_exactly_once_fences_a_task_that_lost_its_partition(engine, sqlite_db):
    """Two tasks believe they own partition 0 (the old one has not noticed a rebalance):
    the one whose view of the offsets is stale cannot commit, and stops."""
    name = f"eos-{uuid.uuid4().hex[:6]}"
    zombie, _ = eos(engine, sqlite_db, name)
    zombie.open([TP])
    owner, _ = eos(engine, sqlite_db, name)
    owner.open([TP])
    owner.put([rec(i) for i in range(5)])
    owner.flush({})
    zombie.put([rec(i) for i in range(8)])
    with pytest.raises(JdbcSinkError, match=r"Another writer moved the offsets of orders-0 .*"
                                            r"saw \[None\], the database holds \[5\]"):
        zombie.pre_commit(current(8))
    assert [r[0] for r in rows(sqlite_db)] == list(range(5))
    owner.put([rec(i) for i in range(5, 9)])
    assert owner.pre_commit(current(9)) == current(9)
    assert [r[0] for r in rows(sqlite_db)] == list(range(9))
    zombie.stop()
    owner.stop()


def test_exactly_once_offsets_move_past_records_that_wrote_no_row(engine, postgres_db):
    name = f"eos-{uuid.uuid4().hex[:6]}"
    task, _ = eos(engine, postgres_db, name)
    task.open([TP])
    task.put([rec(0), rec(1, tombstone=True)])  # the tombstone goes to the DLQ
    assert task.pre_commit(current(2)) == current(2)
    task2, ctx2 = eos(engine, postgres_db, name)
    task2.open([TP])
    assert ctx2.rewinds == {TP: 2}
    task.stop()
    task2.stop()


@pytest.mark.parametrize("example", ["sink-sqlite.yaml", "sink-postgresql.yaml"])
def test_the_examples_are_valid_configurations(example):
    import yaml

    from kctl.runtime.plugins import Plugins
    from kctl.runtime.validation import validate_config

    path = Path(__file__).resolve().parents[2] / "examples" / "jdbc" / example
    config = {k: str(v).lower() if isinstance(v, bool) else str(v)
              for k, v in yaml.safe_load(path.read_text()).items()}
    result = validate_config(Plugins(), config)
    assert result["name"] == "kctl.connectors.jdbc.sink.JdbcSinkConnector"
    assert result["error_count"] == 0, [c["value"] for c in result["configs"]
                                        if c["value"]["errors"]]
    broken = {**config, "pk.mode": "none", "delete.enabled": "true"}
    assert validate_config(Plugins(), broken)["error_count"] > 0


def test_a_view_is_written_only_when_table_types_lists_it(engine, jdbc_db):
    """Confluent's table.types: the sink writes into base tables by default; a view named
    by table.name.format fails the task unless VIEW is listed."""
    jdbc_db.execute(f"CREATE TABLE {q(jdbc_db, 'base_orders')} (id BIGINT PRIMARY KEY, "
                    "name VARCHAR(20), qty INT)",
                    f"CREATE VIEW {q(jdbc_db, TOPIC)} AS SELECT id, name, qty FROM "
                    f"{q(jdbc_db, 'base_orders')}")
    task, _ = start_task(engine, jdbc_db, **{"auto.create": "false"})
    task.open([TP])
    task.put([rec(0)])
    with pytest.raises(JdbcSinkError, match=r"orders is a view and table\.types \(TABLE\) "
                                            r"does not list VIEW"):
        task.flush({})
    task.stop()
    if jdbc_db.server is None:
        return  # SQLite's views take no INSERT (without a trigger): nothing more to write
    task, _ = start_task(engine, jdbc_db, **{"auto.create": "false",
                                              "table.types": "TABLE,VIEW"})
    task.open([TP])
    task.put([rec(0), rec(1)])
    task.flush({})
    task.stop()
    assert rows(jdbc_db, "base_orders") == [(0, "n", 1), (1, "n", 1)]
