"""JdbcSource bulk (table -> topic) against a raw Spark JDBC read and psycopg COPY.

Not a test: run it by hand and read the ratios (target: JdbcSource bulk reaches at least
half the rate of a raw Spark JDBC read of the same rows).

    python benchmarks/jdbc_source.py [--records 1000000] [--quick] [--runs 3]
                                     [--url jdbc:postgresql://127.0.0.1:5432/postgres?user=postgres]

A table of N rows (id BIGINT PRIMARY KEY, user, page, ms, ok, ts: ~60 bytes of data) is
created in a scratch database of the PostgreSQL server the URL names (dropped at the end),
then read three ways in the same run:

- psycopg `COPY (SELECT ...) TO STDOUT`: the database's own ceiling for getting the rows out
  (text format, read into Python, no parsing);
- a raw Spark JDBC read of the same rows on the worker's SparkSession, partitioned on the
  primary key like JdbcSource's snapshot, into Arrow (`toArrow()`): what any Spark-backed
  source must pay at least;
- the pipeline: a JdbcSource connector in `bulk` mode in an in-process StandaloneWorker on
  the embedded log, timed from its creation until the topic's end offset reaches N. The
  rows are keyed by the primary key (a Struct key each, like every JdbcSource record of a
  table with a key) and written with the JsonConverter, schemas enabled.

For where the time goes, `JdbcSourceTask.poll()` is also driven alone (no runtime).
SparkSession start-up and a small warm-up pipeline run before anything is timed; raw
baselines are the best of 3, the pipeline the fastest of --runs runs (a fresh topic each).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from _pipeline import TARGET_RATIO, SparkJobs, best_of, start_spark, wait_for_count

from kctl.api.records import TopicPartition

RAW_REPEAT = 3
WARMUP_ROWS = 20_000


# -- the database --------------------------------------------------------------------------


class Scratch:
    """A throwaway database in the server `url` names, with the benchmark table."""

    def __init__(self, url: str):
        from kctl.connectors.jdbc._common import dialect_for

        self.dialect = dialect_for(url)
        if self.dialect.name != "postgresql":
            raise SystemExit("the benchmark needs PostgreSQL (psycopg COPY is its ceiling)")
        spec = self.dialect.parse(url)
        self.name = "kctl_bench_" + uuid.uuid4().hex[:8]
        self.admin_url = url
        base, _, query = url.partition("?")
        self.url = base.rsplit("/", 1)[0] + "/" + self.name + (f"?{query}" if query else "")
        self.host, self.port = spec.host, spec.port or 5432
        self.user = spec.params.get("user")

    def connect(self, database: str | None = None) -> Any:
        import psycopg

        return psycopg.connect(host=self.host, port=self.port, user=self.user,
                               dbname=database or self.name, autocommit=True)

    def __enter__(self) -> Scratch:
        with self.connect("postgres") as c:
            c.execute(f"CREATE DATABASE {self.name}")
        return self

    def __exit__(self, *exc: object) -> None:
        with self.connect("postgres") as c:
            c.execute(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")

    def create(self, table: str, n: int) -> float:
        """N rows through generate_series; returns the table's size in MB."""
        with self.connect() as c:
            c.execute(f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, user_name TEXT NOT NULL, "
                      "page TEXT NOT NULL, ms INT NOT NULL, ok BOOLEAN NOT NULL, "
                      "ts TIMESTAMP NOT NULL)")
            c.execute(f"INSERT INTO {table} SELECT g, 'user-' || (g % 5000), "
                      "'/products/' || (g % 397), g % 1000, g % 3 <> 0, "
                      "TIMESTAMP '2024-01-01' + g * INTERVAL '1 millisecond' "
                      f"FROM generate_series(0, {n - 1}) g")
            c.execute(f"VACUUM ANALYZE {table}")
            size = c.execute(f"SELECT pg_total_relation_size('{table}')").fetchone()[0]
        return size / 1e6


# -- baselines -----------------------------------------------------------------------------


def copy_out(db: Scratch, table: str, n: int) -> float:
    """psycopg COPY TO STDOUT (text), every block read into Python: the ceiling."""
    with db.connect() as c:
        start = time.perf_counter()
        rows = 0
        with c.cursor().copy(f"COPY (SELECT * FROM {table}) TO STDOUT") as cp:
            for block in cp:
                rows += bytes(block).count(b"\n")
        seconds = time.perf_counter() - start
    if rows != n:
        raise SystemExit(f"COPY read {rows} rows, expected {n}")
    return seconds


def spark_read(worker: Any, db: Scratch, table: str, n: int, partitions: int) -> float:
    """Spark JDBC, partitioned on the key as a snapshot reads it, into Arrow."""
    spark = worker.spark.spark()
    opts = {**db.dialect.spark_options(db.url), "dbtable": table, "fetchsize": "10000",
            "partitionColumn": "id", "lowerBound": "0", "upperBound": str(n),
            "numPartitions": str(partitions)}
    start = time.perf_counter()
    got = spark.read.format("jdbc").options(**opts).load().toArrow()
    seconds = time.perf_counter() - start
    if got.num_rows != n:
        raise SystemExit(f"Spark read {got.num_rows} rows, expected {n}")
    return seconds


# -- the pipeline --------------------------------------------------------------------------


SNAPSHOT_PARTITIONS = [0]  # --snapshot-partitions (0: the connector's default)


def source_config(db: Scratch, table: str, prefix: str, batch: int) -> dict[str, Any]:
    return {"connector.class": "JdbcSource", "connection.url": db.url, "mode": "bulk",
            "table.include.list": table, "topic.prefix": prefix, "batch.max.rows": batch,
            "poll.interval.ms": 3_600_000, "tasks.max": 1,
            "snapshot.partitions": SNAPSHOT_PARTITIONS[0]}


def topic_end(worker: Any, topic: str) -> Callable[[], int]:
    """The topic's end offset summed over its partitions (0 before it exists)."""
    consumer = worker.transport.consumer(None, {"kctl.passive": "true"})
    admin = worker.transport.admin()
    parts: list[TopicPartition] = []

    def count() -> int:
        if not parts:
            parts.extend(TopicPartition(topic, p)
                         for p in range(admin.list_topics().get(topic, 0)))
            if not parts:
                return 0
        return sum(consumer.end_offsets(parts).values())

    return count


def pipeline(worker: Any, db: Scratch, table: str, n: int, batch: int, k: int,
             jobs: SparkJobs) -> tuple[float, int]:
    """Create the connector, wait for N records in its topic; (seconds, Spark jobs)."""
    name, prefix = f"bench-{k}", f"run{k}-"
    before = jobs.snapshot()
    start = time.perf_counter()
    worker.herder.create_connector(name, source_config(db, table, prefix, batch))
    end, _ = wait_for_count(topic_end(worker, prefix + table), n, worker=worker, names=[name],
                            timeout=max(180.0, n / 1000), what="records in the topic")
    worker.herder.delete_connector(name)
    jobs_n, _ = SparkJobs.between(before, jobs.snapshot())
    return end - start, jobs_n


def verify(worker: Any, topic: str, n: int) -> str:
    """Every id once in the topic (keys are the primary key)."""
    import json

    from kctl.runtime.dlq import read_topic

    keys = [json.loads(r.key) for r in read_topic(worker.transport, topic)]
    ids = [k["payload"]["id"] if "payload" in k else k["id"] for k in keys]
    if sorted(ids) == list(range(n)):
        return f"topic verified: {n:,} records, every id exactly once, keyed"
    return f"TOPIC MISMATCH: {len(ids):,} records, {len(set(ids)):,} distinct ids, expected {n:,}"


class _Offsets:
    def offset(self, partition: Any) -> None:
        return None

    def offsets(self, partitions: Any) -> dict:
        return {}


class _Context:
    def __init__(self, worker: Any, props: dict[str, str]):
        self._worker, self.configs = worker, props
        self.offset_storage_reader = _Offsets()

    def spark(self) -> Any:
        return self._worker.spark.spark()

    def errant_record_reporter(self) -> None:
        return None


def task_alone(worker: Any, db: Scratch, table: str, n: int, batch: int) -> float:
    """JdbcSourceTask.poll() until N rows, without the runtime: reads, Arrow, batches."""
    from kctl.connectors.jdbc.source import TASK_TABLES, JdbcSourceTask
    from kctl.runtime.connector_config import as_strings

    props = as_strings({**source_config(db, table, "alone-", batch),
                        TASK_TABLES: f'["{table}"]'})
    task = JdbcSourceTask()
    task.initialize(_Context(worker, props))
    start = time.perf_counter()
    task.start(props)
    count = 0
    try:
        while count < n:
            got = task.poll()
            count += sum(len(b) for b in got or ())
        return time.perf_counter() - start
    finally:
        task.stop()


def row(label: str, n: int, seconds: float, against: float | None = None,
        target: bool = False) -> str:
    rate = n / seconds
    text = f"  {label:<50} {seconds:8.3f} s {rate:>11,.0f} rows/s"
    if against is not None:
        ratio = against / rate
        text += f"   JdbcSource/this {ratio:5.2f}"
        if target:
            text += f"  (target >= {TARGET_RATIO}: {'met' if ratio >= TARGET_RATIO else 'NOT met'})"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", "-n", type=int, default=None,
                        help="rows in the table (default 1000000; 20000 with --quick)")
    parser.add_argument("--quick", action="store_true", help="a small run")
    parser.add_argument("--runs", type=int, default=3, help="pipeline runs (default 3)")
    parser.add_argument("--batch-max-rows", type=int, default=None,
                        help="JdbcSource batch.max.rows (default: the connector's default)")
    parser.add_argument("--url", default=os.environ.get(
        "KCTL_BENCH_PG_URL", "jdbc:postgresql://127.0.0.1:5432/postgres?user=postgres"),
        help="a PostgreSQL server to make a scratch database in")
    parser.add_argument("--snapshot-partitions", type=int, default=0,
                        help="JdbcSource snapshot.partitions (default 0: Spark's parallelism)")
    parser.add_argument("--no-schemas", action="store_true",
                        help="key/value.converter.schemas.enable=false (bare JSON payloads "
                             "instead of envelopes that repeat the schema in every record)")
    args = parser.parse_args()
    SNAPSHOT_PARTITIONS[0] = args.snapshot_partitions
    n = args.records or (20_000 if args.quick else 1_000_000)
    from kctl.connectors.jdbc.source import CONFIG_DEF

    batch = args.batch_max_rows or CONFIG_DEF.keys["batch.max.rows"].default
    runs = 1 if args.quick else args.runs
    import tempfile

    from _pipeline import running_worker

    table = "clicks"
    with Scratch(args.url) as db, tempfile.TemporaryDirectory(prefix="kctl-bench-jdbc-") as work:
        mb = db.create(table, n)
        db.create("warmup", min(WARMUP_ROWS, n))
        print("kctl JdbcSource benchmark: PostgreSQL table -> embedded log, in-process "
              "StandaloneWorker")
        print(f"{n:,} rows (id BIGINT PRIMARY KEY, user_name, page, ms, ok, ts), table "
              f"{mb:.1f} MB on disk")
        schemas = "disabled" if args.no_schemas else "enabled"
        parts_note = args.snapshot_partitions or "Spark's default parallelism"
        print(f"JdbcSource: mode bulk, batch.max.rows {batch:,}, tasks.max 1, snapshot "
              f"partitions {parts_note}; worker: spark.master local[2], "
              f"JsonConverter (schemas {schemas}) for keys and values")
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPU(s)", flush=True)
        config = {"state.dir": os.path.join(work, "state"), "listeners": "http://127.0.0.1:0",
                  "spark.master": "local[2]", "spark.driver.memory": "2g",
                  "spark.ui.enabled": "false"}
        if args.no_schemas:
            config.update({"key.converter.schemas.enable": "false",
                           "value.converter.schemas.enable": "false"})
        with running_worker(config) as worker:
            spark_s = start_spark(worker)
            t = time.perf_counter()
            pipeline(worker, db, "warmup", min(WARMUP_ROWS, n), max(1000, batch // 20), 0,
                     SparkJobs(worker.spark.spark()))
            print(f"excluded from timing: SparkSession start {spark_s:.1f} s; warm-up "
                  f"pipeline {time.perf_counter() - t:.1f} s", flush=True)
            parts = max(1, int(worker.spark.spark().sparkContext.defaultParallelism))
            jobs = SparkJobs(worker.spark.spark())
            copy_s = best_of(RAW_REPEAT, lambda: copy_out(db, table, n))
            spark_s = best_of(RAW_REPEAT, lambda: spark_read(worker, db, table, n, parts))
            results = []
            for k in range(1, runs + 1):
                seconds, jobs_n = pipeline(worker, db, table, n, batch, k, jobs)
                results.append(seconds)
                check = verify(worker, f"run{k}-{table}", n) if k == 1 else ""
                print(f"  run {k}: table -> topic {seconds:6.2f} s {n / seconds:>11,.0f} rows/s "
                      f"({jobs_n} Spark jobs){'; ' + check if check else ''}", flush=True)
                if check.startswith("TOPIC MISMATCH"):
                    raise SystemExit(1)
            alone = task_alone(worker, db, table, n, batch)
    best = min(results)
    rate = n / best
    print()
    print(f"table -> topic (best of {len(results)} run(s)), against the same rows read "
          "without kctl")
    print(row("pipeline: JdbcSource bulk -> embedded log", n, best))
    print(row("raw Spark JDBC read (partitioned) -> Arrow", n, spark_s, rate, target=True))
    print(row("psycopg COPY TO STDOUT (the database's ceiling)", n, copy_s, rate))
    print(f"    raw Spark / COPY {copy_s / spark_s:5.2f}: what reading through Spark JDBC "
          "costs next to the database's own export")
    print(row("JdbcSourceTask.poll() alone (no runtime)", n, alone, rate))
    print(f"    the worker runtime around the task (keys and values to JSON, producer, "
          f"offsets): {best - alone:.2f} s, {(best - alone) / best:.0%} of the pipeline")


if __name__ == "__main__":
    main()
