"""Table -> topic -> table on SQLite, with one command and no server.

Creates an SQLite file with an `orders` table, starts a standalone worker (embedded log)
with a JdbcSource that snapshots and then follows the table and a JdbcSink that upserts
every record into `copy_orders` of the same file, then inserts and updates rows and waits
until the copy equals the table. The same connector files work on PostgreSQL or MariaDB
with another `connection.url` (see examples/jdbc/).

    python examples/jdbc_quickstart.py [--rows 50000] [--keep]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rows(db: Path, table: str) -> set[tuple]:
    with sqlite3.connect(db, timeout=30) as conn:
        try:
            return set(conn.execute(f'SELECT id, customer, amount FROM "{table}"'))
        except sqlite3.OperationalError:  # the sink has not created it yet
            return set()


def wait_for_copy(db: Path, worker: subprocess.Popen, log: Path, timeout: float = 300) -> bool:
    deadline = time.monotonic() + timeout
    while rows(db, "copy_orders") != rows(db, "orders"):
        if worker.poll() is not None or time.monotonic() > deadline:
            print("the copy did not catch up; worker log:\n" + log.read_text()[-3000:])
            return False
        time.sleep(0.5)
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--keep", action="store_true", help="keep the working directory")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kctl-jdbc-"))
    db = work / "shop.db"
    base = dt.datetime(2024, 1, 1)
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR(40) NOT NULL,"
                     " amount INT NOT NULL, updated DATETIME NOT NULL)")
        conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", [
            (i, f"customer-{i % 97}", i % 1000, (base + dt.timedelta(milliseconds=i)).isoformat(" "))
            for i in range(1, args.rows + 1)])
    url = f"http://127.0.0.1:{free_port()}"
    (work / "worker.yaml").write_text(json.dumps({
        "state.dir": str(work / "state"), "listeners": url, "spark.master": "local[2]",
        "spark.driver.memory": "1g"}))
    (work / "source.yaml").write_text(json.dumps({
        "name": "orders-source", "connector.class": "JdbcSource",
        "connection.url": f"jdbc:sqlite:{db}", "mode": "timestamp+incrementing",
        "timestamp.column.name": "updated", "incrementing.column.name": "id",
        "table.include.list": "orders", "topic.prefix": "shop-", "poll.interval.ms": 500}))
    (work / "sink.yaml").write_text(json.dumps({
        "name": "orders-copy", "connector.class": "JdbcSink", "topics": "shop-orders",
        "connection.url": f"jdbc:sqlite:{db}", "table.name.format": "copy_orders",
        "insert.mode": "upsert", "pk.mode": "record_key", "delete.enabled": "true",
        "auto.create": "true", "delivery.guarantee": "exactly_once"}))
    print(f"working directory: {work}")
    print("$ kctl worker start worker.yaml source.yaml sink.yaml")
    log = work / "worker.log"
    worker = subprocess.Popen(
        [sys.executable, "-m", "kctl.cli.main", "worker", "start", str(work / "worker.yaml"),
         str(work / "source.yaml"), str(work / "sink.yaml")],
        stdout=open(log, "w"), stderr=subprocess.STDOUT)  # noqa: SIM115 - the worker's
    try:
        t0 = time.monotonic()
        if not wait_for_copy(db, worker, log):
            return 1
        print(f"snapshot: {args.rows} rows copied in {time.monotonic() - t0:.1f}s")
        later = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        with sqlite3.connect(db, timeout=30) as conn:
            conn.executemany("INSERT INTO orders VALUES (?, 'new', 7, ?)", [
                (i, later.isoformat(" ")) for i in range(args.rows + 1, args.rows + 1001)])
            conn.execute("UPDATE orders SET amount = -1, updated = ? WHERE id % 100 = 0",
                         ((later + dt.timedelta(seconds=1)).isoformat(" "),))
        t1 = time.monotonic()
        if not wait_for_copy(db, worker, log):
            return 1
        print(f"followed: 1000 inserts and {args.rows // 100} updates in "
              f"{time.monotonic() - t1:.1f}s")
        for name in ("orders-source", "orders-copy"):
            status = subprocess.run([sys.executable, "-m", "kctl.cli.main", "--url", url,
                                     "connector", "status", name], text=True,
                                    capture_output=True)
            print(f"$ kctl connector status {name}\n{status.stdout}")
        print(f"orders and copy_orders in {db} hold the same {len(rows(db, 'orders'))} rows")
        return 0
    finally:
        worker.send_signal(signal.SIGINT)
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
