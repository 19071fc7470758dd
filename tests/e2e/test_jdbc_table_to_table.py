"""Table -> topic -> table through a standalone worker process, on each database.

A table is snapshotted by JdbcSource (timestamp+incrementing), then followed while rows are
inserted and updated; JdbcSink upserts every record into another table of the same database
(keys from the primary key, deletes enabled). Both tables end up holding the same rows.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from support.waiting import wait_until
from support.worker import LISTENER, Worker

pytestmark = [pytest.mark.slow, pytest.mark.spark]

ROWS = 20_000  # four batches of each side on each database
BATCH = 5000
DDL = {
    "postgresql": "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR(40) NOT NULL, "
                  "amount INT NOT NULL, updated TIMESTAMP NOT NULL)",
    "sqlite": "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR(40) NOT NULL, "
              "amount INT NOT NULL, updated DATETIME NOT NULL)",
    "mariadb": "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR(40) NOT NULL, "
               "amount INT NOT NULL, updated DATETIME(3) NOT NULL)",
}
BASE = dt.datetime(2024, 1, 1)


def kind(db) -> str:
    return db.url.split(":")[1]


def insert(db, rows: list[tuple]) -> None:
    mark = "?" if kind(db) == "sqlite" else "%s"
    conn = db.connect()
    try:
        cur = conn.cursor()
        cur.executemany(f"INSERT INTO orders VALUES ({mark}, {mark}, {mark}, {mark})", rows)
        conn.commit()
    finally:
        conn.close()


def content(db, table: str) -> set[tuple]:
    try:
        return {(int(i), str(c), int(a)) for i, c, a in
                db.query(f'SELECT id, customer, amount FROM {table}')}
    except Exception:  # not created yet
        return set()


def config(path: Path, settings: dict) -> Path:
    path.write_text(json.dumps(settings))  # JSON is YAML
    return path


def test_a_table_is_copied_and_followed_into_another(tmp_path, jdbc_db):
    db, n = jdbc_db, ROWS
    db.execute(DDL[kind(db)])
    if kind(db) == "postgresql":
        db.execute(f"INSERT INTO orders SELECT g, 'c' || (g % 97), g % 1000, "
                   f"TIMESTAMP '2024-01-01' + g * INTERVAL '1 millisecond' "
                   f"FROM generate_series(1, {n}) g")
    else:
        insert(db, [(i, f"c{i % 97}", i % 1000, BASE + dt.timedelta(milliseconds=i))
                    for i in range(1, n + 1)])

    w = Worker(tmp_path)
    config(tmp_path / "worker.yaml", {
        "state.dir": str(tmp_path / "state"), "listeners": LISTENER,
        "offset.flush.interval.ms": 500, "spark.master": "local[2]",
        "spark.driver.memory": "1g",
        "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"})
    source = config(tmp_path / "source.yaml", {
        "name": "src", "connector.class": "JdbcSource", "connection.url": db.url,
        "mode": "timestamp+incrementing", "timestamp.column.name": "updated",
        "incrementing.column.name": "id", "table.include.list": "orders",
        "topic.prefix": "t_", "batch.max.rows": BATCH, "poll.interval.ms": 200})
    sink = config(tmp_path / "sink.yaml", {
        "name": "dst", "connector.class": "JdbcSink", "connection.url": db.url,
        "topics": "t_orders", "table.name.format": "${topic}_copy",
        "insert.mode": "upsert", "pk.mode": "record_key", "delete.enabled": "true",
        "auto.create": "true", "batch.size": BATCH})
    w.start()
    try:
        w.kctl("connector", "create", str(source))
        w.kctl("connector", "create", str(sink))
        wait_until(lambda: len(content(db, "t_orders_copy")) >= n, timeout=300, interval=1,
                   message="the snapshot copied", on_timeout=lambda: (tmp_path / "worker.log").read_text()[-3000:])

        # followed: new rows and updated ones reach the copy
        now = dt.datetime.utcnow().replace(microsecond=0)
        insert(db, [(i, "new", 7, now) for i in range(n + 1, n + 1001)])
        mark = "?" if kind(db) == "sqlite" else "%s"
        conn = db.connect()
        try:
            later = now + dt.timedelta(seconds=1)  # after the inserts
            conn.cursor().executemany(
                f"UPDATE orders SET amount = -1, updated = {mark} WHERE id = {mark}",
                [(later, i) for i in range(400, n + 1, 400)])
            conn.commit()
        finally:
            conn.close()
        want = content(db, "orders")
        assert len(want) == n + 1000 and sum(a == -1 for _, _, a in want) == n // 400
        wait_until(lambda: content(db, "t_orders_copy") == want, timeout=180, interval=1,
                   message="the copy equal to the table",
                   on_timeout=lambda: repr(sorted(want ^ content(db, "t_orders_copy"))[:10]))
        for name in ("src", "dst"):
            st = w.status(name)
            assert st["connector"]["state"] == "RUNNING"
            assert {t["state"] for t in st["tasks"]} == {"RUNNING"}, st
    finally:
        w.stop()
