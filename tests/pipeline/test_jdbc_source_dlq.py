"""Rows JdbcSource cannot convert reach the dead letter queue through a worker process.

An SQLite table where every tenth row holds a DATE that is not a date: with
`errors.tolerance=all` the good rows reach the topic (and a FileSink's output), each bad
row is in the connector's dead letter queue once, as it was read, with the reason, and the
source offset moves past all of them. Nothing is dropped silently.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from support.files import committed_lines
from support.waiting import wait_until
from support.worker import LISTENER, Worker

pytestmark = [pytest.mark.slow, pytest.mark.spark]

ROWS = 60
BAD = {i for i in range(1, ROWS + 1) if i % 10 == 0}  # the last row is bad too


def yaml(path: Path, settings: dict) -> Path:
    path.write_text(json.dumps(settings))  # JSON is YAML
    return path


def test_rows_that_do_not_convert_are_dead_lettered_once(tmp_path):
    db = tmp_path / "shop.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, day DATE, what TEXT)")
    conn.executemany("INSERT INTO events VALUES (?, ?, ?)",
                     [(i, "not-a-date" if i in BAD else f"2024-01-{i % 28 + 1:02d}", f"e{i}")
                      for i in range(1, ROWS + 1)])
    conn.commit()
    conn.close()
    outdir = tmp_path / "out"
    w = Worker(tmp_path)
    yaml(tmp_path / "worker.yaml", {
        "state.dir": str(tmp_path / "state"), "listeners": LISTENER,
        "offset.flush.interval.ms": 200, "spark.master": "local[2]",
        "spark.driver.memory": "1g",
        "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"})
    source = yaml(tmp_path / "source.yaml", {
        "name": "lite", "connector.class": "JdbcSource", "connection.url": f"jdbc:sqlite:{db}",
        "mode": "incrementing", "topic.prefix": "lite-", "batch.max.rows": 25,
        "poll.interval.ms": 200, "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": "lite-dlq",
        "errors.deadletterqueue.topic.replication.factor": 1,
        "errors.deadletterqueue.context.headers.enable": True})
    sink = yaml(tmp_path / "sink.yaml", {
        "name": "out", "connector.class": "FileSink", "topics": "lite-events",
        "path": str(outdir), "format": "json", "flush.size": 10, "rotate.interval.ms": 300})
    w.start()
    try:
        w.kctl("connector", "create", str(source))
        w.kctl("connector", "create", str(sink))
        good = sorted(set(range(1, ROWS + 1)) - BAD)
        wait_until(lambda: len(committed_lines(outdir)) >= len(good), timeout=180,
                   interval=0.5, message="every good row in the output")
        assert sorted(json.loads(line)["id"] for line in committed_lines(outdir)) == good

        def source_offset() -> dict | None:
            got = w.offsets("lite")
            return got[0]["offset"] if got else None

        # the offset reaches the last row, which was dead-lettered, not delivered
        wait_until(lambda: source_offset() == {"incrementing": ROWS}, timeout=60,
                   message="the offset at the last row")
        rejected = json.loads(w.kctl("dlq", "show", "lite", "--limit", "100", "-o", "json")
                              .stdout)
        # the row as it was read, as JSON text (what the source could not make a record of)
        rows = {json.loads(r["value"])["id"]: r for r in rejected}
        assert sorted(rows) == sorted(BAD) and len(rejected) == len(BAD), "each one once"
        for i, r in rows.items():
            assert json.loads(r["value"]) == {"id": i, "day": "not-a-date", "what": f"e{i}"}
            assert r["stage"] == "TASK_POLL" and r["exception"] == "kctl.errors.DataError"
            assert "Row of events" in r["message"]
            assert "'not-a-date' is neither a date/time nor epoch milliseconds" in r["message"]
            h = r["headers"]
            assert json.loads(h["__connect.errors.source.partition"]) == {"table": "events"}
            # read as a snapshot: its position in the table (the last row: the followed one)
            offset = json.loads(h["__connect.errors.source.offset"])
            assert offset == ({"incrementing": ROWS} if i == ROWS else
                              {"incrementing": ROWS, "snapshot.key": i})
        st = w.status("lite")
        assert [t["state"] for t in st["tasks"]] == ["RUNNING"], st
    finally:
        w.stop()
