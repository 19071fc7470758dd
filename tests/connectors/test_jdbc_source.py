"""JdbcSource stories on real databases (SQLite in a file, PostgreSQL and MariaDB on
loopback): each mode reads what it should, a restart resumes exactly from the stored
offsets, tables come and go while the connector runs, and rows that cannot be converted
reach the dead letter queue instead of vanishing."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from file_support import ConnectorContext, OffsetStore, Reporter, ReportingContext, expand
from support.waiting import wait_until

from kctl.api import ConnectError, DataError, SourceRecord, Struct
from kctl.api.data import DATE, DECIMAL, TIMESTAMP, Type
from kctl.connectors.jdbc import JdbcSourceConnector, JdbcSourceTask
from kctl.connectors.jdbc import _source_settings as settings_module
from kctl.connectors.jdbc import source as source_module
from kctl.connectors.jdbc._common import dialect_for
from kctl.connectors.jdbc._source_settings import TASK_TABLES
from kctl.connectors.jdbc.source import group_tables
from kctl.runtime.plugins import BUILTIN_CONNECTORS

pytestmark = pytest.mark.spark

UTC = dt.UTC


# --- helpers ------------------------------------------------------------------------------


def props_for(db: Any, **props: Any) -> dict[str, str]:
    base = {"connection.url": db.url, "mode": "bulk", "topic.prefix": "db-",
            "poll.interval.ms": "50", "batch.max.rows": "1000", "table.poll.interval.ms": "100",
            "connection.backoff.ms": "100",
            # these stories' timestamp columns are nullable (some hold nulls on purpose);
            # Confluent's check of that has its own test (test_jdbc_source_confluent_reads)
            "validate.non.null": "false"}
    base.update({k.replace("_", "."): str(v) for k, v in props.items()})
    return base


def start_task(engine, store: OffsetStore, props: Mapping[str, str],
               tables: list[str] | None = None,
               reporter: Reporter | None = None) -> JdbcSourceTask:
    props = dict(props)
    if tables is not None:
        props[TASK_TABLES] = json.dumps(tables)
    task = JdbcSourceTask()
    task.initialize(ReportingContext(engine, store, props, reporter))
    task.start(props)
    return task


def drain(task: JdbcSourceTask, store: OffsetStore | None = None,
          limit: int | None = None) -> list[SourceRecord]:
    """Poll until a poll comes back empty (or `limit` records came); ack what was polled
    the way the runtime commits offsets."""
    out: list[SourceRecord] = []
    while limit is None or len(out) < limit:
        batch = expand(task.poll())
        if not batch:
            return out
        if store is not None:
            store.ack(batch)
        out.extend(batch)
    return out


def val(r: SourceRecord) -> dict:
    assert isinstance(r.value, Struct)
    return r.value.to_dict()


def ids(records: list[SourceRecord], col: str = "id") -> list[int]:
    return [int(val(r)[col]) for r in records]


def ddl_ts(db: Any) -> str:
    """A timestamp column type with microseconds, per database."""
    if db.server is None:
        return "TIMESTAMP"
    return "TIMESTAMP(6) NULL" if db.server.kind == "mariadb" else "TIMESTAMP"


def ts_value(db: Any, t: dt.datetime) -> Any:
    """How a test writes a timestamp: SQLite keeps what it is given (ISO text here)."""
    return t.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if db.server is None else t


def insert(db: Any, table: str, rows: list[tuple], columns: str) -> None:
    conn = db.connect()
    try:
        cur = conn.cursor()
        ph = ", ".join(["?" if db.server is None else "%s"] * len(rows[0]))
        cur.executemany(f"INSERT INTO {table} ({columns}) VALUES ({ph})", rows)
        if db.server is not None:
            conn.commit()
    finally:
        conn.close()


def int_pk(db: Any) -> str:
    return "INTEGER PRIMARY KEY" if db.server is None else "BIGINT PRIMARY KEY"


T0 = dt.datetime(2024, 1, 2, 3, 4, 5, 123000, tzinfo=UTC)


# --- modes --------------------------------------------------------------------------------


def test_the_alias_names_the_connector():
    assert BUILTIN_CONNECTORS["JdbcSource"] == "kctl.connectors.jdbc:JdbcSourceConnector"


def test_bulk_reads_each_table_whole_keyed_by_its_primary_key_and_again_later(engine, jdbc_db):
    jdbc_db.execute(f"CREATE TABLE people (id {int_pk(jdbc_db)}, name VARCHAR(20))",
                    "CREATE TABLE notes (body VARCHAR(20))")
    insert(jdbc_db, "people", [(i, f"p{i}") for i in range(1, 2501)], "id, name")
    insert(jdbc_db, "notes", [("a",), ("b",)], "body")
    store = OffsetStore()
    props = props_for(jdbc_db, poll_interval_ms=3000)
    task = start_task(engine, store, props, ["notes", "people"])
    try:
        first = drain(task, store)
        people = [r for r in first if r.topic == "db-people"]
        notes = [r for r in first if r.topic == "db-notes"]
        assert sorted(ids(people)) == list(range(1, 2501))
        assert sorted(val(r)["body"] for r in notes) == ["a", "b"]
        # keyed by the primary key; a table without one has no keys
        assert {r.key.to_dict()["id"] for r in people} == set(range(1, 2501))
        assert all(r.key is None for r in notes)
        assert people[0].source_partition == {"table": "people"}
        # a snapshot of 2500 rows at batch.max.rows 1000 takes key ranges: 3 reads
        assert len({tuple(r.source_offset.items()) for r in people}) == 2500
        assert people[-1].source_offset == {"snapshot.key": None}
        # bulk again after poll.interval.ms: the whole table again
        insert(jdbc_db, "people", [(9999, "late")], "id, name")
        again = wait_until(lambda: drain(task, store), timeout=30, message="second snapshot")
        again += drain(task, store)
        assert sorted(ids([r for r in again if r.topic == "db-people"])) == \
            [*range(1, 2501), 9999]
    finally:
        task.stop()


def test_incrementing_reads_only_rows_above_the_last_id(engine, jdbc_db):
    jdbc_db.execute(f"CREATE TABLE events (id {int_pk(jdbc_db)}, what VARCHAR(20))")
    insert(jdbc_db, "events", [(i, f"e{i}") for i in range(1, 51)], "id, what")
    store = OffsetStore()
    props = props_for(jdbc_db, mode="incrementing", batch_max_rows=20)
    task = start_task(engine, store, props, ["events"])
    try:
        assert ids(drain(task, store)) == list(range(1, 51))
        assert store.offset({"table": "events"}) == {"incrementing": 50}
        insert(jdbc_db, "events", [(i, f"e{i}") for i in range(51, 76)], "id, what")
        jdbc_db.execute("UPDATE events SET what = 'changed' WHERE id = 3")  # not seen
        got = wait_until(lambda: drain(task, store), timeout=30, message="new rows")
        got += drain(task, store)
        assert ids(got) == list(range(51, 76))  # in id order, the update not re-read
    finally:
        task.stop()


def test_incrementing_without_a_snapshot_reads_in_id_order(engine, jdbc_db):
    jdbc_db.execute(f"CREATE TABLE events (id {int_pk(jdbc_db)}, what VARCHAR(20))")
    insert(jdbc_db, "events", [(i, f"e{i}") for i in (5, 3, 9, 1, 7)], "id, what")
    store = OffsetStore()
    task = start_task(engine, store, props_for(jdbc_db, mode="incrementing",
                                               snapshot_initial="false", batch_max_rows=2),
                      ["events"])
    try:
        got = drain(task, store)
        assert ids(got) == [1, 3, 5, 7, 9]
        assert [r.source_offset for r in got] == [{"incrementing": i} for i in (1, 3, 5, 7, 9)]
    finally:
        task.stop()


def test_timestamp_mode_picks_up_new_and_updated_rows(engine, jdbc_db):
    jdbc_db.execute(f"CREATE TABLE items (id {int_pk(jdbc_db)}, name VARCHAR(20), "
                    f"updated {ddl_ts(jdbc_db)})")
    insert(jdbc_db, "items", [(i, f"n{i}", ts_value(jdbc_db, T0 + dt.timedelta(seconds=i)))
                              for i in range(1, 21)], "id, name, updated")
    store = OffsetStore()
    props = props_for(jdbc_db, mode="timestamp", timestamp_column_name="updated",
                      snapshot_initial="false", batch_max_rows=7)
    task = start_task(engine, store, props, ["items"])
    try:
        got = drain(task, store)
        assert ids(got) == list(range(1, 21))
        last = T0 + dt.timedelta(seconds=20)
        assert store.offset({"table": "items"}) == {
            "timestamp": int(last.timestamp() * 1000),
            "timestamp_nanos": last.microsecond * 1000}
        later = ts_value(jdbc_db, T0 + dt.timedelta(seconds=100))
        conn = jdbc_db.connect()
        cur = conn.cursor()
        ph = "?" if jdbc_db.server is None else "%s"
        cur.execute(f"UPDATE items SET name = 'renamed', updated = {ph} WHERE id = 4", (later,))
        if jdbc_db.server is not None:
            conn.commit()
        conn.close()
        got = wait_until(lambda: drain(task, store), timeout=30, message="the update")
        assert [(val(r)["id"], val(r)["name"]) for r in got] == [(4, "renamed")]
        assert isinstance(val(got[0])["updated"], dt.datetime)
    finally:
        task.stop()


def test_timestamp_mode_never_splits_rows_that_share_a_timestamp(engine, jdbc_db):
    """Reads are limited to batch.max.rows and the next asks for later timestamps only:
    rows sharing the last timestamp must all be in the same read."""
    jdbc_db.execute(f"CREATE TABLE items (id {int_pk(jdbc_db)}, updated {ddl_ts(jdbc_db)})")
    rows = [(i, ts_value(jdbc_db, T0 + dt.timedelta(seconds=i // 4))) for i in range(1, 31)]
    insert(jdbc_db, "items", rows, "id, updated")
    store = OffsetStore()
    task = start_task(engine, store, props_for(
        jdbc_db, mode="timestamp", timestamp_column_name="updated", snapshot_initial="false",
        batch_max_rows=3), ["items"])
    try:
        assert sorted(ids(drain(task, store))) == list(range(1, 31))
    finally:
        task.stop()


def test_timestamp_incrementing_resumes_exactly_and_follows_updates(engine, jdbc_db):
    jdbc_db.execute(f"CREATE TABLE orders (id {int_pk(jdbc_db)}, amount INT, "
                    f"modified {ddl_ts(jdbc_db)})")
    # many rows share each timestamp: only (timestamp, id) orders them exactly
    insert(jdbc_db, "orders", [(i, i * 10, ts_value(jdbc_db, T0 + dt.timedelta(seconds=i // 10)))
                               for i in range(1, 101)], "id, amount, modified")
    store = OffsetStore()
    props = props_for(jdbc_db, mode="timestamp+incrementing", timestamp_column_name="modified",
                      incrementing_column_name="id", snapshot_initial="false",
                      batch_max_rows=15)
    task = start_task(engine, store, props, ["orders"])
    first = drain(task, store, limit=40)  # then the task dies: 45 polled and acknowledged
    task.stop()
    assert ids(first) == list(range(1, len(first) + 1))
    assert store.offset({"table": "orders"})["incrementing"] == len(first)

    task = start_task(engine, store, props, ["orders"])
    try:
        rest = drain(task, store)
        assert ids(first + rest) == list(range(1, 101)), "each row once, in order"
        # an update moves the row's timestamp on: it comes again, with the new amount
        ph = "?" if jdbc_db.server is None else "%s"
        conn = jdbc_db.connect()
        cur = conn.cursor()
        cur.execute(f"UPDATE orders SET amount = -1, modified = {ph} WHERE id IN (3, 77)",
                    (ts_value(jdbc_db, T0 + dt.timedelta(minutes=5)),))
        cur.execute(f"INSERT INTO orders (id, amount, modified) VALUES (101, 0, {ph})",
                    (ts_value(jdbc_db, T0 + dt.timedelta(minutes=5)),))
        if jdbc_db.server is not None:
            conn.commit()
        conn.close()
        got = wait_until(lambda: drain(task, store), timeout=30, message="updates")
        assert [(val(r)["id"], val(r)["amount"]) for r in got] == [(3, -1), (77, -1), (101, 0)]
    finally:
        task.stop()


def test_timestamp_delay_leaves_recent_rows_for_later(engine, postgres_db):
    # row 2 is stamped 8 s ahead, so it is still "recent" (within the 1.5 s delay) however
    # long the task takes to start and read on a slow machine (stamped now(), it was
    # sometimes read at once)
    postgres_db.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, ts TIMESTAMPTZ)",
                        "INSERT INTO t VALUES (1, now() - interval '1 hour'), "
                        "(2, now() + interval '8 seconds')")
    store = OffsetStore()
    task = start_task(engine, store, props_for(
        postgres_db, mode="timestamp+incrementing", timestamp_column_name="ts",
        timestamp_delay_interval_ms=1500), ["t"])
    try:
        assert ids(drain(task, store)) == [1]
        got = wait_until(lambda: drain(task, store), timeout=60, message="the recent row")
        assert ids(got) == [2]
    finally:
        task.stop()


def test_timestamp_initial_skips_older_rows(engine, postgres_db):
    postgres_db.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, ts TIMESTAMP)",
                        "INSERT INTO t VALUES (1, '2020-01-01'), (2, '2024-06-01'), "
                        "(3, '2024-07-01')")
    initial = int(dt.datetime(2024, 1, 1, tzinfo=UTC).timestamp() * 1000)
    task = start_task(engine, OffsetStore(), props_for(
        postgres_db, mode="timestamp", timestamp_column_name="ts",
        timestamp_initial=initial), ["t"])
    try:
        assert sorted(ids(drain(task))) == [2, 3]
    finally:
        task.stop()


# --- snapshots ----------------------------------------------------------------------------


def test_a_snapshot_reads_key_ranges_in_parallel_then_follows_from_its_watermark(
        engine, postgres_db, monkeypatch):
    postgres_db.execute(
        "CREATE TABLE big (id BIGINT PRIMARY KEY, v INT, ts TIMESTAMP NOT NULL)",
        "INSERT INTO big SELECT g, g * 2, TIMESTAMP '2024-01-01' + g * INTERVAL '1 second' "
        "FROM generate_series(1, 10000) g")
    loads: list[tuple[str, Any]] = []
    load = JdbcSourceTask._load
    monkeypatch.setattr(JdbcSourceTask, "_load", lambda self, t, sql, partition: (
        loads.append((sql, partition)), load(self, t, sql, partition))[1])
    store = OffsetStore()
    props = props_for(postgres_db, mode="timestamp+incrementing", timestamp_column_name="ts",
                      batch_max_rows=2500, snapshot_partitions=4)
    task = start_task(engine, store, props, ["big"])
    first = drain(task, store, limit=5000)  # two key ranges, then the task dies
    task.stop()
    assert len(first) == 5000 and sorted(ids(first)) == list(range(1, 5001))
    # (the next range may have been read ahead meanwhile)
    assert [p for _, p in loads[:2]] == [("id", 1, 2501, 4), ("id", 2501, 5001, 4)]
    watermark = dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=10000)
    assert store.offset({"table": "big"}) == {
        "timestamp": int(watermark.timestamp() * 1000), "timestamp_nanos": 0,
        "incrementing": 10000, "snapshot.key": 5000}

    # while it is down: a row already read and one not yet read change, one is added
    postgres_db.execute("UPDATE big SET v = -1, ts = '2025-01-01' WHERE id IN (1, 9000)",
                        "INSERT INTO big VALUES (10001, -1, '2025-01-01')")
    task = start_task(engine, store, props, ["big"])
    try:
        rest = drain(task, store)
    finally:
        task.stop()
    snapshot = [r for r in rest if "snapshot.key" in r.source_offset]
    follow = rest[len(snapshot) + 1:]  # the snapshot's last row has the followed offset
    # the snapshot resumed after key 5000, without the row that changed since it began
    assert sorted(ids(first + rest[:len(snapshot) + 1])) == \
        [i for i in range(1, 10001) if i != 9000]
    # then the table is followed from the watermark: the changes, in (timestamp, id) order
    assert [(val(r)["id"], val(r)["v"]) for r in follow] == [(1, -1), (9000, -1), (10001, -1)]
    assert "snapshot.key" not in store.offset({"table": "big"})


def test_a_bulk_snapshot_resumes_after_the_last_key_acknowledged(engine, sqlite_db):
    sqlite_db.execute("CREATE TABLE big (id INTEGER PRIMARY KEY, v TEXT)")
    insert(sqlite_db, "big", [(i, f"v{i}") for i in range(1, 3001)], "id, v")
    store = OffsetStore()
    props = props_for(sqlite_db, poll_interval_ms=60_000)
    task = start_task(engine, store, props, ["big"])
    first = drain(task, store, limit=1000)
    task.stop()
    assert store.offset({"table": "big"}) == {"snapshot.key": 1000}
    task = start_task(engine, store, props, ["big"])
    try:
        rest = drain(task, store)
    finally:
        task.stop()
    assert ids(first + rest) == list(range(1, 3001))
    assert store.offset({"table": "big"}) == {"snapshot.key": None}


# --- tables, tasks, queries ---------------------------------------------------------------


def start_connector(engine, props: Mapping[str, str]) -> tuple[JdbcSourceConnector,
                                                                 ConnectorContext]:
    c = JdbcSourceConnector()
    ctx = ConnectorContext(engine)
    c.initialize(ctx)
    c.start(props)
    return c, ctx


def tables_of(configs: list[dict[str, str]]) -> list[list[str]]:
    return [json.loads(c[TASK_TABLES]) for c in configs]


def test_tables_split_into_contiguous_groups():
    assert group_tables(["e", "d", "c", "b", "a"], 2) == [["a", "b", "c"], ["d", "e"]]
    assert group_tables(["a", "b"], 5) == [["a"], ["b"]]
    assert group_tables([], 3) == []


def test_include_and_exclude_regexes_choose_the_tables_and_tasks_split_them(engine,
                                                                            postgres_db):
    postgres_db.execute(*[f"CREATE TABLE {t} (id BIGINT PRIMARY KEY)" for t in (
        "orders", "order_items", "customers", "audit_log", "tmp_orders")],
        "CREATE SCHEMA other", "CREATE TABLE other.orders (id BIGINT PRIMARY KEY)",
        "INSERT INTO orders VALUES (1)", "INSERT INTO customers VALUES (2)",
        "INSERT INTO other.orders VALUES (3)")
    c, _ = start_connector(engine, props_for(
        postgres_db, table_include_list="order.*,customers,other\\..*",
        table_exclude_list=".*items"))
    try:
        assert tables_of(c.task_configs(2)) == [["customers", "orders"], ["other.orders"]]
        configs = c.task_configs(10)
        assert tables_of(configs) == [["customers"], ["orders"], ["other.orders"]]
    finally:
        c.stop()
    # each task reads its own tables only, into prefix + table name
    for config, want in zip(configs, [("db-customers", 2), ("db-orders", 1),
                                      ("db-other.orders", 3)], strict=True):
        task = start_task(engine, OffsetStore(), config)
        try:
            got = drain(task)
        finally:
            task.stop()
        assert [(r.topic, val(r)["id"]) for r in got] == [want]


def test_query_mode_is_one_task_reading_one_query_into_one_topic(engine, jdbc_db):
    jdbc_db.execute(f"CREATE TABLE a (id {int_pk(jdbc_db)}, x INT)",
                    f"CREATE TABLE b (id {int_pk(jdbc_db)}, y VARCHAR(10))")
    insert(jdbc_db, "a", [(i, i % 3) for i in range(1, 31)], "id, x")
    insert(jdbc_db, "b", [(i, f"y{i}") for i in range(1, 41)], "id, y")
    query = "SELECT a.id, a.x, b.y FROM a JOIN b ON a.id = b.id WHERE a.x > 0"
    props = props_for(jdbc_db, mode="incrementing", incrementing_column_name="id",
                      query=query, topic_prefix="joined", batch_max_rows=7)
    c, _ = start_connector(engine, props)
    try:
        configs = c.task_configs(5)
    finally:
        c.stop()
    assert len(configs) == 1 and TASK_TABLES not in configs[0]
    store = OffsetStore()
    task = start_task(engine, store, configs[0])
    try:
        got = drain(task, store)
        assert ids(got) == [i for i in range(1, 31) if i % 3]
        assert {r.topic for r in got} == {"joined"}
        assert got[0].source_partition == {"query": query} and got[0].key is None
        assert val(got[0]) == {"id": 1, "x": 1, "y": "y1"}
        insert(jdbc_db, "a", [(31, 1), (33, 0)], "id, x")
        insert(jdbc_db, "b", [(i, f"y{i}") for i in range(41, 45)], "id, y")
        more = wait_until(lambda: drain(task, store), timeout=30, message="new joined rows")
        assert ids(more) == [31]
    finally:
        task.stop()


def test_validate_says_what_a_configuration_lacks(sqlite_db):
    def errors(**props: Any) -> dict[str, list[str]]:
        values = JdbcSourceConnector().validate(props_for(sqlite_db, **props))
        return {v.name: v.errors for v in values if v.errors}

    assert errors() == {}
    assert "needs timestamp.column.name" in errors(mode="timestamp")["timestamp.column.name"][0]
    got = errors(query="SELECT 1", table_include_list="x")
    assert "does not apply when `query` is set" in got["table.include.list"][0]
    assert "Invalid regular expression" in errors(table_exclude_list="(")["table.exclude.list"][0]
    assert "needs incrementing.column.name" in errors(
        mode="incrementing", query="SELECT 1 AS id")["incrementing.column.name"][0]


def test_the_monitor_adds_a_new_table_and_drops_a_dropped_one(engine, jdbc_db):
    jdbc_db.execute(f"CREATE TABLE first (id {int_pk(jdbc_db)})")
    c, ctx = start_connector(engine, props_for(jdbc_db, mode="incrementing"))
    try:
        assert tables_of(c.task_configs(3)) == [["first"]]
        jdbc_db.execute(f"CREATE TABLE second (id {int_pk(jdbc_db)})",
                        "INSERT INTO second (id) VALUES (7)")
        wait_until(lambda: ctx.reconfigurations == 1, timeout=30, message="reconfiguration")
        configs = c.task_configs(3)  # what the runtime does when asked
        assert tables_of(configs) == [["first"], ["second"]]

        task = start_task(engine, OffsetStore(), configs[1])
        try:
            assert ids(drain(task)) == [7]
            jdbc_db.execute("DROP TABLE second")
            wait_until(lambda: ctx.reconfigurations == 2, timeout=30, message="the drop")
            assert tables_of(c.task_configs(3)) == [["first"]]
            # until the runtime restarts it, the task polls on without the table
            assert drain(task) == [] and task._tables == []
        finally:
            task.stop()
        assert ctx.reconfigurations == 2 and not ctx.errors  # no change: no more requests
    finally:
        c.stop()


# --- types --------------------------------------------------------------------------------


def schema_of(r: SourceRecord) -> dict[str, tuple[str, str | None, bool]]:
    """field -> (Connect type, logical name, optional)."""
    assert r.value_schema is not None
    return {f.name: (f.schema.type.value, f.schema.name, f.schema.optional)
            for f in r.value_schema.fields}


def read_one_table(engine, db: Any, table: str, **props: Any) -> list[SourceRecord]:
    task = start_task(engine, OffsetStore(), props_for(db, **props), [table])
    try:
        return drain(task)
    finally:
        task.stop()


def test_postgresql_column_types_become_connect_schemas(engine, postgres_db):
    postgres_db.execute(
        "CREATE TABLE types (id BIGINT PRIMARY KEY, i INT NOT NULL, s SMALLINT, "
        "price NUMERIC(10,2), big NUMERIC(30,5), n5 NUMERIC(5,0), ts TIMESTAMP, "
        "tstz TIMESTAMPTZ, d DATE, b BYTEA, t TEXT, f DOUBLE PRECISION, flag BOOLEAN, "
        "nothing TEXT)",
        "INSERT INTO types VALUES (1, 2, 3, 3.45, 123456789012345678901234.5, 12345, "
        "'2024-01-02 03:04:05.123456', '2024-01-02 03:04:05.123456+02', '2024-01-02', "
        "'\\x0102', 'text', 1.5, true, NULL)")
    [r] = read_one_table(engine, postgres_db, "types")
    assert schema_of(r) == {
        "id": ("int64", None, False), "i": ("int32", None, False), "s": ("int16", None, True),
        "price": ("bytes", DECIMAL, True), "big": ("bytes", DECIMAL, True),
        "n5": ("bytes", DECIMAL, True), "ts": ("int64", TIMESTAMP, True),
        "tstz": ("int64", TIMESTAMP, True), "d": ("int32", DATE, True),
        "b": ("bytes", None, True), "t": ("string", None, True),
        "f": ("float64", None, True), "flag": ("boolean", None, True),
        "nothing": ("string", None, True)}
    assert r.value_schema.name == "types"
    assert r.value_schema.field("price").schema.parameters["scale"] == "2"
    assert val(r) == {
        "id": 1, "i": 2, "s": 3, "price": decimal.Decimal("3.45"),
        "big": decimal.Decimal("123456789012345678901234.50000"),
        "n5": decimal.Decimal("12345"),
        "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),  # no zone: UTC
        "tstz": dt.datetime(2024, 1, 2, 1, 4, 5, 123456, tzinfo=UTC),
        "d": dt.date(2024, 1, 2), "b": b"\x01\x02", "t": "text", "f": 1.5, "flag": True,
        "nothing": None}
    assert r.key_schema is not None and [f.name for f in r.key_schema.fields] == ["id"]
    assert r.key_schema.field("id").schema.type is Type.INT64 and r.key.to_dict() == {"id": 1}

    [best] = read_one_table(engine, postgres_db, "types", numeric_mapping="best_fit")
    assert {k: v[0] for k, v in schema_of(best).items() if k in ("price", "big", "n5")} == \
        {"price": "float64", "big": "bytes", "n5": "int32"}
    assert (val(best)["price"], val(best)["n5"]) == (3.45, 12345)
    [prec] = read_one_table(engine, postgres_db, "types", numeric_mapping="precision_only")
    assert (schema_of(prec)["price"][1], schema_of(prec)["n5"][0]) == (DECIMAL, "int32")


def test_mariadb_column_types_become_connect_schemas(engine, mariadb_db):
    mariadb_db.execute(
        "CREATE TABLE types (id BIGINT PRIMARY KEY, i INT NOT NULL, u INT UNSIGNED, "
        "price DECIMAL(10,2), ts TIMESTAMP(6) NULL, dt DATETIME(6), d DATE, b BLOB, "
        "t TEXT, f DOUBLE, flag BOOLEAN, nothing VARCHAR(5))",
        "INSERT INTO types VALUES (1, 2, 4000000000, 3.45, '2024-01-02 03:04:05.123456', "
        "'2024-01-02 03:04:05.123456', '2024-01-02', x'0102', 'text', 1.5, true, NULL)")
    [r] = read_one_table(engine, mariadb_db, "types")
    s = schema_of(r)
    assert {k: v[:2] for k, v in s.items()} == {
        "id": ("int64", None), "i": ("int32", None), "u": ("int64", None),
        "price": ("bytes", DECIMAL), "ts": ("int64", TIMESTAMP), "dt": ("int64", TIMESTAMP),
        "d": ("int32", DATE), "b": ("bytes", None), "t": ("string", None),
        "f": ("float64", None), "flag": ("boolean", None), "nothing": ("string", None)}
    assert not s["id"][2] and not s["i"][2] and s["nothing"][2]
    when = dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    assert val(r) == {"id": 1, "i": 2, "u": 4000000000, "price": decimal.Decimal("3.45"),
                      "ts": when, "dt": when, "d": dt.date(2024, 1, 2), "b": b"\x01\x02",
                      "t": "text", "f": 1.5, "flag": True, "nothing": None}
    assert r.key.to_dict() == {"id": 1}


def test_sqlite_column_types_become_connect_schemas(engine, sqlite_db):
    """SQLite keeps what it is given: temporal columns hold ISO text or epoch
    milliseconds (what Spark writes); BIGINT is a 64-bit integer, not decimal(20,0)."""
    sqlite_db.execute(
        "CREATE TABLE types (id INTEGER PRIMARY KEY, big BIGINT NOT NULL, price NUMERIC(10,2), "
        "ts TIMESTAMP, ms DATETIME, d DATE, b BLOB, t TEXT, f REAL, empty TEXT)",
        "INSERT INTO types VALUES (1, 9007199254740993, 3.45, '2024-01-02 03:04:05.123', "
        "1704164645123, '2024-01-02', x'0102', 'text', 1.5, NULL)",
        "INSERT INTO types VALUES (2, 2, NULL, '2024-01-02T05:04:05+02:00', NULL, "
        "1704153600000, NULL, NULL, NULL, NULL)")
    a, b = read_one_table(engine, sqlite_db, "types")
    s = schema_of(a)
    assert {k: v[:2] for k, v in s.items()} == {
        "id": ("int64", None), "big": ("int64", None), "price": ("bytes", DECIMAL),
        "ts": ("int64", TIMESTAMP), "ms": ("int64", TIMESTAMP), "d": ("int32", DATE),
        "b": ("bytes", None), "t": ("string", None), "f": ("float64", None),
        "empty": ("string", None)}
    assert not s["id"][2] and not s["big"][2]
    when = dt.datetime(2024, 1, 2, 3, 4, 5, 123000, tzinfo=UTC)
    assert val(a) == {"id": 1, "big": 9007199254740993, "price": decimal.Decimal("3.45"),
                      "ts": when, "ms": when, "d": dt.date(2024, 1, 2), "b": b"\x01\x02",
                      "t": "text", "f": 1.5, "empty": None}
    assert (val(b)["ts"], val(b)["d"]) == (dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
                                           dt.date(2024, 1, 2))


# --- rows that do not convert, and failures ------------------------------------------------


def collect(task: JdbcSourceTask, reporter: Reporter) -> list[tuple[str, Any]]:
    """What the runtime sees, in order: records and reported rows."""
    seen: list[tuple[str, Any]] = []
    while True:
        before = len(reporter.reports)
        batch = expand(task.poll())
        seen.extend(("bad", r) for r, _ in reporter.reports[before:])
        seen.extend(("ok", r) for r in batch)
        if not batch and len(reporter.reports) == before:
            return seen


def test_rows_spark_cannot_convert_go_to_the_dlq_in_their_place(engine, postgres_db):
    # Spark reads int[] as array<int>, and fails on a two-dimensional value (an unconstrained
    # NUMERIC such as 1e40 did this before: it is exact text now)
    postgres_db.execute("CREATE TABLE m (id BIGINT PRIMARY KEY, amount INT[])",
                        "INSERT INTO m SELECT g, ARRAY[g] FROM generate_series(1, 6) g",
                        "UPDATE m SET amount = '{{1,2},{3,4}}' WHERE id IN (3, 5)")
    reporter = Reporter()
    props = props_for(postgres_db, mode="incrementing", snapshot_initial="false")
    task = start_task(engine, OffsetStore(), props, ["m"], reporter)
    try:
        seen = collect(task, reporter)
    finally:
        task.stop()
    assert [(kind, json.loads(r.value)["id"] if kind == "bad" else val(r)["id"])
            for kind, r in seen] == [("ok", 1), ("ok", 2), ("bad", 3), ("ok", 4), ("bad", 5),
                                     ("ok", 6)]
    record, error = reporter.reports[0]
    assert isinstance(error, DataError) and "Row of m" in str(error) and "amount" in str(error)
    assert json.loads(record.value) == {"id": 3, "amount": [[1, 2], [3, 4]]}
    assert record.source_partition == {"table": "m"} and record.topic == "db-m"
    assert record.source_offset == {"incrementing": 3}
    assert [val(r)["amount"] for kind, r in seen if kind == "ok"] == [[1], [2], [4], [6]]

    # without a dead letter queue the row fails the task, named
    task = start_task(engine, OffsetStore(), props, ["m"], None)
    try:
        with pytest.raises(DataError, match=r"Row of m at \{\"incrementing\": 3\}"):
            drain(task)
    finally:
        task.stop()


def test_sqlite_dates_that_do_not_parse_go_to_the_dlq(engine, sqlite_db):
    sqlite_db.execute("CREATE TABLE d (id INTEGER PRIMARY KEY, day DATE)",
                      "INSERT INTO d VALUES (1, '2024-01-01'), (2, 'someday'), "
                      "(3, '2024-01-03')")
    reporter = Reporter()
    task = start_task(engine, OffsetStore(), props_for(sqlite_db), ["d"], reporter)
    try:
        seen = collect(task, reporter)
    finally:
        task.stop()
    assert [k for k, _ in seen] == ["ok", "bad", "ok"]
    assert json.loads(seen[1][1].value) == {"id": 2, "day": "someday"}
    assert "'someday' is neither a date/time nor epoch milliseconds" in \
        str(reporter.reports[0][1])


def test_a_missing_driver_is_named_with_what_to_install(engine, postgres_db, monkeypatch,
                                                        tmp_path):
    monkeypatch.setattr(source_module, "DRIVER_DIR", str(tmp_path))
    monkeypatch.setattr(source_module, "_active_spark", lambda: None)
    values = JdbcSourceConnector().validate(props_for(postgres_db))
    [url] = [v for v in values if v.name == "connection.url"]
    assert len(url.errors) == 1
    assert "apt-get install libpostgresql-jdbc-java" in url.errors[0]
    assert "spark.jars" in url.errors[0]

    real = dialect_for(postgres_db.url)
    fake = dataclass_replace(real, driver_class="org.example.NoSuchDriver")
    # the task's settings (kctl.connectors.jdbc._source_settings) choose the dialect
    monkeypatch.setattr(settings_module, "dialect_for", lambda url, **kw: fake)
    with pytest.raises(ConnectError) as e:
        start_task(engine, OffsetStore(), props_for(postgres_db), [])
    assert "\n" not in str(e.value)
    assert "org.example.NoSuchDriver" in str(e.value) and "apt-get install" in str(e.value)


def dataclass_replace(obj: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(obj, **changes)


def test_a_wrong_password_fails_in_one_line_without_the_password(engine, mariadb_db):
    user = "kctl_" + uuid.uuid4().hex[:8]
    mariadb_db.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'right-one'",
                       f"GRANT ALL ON {mariadb_db.name}.* TO '{user}'@'%'")
    try:
        props = props_for(mariadb_db, connection_user=user,
                          connection_password="s3cret-wrong")
        props["connection.url"] = mariadb_db.url.split("?")[0] + "?password=s3cret-wrong"
        c = JdbcSourceConnector()
        c.initialize(ConnectorContext(engine))
        with pytest.raises(ConnectError) as e:
            c.start(props)
        c.stop()
        msg = str(e.value)
        assert "\n" not in msg and "s3cret-wrong" not in msg
        assert "Access denied" in msg and "password=[hidden]" in msg
        with pytest.raises(ConnectError) as e:
            start_task(engine, OffsetStore(), props, [])
        assert "s3cret-wrong" not in str(e.value) and "Access denied" in str(e.value)
        # the right password works
        props["connection.password"] = "right-one"
        props["connection.url"] = mariadb_db.url.split("?")[0]
        c, _ = start_connector(engine, props)
        c.stop()
    finally:
        mariadb_db.execute(f"DROP USER '{user}'@'%'")


def test_an_unreachable_database_fails_in_one_line(engine):
    from support.broker import free_port

    props = {"connection.url": f"jdbc:postgresql://127.0.0.1:{free_port()}/nowhere",
             "mode": "bulk", "topic.prefix": "x-", "connection.attempts": "2",
             "connection.backoff.ms": "50"}
    c = JdbcSourceConnector()
    c.initialize(ConnectorContext(engine))
    with pytest.raises(ConnectError) as e:
        c.start(props)
    c.stop()
    assert "\n" not in str(e.value) and "Cannot connect to jdbc:postgresql://127.0.0.1" in \
        str(e.value)


def test_a_restarted_connector_has_its_stored_task_configs_checked(engine, sqlite_db):
    """A worker restart reuses the task configs it stored, without asking the connector:
    the monitor asks for a reconfiguration once, so tables added meanwhile are not missed."""
    sqlite_db.execute("CREATE TABLE t1 (id INTEGER PRIMARY KEY)")
    c, ctx = start_connector(engine, props_for(sqlite_db))
    try:
        wait_until(lambda: ctx.reconfigurations == 1, timeout=30, message="the check")
        assert tables_of(c.task_configs(2)) == [["t1"]]
        sqlite_db.execute("CREATE TABLE t2 (id INTEGER PRIMARY KEY)")
        wait_until(lambda: ctx.reconfigurations == 2, timeout=30, message="the new table")
    finally:
        c.stop()


@pytest.mark.parametrize("example", ["source-sqlite.yaml", "source-postgresql.yaml"])
def test_the_examples_are_valid_configurations(example):
    import yaml

    from kctl.runtime.connector_config import as_strings

    path = Path(__file__).resolve().parents[2] / "examples" / "jdbc" / example
    config = as_strings(yaml.safe_load(path.read_text()))
    assert config["connector.class"] == "JdbcSource"
    values = JdbcSourceConnector().validate(config)
    assert {v.name: v.errors for v in values if v.errors} == {}


def test_a_timestamp_snapshot_resumes_and_then_follows_on_every_database(engine, jdbc_db):
    """The snapshot's watermark and key ranges in each dialect (SQLite compares its text
    timestamps as epoch milliseconds), a restart in the middle, then the followed rows."""
    jdbc_db.execute(f"CREATE TABLE t (id {int_pk(jdbc_db)}, v INT, ts {ddl_ts(jdbc_db)})")
    insert(jdbc_db, "t", [(i, i, ts_value(jdbc_db, T0 + dt.timedelta(seconds=i % 7)))
                          for i in range(1, 301)], "id, v, ts")
    store = OffsetStore()
    props = props_for(jdbc_db, mode="timestamp+incrementing", timestamp_column_name="ts",
                      incrementing_column_name="id", batch_max_rows=100)
    task = start_task(engine, store, props, ["t"])
    first = drain(task, store, limit=100)
    task.stop()
    assert sorted(ids(first)) == list(range(1, 101))
    assert store.offset({"table": "t"})["snapshot.key"] == 100
    ph = "?" if jdbc_db.server is None else "%s"
    conn = jdbc_db.connect()
    cur = conn.cursor()
    cur.execute(f"UPDATE t SET v = -1, ts = {ph} WHERE id IN (50, 250)",
                (ts_value(jdbc_db, T0 + dt.timedelta(hours=1)),))
    if jdbc_db.server is not None:
        conn.commit()
    conn.close()
    task = start_task(engine, store, props, ["t"])
    try:
        rest = drain(task, store)
    finally:
        task.stop()
    assert sorted(ids(first + rest[:-2])) == [i for i in range(1, 301) if i != 250]
    assert [(val(r)["id"], val(r)["v"]) for r in rest[-2:]] == [(50, -1), (250, -1)]
    assert set(store.offset({"table": "t"})) == {"timestamp", "timestamp_nanos", "incrementing"}


def test_a_read_that_keeps_failing_fails_the_task_in_one_line(engine, postgres_db):
    """Retried query.retry.attempts times, then the task fails naming what failed: the
    database's own message, not py4j's."""
    props = props_for(postgres_db, query="SELECT nope FROM nowhere", connection_attempts=2,
                      connection_backoff_ms=10, query_retry_attempts=1)
    props["connection.url"] += "&password=s3cret-pw"
    task = start_task(engine, OffsetStore(), props)
    try:
        with pytest.raises(ConnectError) as e:
            wait_until(lambda: drain(task) and False, timeout=30, message="a failure")
    finally:
        task.stop()
    msg = str(e.value)
    assert msg.startswith("Reading the query failed:") and "\n" not in msg
    assert 'relation "nowhere" does not exist' in msg and "s3cret-pw" not in msg
