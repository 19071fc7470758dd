"""Table -> topic -> table through a `kctl worker start` process, against JdbcSink alone and COPY.

Not a test: run it by hand and read the ratios (targets, issue 23: table -> topic -> table
through worker processes, insert and upsert, at least half the JdbcSink task benchmark's
rate in the same run and at least a quarter of psql's \\copy).

    python benchmarks/bench_jdbc_worker.py [--records 1000000] [--runs 1] [--quick]
        [--url jdbc:postgresql://127.0.0.1:5432/postgres?user=postgres]

A PostgreSQL table of N rows (id BIGINT PRIMARY KEY, user, page TEXT, ms INTEGER, ok
BOOLEAN: the columns `bench_jdbc_sink.py` writes) in a scratch database:

- **worker path**: one standalone `kctl worker start` process (embedded log, spark.master
  local[2], JsonConverter with schemas: every record keyed by its primary key, as JdbcSource
  writes them). JdbcSource in bulk mode copies the table to a topic while JdbcSink writes
  the topic into a new table (auto.create), `insert` (at_least_once) or `upsert`
  (pk.mode record_value on id, new keys). Timed from the two connectors' creation until
  the target table holds N rows; checked after: every id exactly once. A 20k-row pipeline
  runs first (untimed), after the worker's own background Spark start.
- **JdbcSink alone** (`bench_jdbc_sink.py`'s task benchmark, in this process, once the
  worker has stopped): the same rows as 10k-row SinkBatches into JdbcSinkTask.put_batch.
- **COPY**: psycopg `COPY ... FROM STDIN` of the rows as CSV, what `psql \\copy` does.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _cluster import (
    SpiedWorker,
    cpu_seconds,
    create_connector,
    delete_connector,
    failures,
    interruptible,
    jvm_pid,
    status,
)
from bench_jdbc_sink import COLUMNS, Database, copy, jdbc_sink, make_table, verify
from support.worker import LISTENER  # tests/ is on the path through _cluster

WARMUP_ROWS = 20_000


def fill(db: Database, table: str, n: int) -> None:
    """The rows make_table(n) holds, made by the database itself."""
    db.execute(f"CREATE TABLE {table} ({COLUMNS}, PRIMARY KEY (id))",
               f"INSERT INTO {table} SELECT g, 'user-' || (g % 5000), '/products/' || (g % 397), "
               f"g % 1000, g % 3 <> 0 FROM generate_series(0, {n - 1}) g",
               f"VACUUM ANALYZE {table}")


def count(db: Database, table: str) -> int:
    try:
        return db.one(f"SELECT COUNT(*) FROM {table}")[0]
    except Exception:  # not created yet
        return 0


def start_worker(work: Path, profile: str | None) -> SpiedWorker:
    worker = SpiedWorker(work, profile)
    (work / "worker.yaml").write_text(json.dumps({
        "state.dir": str(work / "state"), "listeners": LISTENER,
        "spark.master": "local[2]", "spark.driver.memory": "2g"}))
    # offset.flush.interval.ms stays at its default (10 s): a sink's offset commit writes
    # everything it has buffered, so committing every second makes JdbcSink write small
    # batches (a Spark job each)
    worker.launch()
    worker.wait_for_rest(timeout=180)
    return worker


def spark_ready(work: Path) -> bool:
    return "Spark warm-up:" in (work / "worker.log").read_text()


def pipeline(worker: SpiedWorker, db: Database, source_table: str, n: int, label: str,
             mode: str) -> float:
    """Create JdbcSource (bulk) and JdbcSink; seconds until the target holds N rows."""
    target = f"{label}_out"
    props: dict[str, Any] = {}
    if mode == "upsert":
        props = {"insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id"}
    source = {"connector.class": "JdbcSource", "connection.url": db.url, "mode": "bulk",
              "table.include.list": source_table, "topic.prefix": f"{label}-",
              "poll.interval.ms": 3_600_000, "tasks.max": 1}
    sink = {"connector.class": "JdbcSink", "connection.url": db.url,
            "topics": f"{label}-{source_table}", "table.name.format": target,
            "auto.create": "true", **props}
    names = (f"{label}-src", f"{label}-sink")
    start = time.perf_counter()
    create_connector(worker, names[0], source)  # type: ignore[arg-type]
    create_connector(worker, names[1], sink)  # type: ignore[arg-type]
    next_check = start + 1
    try:
        while count(db, target) < n:
            now = time.perf_counter()
            if now >= next_check:
                if bad := failures({name: status(worker, name) for name in names}):  # type: ignore[arg-type]
                    raise RuntimeError("\n".join(bad))
                next_check = now + 1
            if now - start > max(600, n / 500):
                raise TimeoutError(f"{count(db, target)} of {n} rows in {target}")
            time.sleep(0.1)
        seconds = time.perf_counter() - start
    finally:
        for name in names:
            delete_connector(worker, name)  # type: ignore[arg-type]
    verify(db, target, n)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", "-n", type=int, default=None,
                        help="rows (default 1000000; 50000 with --quick)")
    parser.add_argument("--runs", type=int, default=1, help="runs of each (default 1)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--modes", default="insert,upsert")
    parser.add_argument("--profile", metavar="PREFIX",
                        help="run the worker under py-spy (raw collapsed stacks in PREFIX, "
                             "for profile_summary.py; pip install py-spy)")
    parser.add_argument("--url", default="jdbc:postgresql://127.0.0.1:5432/postgres?user=postgres")
    args = parser.parse_args()
    n = args.records or (50_000 if args.quick else 1_000_000)
    modes = [m for m in args.modes.split(",") if m]
    db = Database(args.url)
    pipeline_s: dict[str, list[float]] = {m: [] for m in modes}
    try:
        with interruptible(), tempfile.TemporaryDirectory(prefix="kctl-bench-jdbcw-") as tmp:
            work = Path(tmp)
            fill(db, "src", n)
            fill(db, "warm", WARMUP_ROWS)
            print(f"table -> topic -> table through a kctl worker process: PostgreSQL, {n:,} "
                  f"rows x 5 columns; {os.cpu_count()} CPU(s); python "
                  f"{sys.version.split()[0]}", flush=True)
            worker = start_worker(work, args.profile)
            try:
                t = time.perf_counter()
                while not spark_ready(work) and time.perf_counter() - t < 300:
                    time.sleep(0.5)
                for mode in modes:
                    pipeline(worker, db, "warm", WARMUP_ROWS, f"warm_{mode}", mode)
                print(f"excluded from timing: worker start, Spark's background start and a "
                      f"{WARMUP_ROWS:,}-row pipeline per mode: {time.perf_counter() - t:.1f} s",
                      flush=True)
                for k in range(args.runs):
                    for mode in modes:
                        java = jvm_pid(worker.pid)
                        cpu = cpu_seconds(worker.pid), cpu_seconds(java)
                        seconds = pipeline(worker, db, "src", n, f"{mode}_{k}", mode)
                        cpu = (cpu_seconds(worker.pid) - cpu[0],
                               cpu_seconds(java) - cpu[1])
                        pipeline_s[mode].append(seconds)
                        print(f"  run {k + 1} worker {mode}: {seconds:.2f} s "
                              f"({n / seconds:,.0f} rows/s; CPU: worker python {cpu[0]:.1f} s, its "
                              f"JVM {cpu[1]:.1f} s); "
                              "every id exactly once", flush=True)
            finally:
                try:
                    worker.stop()
                except AssertionError as e:  # measured already; say so and go on
                    print(f"  (the worker was slow to stop: {str(e).splitlines()[0]})")
            print("baselines (the worker stopped):", flush=True)
            from kctl.runtime.spark import SparkEngine

            engine = SparkEngine({"spark.master": "local[2]", "spark.driver.memory": "2g",
                                  "spark.ui.enabled": "false", "spark.start": "lazy"})
            try:
                data = make_table(n)
                warm = make_table(WARMUP_ROWS)
                for _ in range(2):
                    jdbc_sink(engine, db, warm, 100_000, f"w{time.monotonic_ns()}")
                upsert = {"insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id"}
                task_s: dict[str, float] = {}
                java = jvm_pid(os.getpid())
                for mode in modes:
                    times = []
                    for k in range(max(1, args.runs)):
                        topic = f"task_{mode}_{k}"
                        cpu = cpu_seconds(os.getpid()), cpu_seconds(java)
                        times.append(jdbc_sink(engine, db, data, 100_000, topic,
                                               **(upsert if mode == "upsert" else {})))
                        cpu = cpu_seconds(os.getpid()) - cpu[0], cpu_seconds(java) - cpu[1]
                        verify(db, topic, n)
                    task_s[mode] = min(times)
                    print(f"  JdbcSink task alone {mode}: {task_s[mode]:.2f} s "
                          f"({n / task_s[mode]:,.0f} rows/s; CPU: python {cpu[0]:.1f} s, JVM "
                          f"{cpu[1]:.1f} s)", flush=True)
            finally:
                engine.stop()
            copies = []
            for k in range(3):
                db.execute(f"CREATE TABLE cpy_{k} ({COLUMNS})")
                copies.append(copy(db, data, 100_000, f"cpy_{k}"))
                verify(db, f"cpy_{k}", n)
            copy_s = min(copies)
            print(f"  COPY FROM STDIN (psql \\copy): {copy_s:.2f} s ({n / copy_s:,.0f} rows/s)")
    finally:
        db.drop()
    print("\nresults (best runs):")
    for mode in modes:
        best = min(pipeline_s[mode])
        to_task = task_s[mode] / best
        to_copy = copy_s / best
        print(f"  worker {mode:<6} {n / best:>10,.0f} rows/s   / JdbcSink alone "
              f"({n / task_s[mode]:,.0f}) {to_task:.2f} (target >= 0.5: "
              f"{'met' if to_task >= 0.5 else 'NOT met'})   / COPY ({n / copy_s:,.0f}) "
              f"{to_copy:.2f} (target >= 0.25: {'met' if to_copy >= 0.25 else 'NOT met'})")


if __name__ == "__main__":
    main()
