"""JdbcSource through a worker process driven with the CLI, on a real PostgreSQL.

A 40k-row table is snapshotted (partitioned key-range reads) and then followed in
timestamp+incrementing mode while rows are inserted and updated; the worker is SIGKILLed in
the middle of the snapshot (at a kill point: the source task holds rows it read and has not
handed over, the sink has committed some) and started again on the same state directory. A FileSink
(exactly-once) writes the topic out: every row arrives exactly once, each update once more
with its new value. A table created while the connector runs is picked up without a
restart, and a dropped one stops being read. A connector pointed at an unreachable
database is FAILED with one clear line, without its password, while the worker and the
other connectors keep running.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest
from support import killpoints
from support.broker import free_port
from support.files import committed_lines
from support.waiting import wait_until
from support.worker import LISTENER, Worker

pytestmark = [pytest.mark.slow, pytest.mark.spark]

ROWS = 40_000
BATCH = 5000
KILL_AFTER = 3 * BATCH  # the third batch of the snapshot is held


def yaml(path: Path, settings: dict) -> Path:
    path.write_text(json.dumps(settings))  # JSON is YAML
    return path


def rows(outdir: Path, topic: str) -> list[tuple[int, int]]:
    return [(v["id"], v["amount"]) for v in map(json.loads, committed_lines(outdir / topic))]


def test_a_table_is_snapshotted_then_followed_across_a_sigkill(tmp_path, postgres_db):
    db = postgres_db
    db.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, customer TEXT NOT NULL, "
               "amount INT NOT NULL, updated TIMESTAMP NOT NULL)",
               f"INSERT INTO orders SELECT g, 'c' || (g % 97), g % 1000, "
               f"TIMESTAMP '2024-01-01' + g * INTERVAL '1 millisecond' "
               f"FROM generate_series(1, {ROWS}) g")
    outdir = tmp_path / "out"
    kill_point = tmp_path / "kill-point"
    w = Worker(tmp_path, killpoints.env(kill_point, KILL_AFTER, sink=False))
    yaml(tmp_path / "worker.yaml", {
        "state.dir": str(tmp_path / "state"), "listeners": LISTENER,
        "offset.flush.interval.ms": 500, "spark.master": "local[2]",
        "spark.driver.memory": "1g",
        "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"})
    source = yaml(tmp_path / "source.yaml", {
        "name": "pg", "connector.class": "support.killpoints.KillPointJdbcSource",
        "connection.url": db.url,
        "mode": "timestamp+incrementing", "timestamp.column.name": "updated",
        "incrementing.column.name": "id", "table.include.list": "orders,refunds",
        "topic.prefix": "pg-", "batch.max.rows": BATCH, "poll.interval.ms": 200,
        "table.poll.interval.ms": 500, "tasks.max": 2})
    sink = yaml(tmp_path / "sink.yaml", {
        "name": "out", "connector.class": "FileSink", "topics": "pg-orders,pg-refunds",
        "path": str(outdir), "format": "json", "delivery.guarantee": "exactly_once",
        "flush.size": BATCH, "rotate.interval.ms": 300})
    broken = yaml(tmp_path / "broken.yaml", {
        "name": "broken", "connector.class": "JdbcSource", "mode": "bulk",
        "connection.url": f"jdbc:postgresql://127.0.0.1:{free_port()}/nowhere"
                          "?user=app&password=s3cret-pw",
        "topic.prefix": "x-", "connection.attempts": 1})
    w.start()
    try:
        w.kctl("connector", "create", str(source))
        w.kctl("connector", "create", str(sink))

        # SIGKILL while the snapshot is under way: some of it written, not all
        wait_until(lambda: killpoints.reached(kill_point), timeout=300, interval=0.1,
                   message="the source at its kill point", on_timeout=lambda: w.log()[-3000:])
        wait_until(lambda: len(rows(outdir, "pg-orders")) >= BATCH, timeout=120,
                   interval=0.1, message="the sink wrote some of the snapshot")
        assert len(rows(outdir, "pg-orders")) <= KILL_AFTER - BATCH
        w.kill()
        w.start()  # same state dir: connectors and source positions come back
        wait_until(lambda: len(rows(outdir, "pg-orders")) >= ROWS, timeout=240,
                   interval=0.5, message="the whole snapshot")

        # followed: inserts and updates arrive, and so does a table created meanwhile
        db.execute(f"INSERT INTO orders SELECT g, 'new', 7, now() AT TIME ZONE 'UTC' "
                   f"FROM generate_series({ROWS + 1}, {ROWS + 1000}) g",
                   "UPDATE orders SET amount = -1, updated = now() AT TIME ZONE 'UTC' "
                   f"WHERE id % 400 = 0 AND id <= {ROWS}",
                   "CREATE TABLE refunds (id BIGINT PRIMARY KEY, amount INT NOT NULL, "
                   "updated TIMESTAMP NOT NULL)",
                   "INSERT INTO refunds SELECT g, -g, TIMESTAMP '2024-02-01' "
                   "FROM generate_series(1, 50) g")
        want = collections.Counter((i, i % 1000) for i in range(1, ROWS + 1))
        want.update((i, 7) for i in range(ROWS + 1, ROWS + 1001))
        want.update((i, -1) for i in range(400, ROWS + 1, 400))
        wait_until(lambda: len(rows(outdir, "pg-orders")) >= sum(want.values()), timeout=120,
                   interval=0.5, message="inserts and updates")
        wait_until(lambda: len(rows(outdir, "pg-refunds")) >= 50, timeout=120, interval=0.5,
                   message="the new table's rows")
        got = collections.Counter(rows(outdir, "pg-orders"))
        assert got == want, "every row exactly once, every update once more"
        assert sorted(rows(outdir, "pg-refunds")) == [(i, -i) for i in range(1, 51)]
        st = w.status("pg")
        assert st["connector"]["state"] == "RUNNING"
        assert [t["state"] for t in st["tasks"]] == ["RUNNING", "RUNNING"], st

        def offsets() -> dict[str, dict]:
            got = w.offsets("pg")
            return {o["partition"]["table"]: o["offset"] for o in got}

        # the last row read, by (timestamp, id): the UPDATE committed after the INSERT (the
        # test's connection autocommits), so its largest id, ROWS, has the latest timestamp
        wait_until(lambda: offsets().get("orders", {}).get("incrementing") == ROWS,
                   timeout=30, message="the source offset at the last row",
                   on_timeout=lambda: repr(offsets()))
        assert set(offsets()["orders"]) == {"timestamp", "timestamp_nanos", "incrementing"}

        # a dropped table stops being read: one task again, still running
        db.execute("DROP TABLE refunds")
        wait_until(lambda: len(w.status("pg")["tasks"]) == 1, timeout=60,
                   message="tasks reconfigured without the dropped table")
        wait_until(lambda: [t["state"] for t in w.status("pg")["tasks"]] == ["RUNNING"],
                   timeout=60, message="the remaining task running")
        db.execute(f"INSERT INTO orders VALUES ({ROWS + 5000}, 'late', 9, "
                   "now() AT TIME ZONE 'UTC')")
        wait_until(lambda: (ROWS + 5000, 9) in set(rows(outdir, "pg-orders")), timeout=60,
                   message="rows still followed after the reconfiguration")

        # an unreachable database: FAILED in one line, no password; the rest keeps running
        w.kctl("connector", "create", str(broken))
        wait_until(lambda: w.status("broken")["connector"]["state"] == "FAILED", timeout=60,
                   message="the broken connector FAILED")
        trace = w.status("broken")["connector"]["trace"]
        assert "Cannot connect to jdbc:postgresql://127.0.0.1:" in trace
        assert "s3cret-pw" not in trace and "s3cret-pw" not in (tmp_path / "worker.log") \
            .read_text()
        assert "s3cret-pw" not in w.kctl("connector", "list", "-o", "json").stdout
        assert w.status("pg")["connector"]["state"] == "RUNNING"
        assert w.status("out")["connector"]["state"] == "RUNNING"
    finally:
        w.stop()
