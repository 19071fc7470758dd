"""JdbcSink on PostgreSQL against raw Spark JDBC writes and psycopg COPY of the same rows.

Not a test: run it by hand and read the ratios (targets, issue 15: JdbcSink insert at
least half the rate of a raw Spark JDBC write at batches of 100k rows; upsert at least
100k rows/s).

    python benchmarks/bench_jdbc_sink.py [--records 500000] [--batch 100000] [--quick]
        [--url jdbc:postgresql://127.0.0.1:5432/postgres?user=postgres] [--runs 3]

N rows of five columns (id BIGINT, user, page TEXT, ms INTEGER, ok BOOLEAN) go into
PostgreSQL, in a database the benchmark creates and drops:

- JdbcSinkTask, no runtime: SinkBatches of 10k rows (what the runtime hands a sink per
  poll) through put_batch, batch.size rows per write, then flush. insert (at_least_once
  and exactly_once, on a new table), upsert (pk.mode=record_value on id) of new keys into
  an empty table, and upsert of the same keys again (every row an update).
- raw Spark: the same Arrow batches through createDataFrame and df.write.jdbc(append) into
  a table made beforehand, with the plain URL a user would write, and (for reference) with
  reWriteBatchedInserts=true, which JdbcSink adds to its staging writes.
- psycopg COPY: the same batches as CSV through COPY FROM STDIN: the database's ceiling.

The SparkSession start and a warm-up (untimed) come first. Each run goes through every
phase once (a shared machine's load then weighs on JdbcSink and the baselines alike), each
on a fresh table checked to hold every id once; each phase reports its best run.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kctl.api import SchemaBuilder, SinkBatch, TopicPartition  # noqa: E402
from kctl.api.arrow import connect_to_arrow_schema  # noqa: E402
from kctl.api.data import (  # noqa: E402
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_BOOLEAN_SCHEMA,
    STRING_SCHEMA,
)

TARGET_RATIO = 0.5
UPSERT_TARGET = 100_000  # rows/s
POLL = 10_000  # rows per SinkBatch, the runtime's consumer.max.poll.records
SCHEMA = (SchemaBuilder.struct().name("Click").field("id", INT64_SCHEMA)
          .field("user", STRING_SCHEMA).field("page", STRING_SCHEMA).field("ms", INT32_SCHEMA)
          .field("ok", OPTIONAL_BOOLEAN_SCHEMA).build())
COLUMNS = "id BIGINT, \"user\" TEXT, page TEXT, ms INTEGER, ok BOOLEAN"


def make_table(n: int, start: int = 0, tag: str = "") -> pa.Table:
    ids = range(start, start + n)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "user": [f"user-{i % 5000}{tag}" for i in ids],
        "page": [f"/products/{i % 397}" for i in ids],
        "ms": pa.array([i % 1000 for i in ids], pa.int32()),
        "ok": [i % 3 != 0 for i in ids],
    }, schema=connect_to_arrow_schema(SCHEMA))


class Context:
    """Just enough of a sink task context to drive JdbcSinkTask without a runtime."""

    def __init__(self, engine: Any, props: dict[str, str]) -> None:
        self._engine, self.configs = engine, props

    def spark(self) -> Any:
        return self._engine.spark()

    def offset(self, offsets: Any) -> None:
        pass

    def timeout(self, timeout_ms: int) -> None:
        pass

    def errant_record_reporter(self) -> None:
        return None


class Database:
    """A fresh PostgreSQL database for the run, dropped at the end."""

    def __init__(self, url: str) -> None:
        from kctl.connectors.jdbc._common import dialect_for

        self.dialect = dialect_for(url)
        if self.dialect.name != "postgresql":
            raise SystemExit("bench_jdbc_sink measures PostgreSQL (psycopg COPY is its ceiling)")
        self.server_url = url
        self.name = "kctl_bench_" + uuid.uuid4().hex[:8]
        base, _, query = url.partition("?")
        self.url = base.rsplit("/", 1)[0] + "/" + self.name + (f"?{query}" if query else "")
        with self._admin() as c:
            c.execute(f"CREATE DATABASE {self.name}")

    def _admin(self) -> Any:
        conn = self.dialect.connect(self.server_url)
        conn.autocommit = True
        return conn

    def connect(self) -> Any:
        conn = self.dialect.connect(self.url)
        conn.autocommit = True
        return conn

    def execute(self, *statements: str) -> None:
        with self.connect() as c:
            for s in statements:
                c.execute(s)

    def one(self, statement: str) -> tuple:
        with self.connect() as c:
            return c.execute(statement).fetchone()

    def drop(self) -> None:
        with self._admin() as c:
            c.execute(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")


def batches(table: pa.Table, topic: str) -> list[SinkBatch]:
    out = []
    for start in range(0, table.num_rows, POLL):
        piece = table.slice(start, POLL).combine_chunks()
        n = piece.num_rows
        out.append(SinkBatch(topic, 0, list(range(start, start + n)), [0] * n, [()] * n,
                             SCHEMA, pa.StructArray.from_arrays(
                                 [c.chunk(0) for c in piece.columns], fields=list(piece.schema))))
    return out


def jdbc_sink(engine: Any, db: Database, table: pa.Table, batch: int, topic: str,
              **props: str) -> float:
    """put_batch of 10k-row SinkBatches, then flush; start/stop are not timed."""
    from kctl.api import OffsetAndMetadata
    from kctl.connectors.jdbc import JdbcSinkTask

    config = {"name": f"bench-{topic}", "connection.url": db.url, "auto.create": "true",
              "batch.size": str(batch), "batch.max.wait.ms": "3600000", **props}
    task = JdbcSinkTask()
    task.initialize(Context(engine, config))  # type: ignore[arg-type]
    task.start(config)
    tp = TopicPartition(topic, 0)
    task.open([tp])
    pieces = batches(table, topic)
    start = time.perf_counter()
    for b in pieces:
        task.put_batch(b)
    task.pre_commit({tp: OffsetAndMetadata(table.num_rows)})
    elapsed = time.perf_counter() - start
    task.stop()
    return elapsed


def raw_spark(engine: Any, db: Database, table: pa.Table, batch: int, target: str,
              rewrite: bool = False) -> float:
    from kctl.connectors.jdbc._common import spark_url

    spark = engine.spark()
    url = spark_url(db.url) + ("&reWriteBatchedInserts=true" if rewrite else "")
    opts = {"url": url, "driver": db.dialect.driver_class, "dbtable": target}
    start = time.perf_counter()
    for i in range(0, table.num_rows, batch):
        spark.createDataFrame(table.slice(i, batch)).write.format("jdbc").options(**opts) \
            .mode("append").save()
    return time.perf_counter() - start


def copy(db: Database, table: pa.Table, batch: int, target: str) -> float:
    """COPY FROM STDIN of CSV that pyarrow writes: what PostgreSQL itself can take."""
    with db.connect() as c:
        start = time.perf_counter()
        for i in range(0, table.num_rows, batch):
            buf = io.BytesIO()
            pacsv.write_csv(table.slice(i, batch), buf,
                            pacsv.WriteOptions(include_header=False))
            with c.cursor().copy(f"COPY {target} FROM STDIN (FORMAT csv)") as cp:
                cp.write(buf.getvalue())
        return time.perf_counter() - start


def verify(db: Database, target: str, n: int, tag: str | None = None) -> str:
    count, distinct = db.one(f"SELECT COUNT(*), COUNT(DISTINCT id) FROM {target}")
    if (count, distinct) != (n, n):
        raise SystemExit(f"{target}: {count} rows, {distinct} ids; expected {n} of each")
    if tag is not None:
        (stale,) = db.one(f"SELECT COUNT(*) FROM {target} WHERE \"user\" NOT LIKE '%{tag}'")
        if stale:
            raise SystemExit(f"{target}: {stale} rows not updated by the upsert")
    return "every id exactly once"


def interleaved(runs: int, phases: dict[str, Callable[[int], tuple[float, str]]]
                ) -> dict[str, float]:
    """Each run goes through every phase once, so a machine shared with other work slows
    JdbcSink and its baselines alike; each phase's best run counts."""
    times: dict[str, list[float]] = {label: [] for label in phases}
    for k in range(runs):
        for label, once in phases.items():
            seconds, check = once(k)
            times[label].append(seconds)
            print(f"    run {k + 1} {label}: {seconds:.3f} s, {check}", flush=True)
    return {label: min(t) for label, t in times.items()}


def rate_row(label: str, n: int, seconds: float, extra: str = "") -> str:
    return f"  {label:<58} {seconds:8.3f} s {n / seconds:>11,.0f} rows/s{extra}"


def ratio(sink_s: float, raw_s: float, target: float | None = TARGET_RATIO) -> str:
    r = raw_s / sink_s  # rates: (n / sink_s) / (n / raw_s)
    if target is None:
        return f"   JdbcSink/this {r:5.2f}  (for reference)"
    return f"   JdbcSink/this {r:5.2f}  (target >= {target}: {'met' if r >= target else 'NOT met'})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", "-n", type=int, default=None,
                        help="rows (default 500000; 20000 with --quick)")
    parser.add_argument("--batch", type=int, default=None,
                        help="rows per JdbcSink batch and per raw write (default 100000; "
                             "10000 with --quick)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each (default 3)")
    parser.add_argument("--quick", action="store_true", help="a small run")
    parser.add_argument("--url", default="jdbc:postgresql://127.0.0.1:5432/postgres?user=postgres",
                        help="a PostgreSQL server (the benchmark makes its own database)")
    args = parser.parse_args()
    n = args.records or (20_000 if args.quick else 500_000)
    batch = args.batch or (10_000 if args.quick else 100_000)
    runs = 1 if args.quick and args.runs == 3 else args.runs

    from kctl.runtime.spark import SparkEngine

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    engine = SparkEngine({"spark.master": "local[2]", "spark.driver.memory": "2g",
                          "spark.ui.enabled": "false"})
    db = Database(args.url)
    try:
        run(engine, db, n, batch, runs)
    finally:
        engine.stop()
        db.drop()


def run(engine: Any, db: Database, n: int, batch: int, runs: int) -> None:
    print(f"kctl JdbcSink benchmark: PostgreSQL, {n:,} rows x 5 columns, batches of {batch:,} "
          f"rows, best of {runs}\npython {sys.version.split()[0]}, {os.cpu_count()} CPU(s)",
          flush=True)
    data = make_table(n)
    updated = make_table(n, tag="-u")
    t = time.perf_counter()
    engine.spark()
    spark_s = time.perf_counter() - t
    t = time.perf_counter()
    db.execute(f"CREATE TABLE warm ({COLUMNS})")
    warm = make_table(min(n, 20_000))
    for _ in range(3):
        raw_spark(engine, db, warm, batch, "warm")
        jdbc_sink(engine, db, warm, batch, f"warm_{uuid.uuid4().hex[:6]}")
    print(f"excluded from timing: SparkSession start {spark_s:.1f} s; warm-up "
          f"{time.perf_counter() - t:.1f} s", flush=True)

    def sink_run(label: str, props: dict[str, str], upsert_again: bool = False
                 ) -> Callable[[int], tuple[float, str]]:
        def once(k: int) -> tuple[float, str]:
            topic = f"{label}_{k}"
            if upsert_again:
                jdbc_sink(engine, db, data, batch, topic, **props)
                return jdbc_sink(engine, db, updated, batch, topic, **props), \
                    verify(db, topic, n, "-u")
            return jdbc_sink(engine, db, data, batch, topic, **props), verify(db, topic, n)
        return once

    def raw_run(label: str, fn: Callable[[str], float]) -> Callable[[int], tuple[float, str]]:
        def once(k: int) -> tuple[float, str]:
            target = f"{label}_{k}"
            db.execute(f"CREATE TABLE {target} ({COLUMNS})")
            return fn(target), verify(db, target, n)
        return once

    upsert = {"insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id"}
    phases = {
        "insert": sink_run("ins", {}),
        "raw": raw_run("raw", lambda t: raw_spark(engine, db, data, batch, t)),
        "insert eos": sink_run("eos", {"delivery.guarantee": "exactly_once"}),
        "upsert new": sink_run("ups", upsert),
        "upsert again": sink_run("upa", upsert, upsert_again=True),
        "raw rewrite": raw_run("rrw", lambda t: raw_spark(engine, db, data, batch, t,
                                                          rewrite=True)),
        "copy": raw_run("cpy", lambda t: copy(db, data, batch, t)),
    }
    seconds = interleaved(runs, phases)
    insert_s, raw_s, eos_s = seconds["insert"], seconds["raw"], seconds["insert eos"]
    upsert_new_s, upsert_s = seconds["upsert new"], seconds["upsert again"]
    raw_rw_s, copy_s = seconds["raw rewrite"], seconds["copy"]

    def upsert_verdict(seconds: float) -> str:
        rate = n / seconds
        return f"   (target >= {UPSERT_TARGET:,} rows/s: " \
               f"{'met' if rate >= UPSERT_TARGET else 'NOT met'})"

    print("\nresults (best runs):")
    print(rate_row("JdbcSink insert, at_least_once", n, insert_s))
    print(rate_row("JdbcSink insert, exactly_once", n, eos_s))
    print(rate_row("JdbcSink upsert, new keys", n, upsert_new_s, upsert_verdict(upsert_new_s)))
    print(rate_row("JdbcSink upsert, every key again (updates)", n, upsert_s,
                   upsert_verdict(upsert_s)))
    print(rate_row("raw: Spark createDataFrame + write.jdbc append", n, raw_s,
                   ratio(insert_s, raw_s)))
    print(rate_row("raw: the same, reWriteBatchedInserts=true", n, raw_rw_s,
                   ratio(insert_s, raw_rw_s, None)))
    print(rate_row("ceiling: psycopg COPY (CSV from pyarrow)", n, copy_s,
                   ratio(insert_s, copy_s, None)))
    print(f"  exactly_once / at_least_once insert: {insert_s / eos_s:.2f}; "
          f"upsert (updates) / raw Spark insert: {raw_s / upsert_s:.2f}")


if __name__ == "__main__":
    main()
