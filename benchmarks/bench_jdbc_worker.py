"""Table -> topic -> table through a `kctl worker start` process, against JdbcSink alone and COPY.

Not a test: run it by hand and read the ratios (targets: table -> topic -> table through a
worker process, insert and upsert, at least half the JdbcSink task benchmark's rate in the
same run, and at least 0.15 of psql's \\copy for orders, 0.25 for clicks).

    python benchmarks/bench_jdbc_worker.py [--records 1000000] [--runs 1] [--quick]
        [--table orders|clicks] [--converter json,avro]
        [--url jdbc:postgresql://127.0.0.1:5432/postgres?user=postgres]

A PostgreSQL table of N rows in a scratch database. `orders` (the default) is a realistic
row: id BIGINT PRIMARY KEY, name TEXT, amount NUMERIC(12,2), at TIMESTAMP(3), ok BOOLEAN;
`clicks` is the integer/text table `bench_jdbc_sink.py` writes (id BIGINT PRIMARY KEY, user,
page TEXT, ms INTEGER, ok BOOLEAN). Each target is checked against its source, value by value:

- **worker path**: one standalone `kctl worker start` process (embedded log, spark.master
  local[2], JsonConverter with schemas, or with `--converter avro` Confluent's AvroConverter
  against the worker's own Schema Registry: every record keyed by its primary key, as
  JdbcSource writes them). `--converter json,avro` runs a fresh worker for each, so both
  figures stand next to the same run's baselines. JdbcSource in bulk mode copies the table
  to a topic while JdbcSink writes the topic into a new table (auto.create), `insert`
  (at_least_once) or `upsert` (pk.mode record_value on id, new keys). Timed from the two connectors' creation until
  the target table holds N rows; checked after: every id exactly once. A 20k-row pipeline
  runs first (untimed), after the worker's own background Spark start.
- **JdbcSink alone** (`bench_jdbc_sink.py`'s task benchmark, in this process, once the
  worker has stopped): the same rows as 10k-row SinkBatches into JdbcSinkTask.put_batch.
- **COPY**: psycopg `COPY ... FROM STDIN` of the rows as CSV, what `psql \\copy` does
  (orders: the CSV `COPY src TO STDOUT` wrote, only the load timed).
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _results
import bench_jdbc_sink
import pyarrow as pa
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

from kctl.api import Schema, SchemaBuilder, Type
from kctl.api.arrow import PRECISION_PARAM, connect_to_arrow_schema
from kctl.api.data import (
    DECIMAL,
    INT64_SCHEMA,
    OPTIONAL_BOOLEAN_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    timestamp_schema,
)

WARMUP_ROWS = 20_000
COPY_TARGET = {"orders": 0.15, "clicks": 0.25}  # the worker path's share of \\copy


ORDERS = "id BIGINT, name TEXT, amount NUMERIC(12,2), at TIMESTAMP(3), ok BOOLEAN"
ORDER_NAMES = ("id", "name", "amount", "at", "ok")
ORDERS_SCHEMA = (SchemaBuilder.struct().name("Order").field("id", INT64_SCHEMA)
                 .field("name", OPTIONAL_STRING_SCHEMA)
                 .field("amount", Schema(Type.BYTES, optional=True, name=DECIMAL, version=1,
                                         parameters={"scale": "2", PRECISION_PARAM: "12"}))
                 .field("at", timestamp_schema(True)).field("ok", OPTIONAL_BOOLEAN_SCHEMA)
                 .build())


def fill(db: Database, table: str, n: int, kind: str) -> None:
    """N rows of `kind`, made by the database itself."""
    if kind == "orders":
        db.execute(f"CREATE TABLE {table} ({ORDERS}, PRIMARY KEY (id))",
                   f"INSERT INTO {table} SELECT g, 'customer-' || (g % 5000), "
                   f"(g % 10000000) / 100.0 - 20000, timestamp '2024-01-01' + g * "
                   f"interval '1.001 second', g % 3 <> 0 FROM generate_series(0, {n - 1}) g",
                   f"VACUUM ANALYZE {table}")
        return
    db.execute(f"CREATE TABLE {table} ({COLUMNS}, PRIMARY KEY (id))",
               f"INSERT INTO {table} SELECT g, 'user-' || (g % 5000), '/products/' || (g % 397), "
               f"g % 1000, g % 3 <> 0 FROM generate_series(0, {n - 1}) g",
               f"VACUUM ANALYZE {table}")


def same_rows(db: Database, source: str, target: str, n: int, kind: str) -> None:
    """Every row of `source` in `target` with equal values (numerics compared as numbers,
    timestamps as instants in UTC), or SystemExit."""
    verify(db, target, n)
    if kind != "orders":
        return
    with db.connect() as c:
        c.execute("SET TIME ZONE 'UTC'")
        (equal,) = c.execute(
            f"SELECT COUNT(*) FROM {source} s JOIN {target} t USING (id) WHERE "
            "s.name = t.name AND s.amount = t.amount AND s.at = t.at AND s.ok = t.ok"
        ).fetchone()
    if equal != n:
        raise SystemExit(f"{target}: {n - equal} rows differ from {source}")


def orders_arrow(db: Database, table: str) -> pa.Table:
    """The source table as Arrow (what JdbcSource reads), for the task-alone baseline."""
    with db.connect() as c:
        c.execute("SET TIME ZONE 'UTC'")
        rows = c.execute(f"SELECT {', '.join(ORDER_NAMES)} FROM {table} ORDER BY id").fetchall()
    cols = list(zip(*rows, strict=True))
    return pa.table([pa.array(cols[0], pa.int64()), pa.array(cols[1], pa.string()),
                     pa.array(cols[2], pa.decimal128(12, 2)),
                     pa.array([t.replace(tzinfo=dt.UTC) for t in cols[3]],
                              pa.timestamp("us", tz="UTC")),
                     pa.array(cols[4], pa.bool_())],
                    schema=connect_to_arrow_schema(ORDERS_SCHEMA))


def copy_of(db: Database, source: str, target: str) -> float:
    """psql's \\copy of one table into another: COPY TO STDOUT as CSV (not timed), then
    COPY FROM STDIN of that CSV (timed)."""
    with db.connect() as c:
        buf = io.BytesIO()
        with c.cursor().copy(f"COPY {source} TO STDOUT (FORMAT csv)") as cp:
            for chunk in cp:
                buf.write(chunk)
        start = time.perf_counter()
        with c.cursor().copy(f"COPY {target} FROM STDIN (FORMAT csv)") as cp:
            cp.write(buf.getvalue())
        return time.perf_counter() - start


def count(db: Database, table: str) -> int:
    try:
        return db.one(f"SELECT COUNT(*) FROM {table}")[0]
    except Exception:  # not created yet
        return 0


CONVERTERS = {"json": "JsonConverter", "avro": "io.confluent.connect.avro.AvroConverter"}


def start_worker(work: Path, profile: str | None, converter: str = "json") -> SpiedWorker:
    worker = SpiedWorker(work, profile)
    (work / "worker.yaml").write_text(json.dumps({
        "state.dir": str(work / "state"), "listeners": LISTENER,
        "spark.master": "local[2]", "spark.driver.memory": "2g",
        "key.converter": CONVERTERS[converter], "value.converter": CONVERTERS[converter]}))
    # offset.flush.interval.ms stays at its default (10 s): a sink's offset commit writes
    # everything it has buffered, so committing every second makes JdbcSink write small
    # batches (a Spark job each)
    worker.launch()
    worker.wait_for_rest(timeout=180)
    return worker


def spark_ready(work: Path) -> bool:
    return "Spark warm-up:" in (work / "worker.log").read_text()


def pipeline(worker: SpiedWorker, db: Database, source_table: str, n: int, label: str,
             mode: str, kind: str) -> float:
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
    same_rows(db, source_table, target, n, kind)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", "-n", type=int, default=None,
                        help="rows (default 1000000; 50000 with --quick)")
    parser.add_argument("--runs", type=int, default=1, help="runs of each (default 1)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--modes", default="insert,upsert")
    parser.add_argument("--table", choices=("orders", "clicks"), default="orders",
                        help="orders: bigint, text, numeric(12,2), timestamp(3), bool "
                             "(default); clicks: bigint, text, text, int, bool")
    parser.add_argument("--profile", metavar="PREFIX",
                        help="run the worker under py-spy (raw collapsed stacks in PREFIX, "
                             "for profile_summary.py; pip install py-spy)")
    parser.add_argument("--converter", default="json",
                        help="the worker's key and value converter, comma-separated to compare "
                             "in one run: json (JsonConverter with schemas, the default) or avro "
                             "(AvroConverter, the worker's own Schema Registry)")
    parser.add_argument("--url", default="jdbc:postgresql://127.0.0.1:5432/postgres?user=postgres")
    _results.add_arguments(parser)
    args = parser.parse_args()
    n = args.records or (50_000 if args.quick else 1_000_000)
    modes = [m for m in args.modes.split(",") if m]
    converters = [c for c in args.converter.split(",") if c]
    if unknown := [c for c in converters if c not in CONVERTERS]:
        parser.error(f"unknown converter {', '.join(unknown)} (choose from "
                     f"{', '.join(CONVERTERS)})")
    db = Database(args.url)
    pipeline_s: dict[tuple[str, str], list[float]] = {
        (c, m): [] for c in converters for m in modes}
    try:
        with interruptible(), tempfile.TemporaryDirectory(prefix="kctl-bench-jdbcw-") as tmp:
            work = Path(tmp)
            kind = args.table
            fill(db, "src", n, kind)
            fill(db, "warm", WARMUP_ROWS, kind)
            print(f"table -> topic -> table through a kctl worker process: PostgreSQL, {n:,} "
                  f"rows x 5 columns ({kind}: "
                  f"{ORDERS if kind == 'orders' else COLUMNS}); {os.cpu_count()} CPU(s); python "
                  f"{sys.version.split()[0]}", flush=True)
            for converter in converters:
                home = work / converter
                home.mkdir()
                worker = start_worker(home, args.profile, converter)
                try:
                    t = time.perf_counter()
                    while not spark_ready(home) and time.perf_counter() - t < 300:
                        time.sleep(0.5)
                    for mode in modes:
                        pipeline(worker, db, "warm", WARMUP_ROWS, f"warm_{converter}_{mode}", mode,
                                 kind)
                    print(f"excluded from timing: worker start, Spark's background start and "
                          f"a {WARMUP_ROWS:,}-row pipeline per mode: "
                          f"{time.perf_counter() - t:.1f} s", flush=True)
                    for k in range(args.runs):
                        for mode in modes:
                            java = jvm_pid(worker.pid)
                            cpu = cpu_seconds(worker.pid), cpu_seconds(java)
                            seconds = pipeline(worker, db, "src", n, f"{converter}_{mode}_{k}",
                                               mode, kind)
                            cpu = (cpu_seconds(worker.pid) - cpu[0],
                                   cpu_seconds(java) - cpu[1])
                            pipeline_s[converter, mode].append(seconds)
                            print(f"  run {k + 1} worker {converter} {mode}: {seconds:.2f} s "
                                  f"({n / seconds:,.0f} rows/s; CPU: worker python "
                                  f"{cpu[0]:.1f} s, its JVM {cpu[1]:.1f} s); "
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
                if kind == "orders":
                    bench_jdbc_sink.SCHEMA = ORDERS_SCHEMA  # what its batches carry
                    data, warm = orders_arrow(db, "src"), orders_arrow(db, "warm")
                else:
                    data, warm = make_table(n), make_table(WARMUP_ROWS)
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
                        same_rows(db, "src", topic, n, kind)
                    task_s[mode] = min(times)
                    print(f"  JdbcSink task alone {mode}: {task_s[mode]:.2f} s "
                          f"({n / task_s[mode]:,.0f} rows/s; CPU: python {cpu[0]:.1f} s, JVM "
                          f"{cpu[1]:.1f} s)", flush=True)
            finally:
                engine.stop()
            copies = []
            for k in range(3):
                db.execute(f"CREATE TABLE cpy_{k} ({ORDERS if kind == 'orders' else COLUMNS})")
                copies.append(copy_of(db, "src", f"cpy_{k}") if kind == "orders"
                              else copy(db, data, 100_000, f"cpy_{k}"))
                same_rows(db, "src", f"cpy_{k}", n, kind)
            copy_s = min(copies)
            print(f"  COPY FROM STDIN (psql \\copy): {copy_s:.2f} s ({n / copy_s:,.0f} rows/s)")
    finally:
        db.drop()
    print(f"\nresults (best runs, {', '.join(converters)}):")
    figures = []
    for converter, mode in pipeline_s:
        # with Avro (no JSON envelopes) the goal is a quarter of \copy
        goal = 0.25 if converter == "avro" and kind == "orders" else COPY_TARGET[kind]
        best = min(pipeline_s[converter, mode])
        to_task = task_s[mode] / best
        to_copy = copy_s / best
        figures += [
            _results.Figure(f"table -> topic -> table through a worker, {converter}, {mode}",
                            round(n / best),
                            "rows/s", _results.Baseline("psql \\copy, same run", round(n / copy_s)),
                            round(to_copy, 3), f">= {goal} of \\copy"),
            _results.Figure(f"the same against the JdbcSink task alone, {converter}, {mode}",
                            round(n / best),
                            "rows/s", _results.Baseline("JdbcSink task alone",
                                                        round(n / task_s[mode])),
                            round(to_task, 3), ">= 0.5")]
        print(f"  worker {converter:<5} {mode:<6} {n / best:>10,.0f} rows/s   / JdbcSink alone "
              f"({n / task_s[mode]:,.0f}) {to_task:.2f} (target >= 0.5: "
              f"{'met' if to_task >= 0.5 else 'NOT met'})   / COPY ({n / copy_s:,.0f}) "
              f"{to_copy:.2f} (target >= {goal}: {'met' if to_copy >= goal else 'NOT met'})")
    _results.record(args, f"bench_jdbc_worker_{kind}_{'_'.join(converters)}",
                    f"JDBC table -> topic -> table through a worker ({n:,} rows of {kind}, "
                    f"{' and '.join(converters)} converters)", figures)


if __name__ == "__main__":
    main()
