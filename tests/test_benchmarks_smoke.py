"""The pipeline benchmarks run end to end at a tiny size.

Only that they finish, print their rows and ratios, and that every run's output was
verified is checked, never a figure: timings on shared CI machines mean nothing, and the
benchmarks are read by people, not asserted. A benchmark exits 1 when any run's output is
wrong, so one verified run cannot hide another that lost records.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECORDS = "2000"

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def run_benchmark(script: str, *options: str) -> str:
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--quick",
                        "--records", RECORDS, *options], capture_output=True, text=True,
                       timeout=540)
    assert r.returncode == 0, f"{script} failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r.stdout


def every_run_verified(out: str) -> None:
    runs = [ln for ln in out.splitlines() if ln.strip().startswith("run ")]
    assert runs, f"no run lines in:\n{out}"
    for line in runs:
        assert "every id exactly once" in line, line


def line_with(out: str, label: str) -> str:
    lines = [ln for ln in out.splitlines() if label in ln]
    assert lines, f"no line with {label!r} in:\n{out}"
    return lines[0]


def test_file_pipeline_benchmark_prints_rates_and_ratios():
    out = run_benchmark("bench_file_pipeline.py")
    for label in ("pipeline: FileSource -> embedded log", "pipeline: embedded log -> FileSink",
                  "FileSourceTask.poll()", "FileSinkTask.put_batch()"):
        assert "records/s" in line_with(out, label)
    for label in ("raw (a): Python read", "raw (b): embedded log producer",
                  "raw (c): embedded log producer", "raw: embedded log consumer read"):
        line = line_with(out, label)
        assert "records/s" in line and "pipeline/raw" in line and "target >= 0.5" in line
    assert "ceiling for pipeline/raw (a)" in line_with(out, "Spark alone: its json reader")
    assert "excluded from timing: SparkSession start" in out
    every_run_verified(out)


@pytest.mark.broker
def test_broker_pipeline_benchmark_prints_rates_ratios_and_tolerance_cost():
    # one run of each errors.tolerance setting: each run waits for its consumer group's join
    out = run_benchmark("bench_broker_pipeline.py", "--tolerance-runs", "1")
    for label in ("pipeline: FileSource -> broker", "pipeline: broker -> FileSink"):
        assert "records/s" in line_with(out, label)
    for label in ("raw: confluent-kafka produce", "raw: confluent-kafka consume"):
        line = line_with(out, label)
        assert "records/s" in line and "pipeline/raw" in line and "target >= 0.5" in line
    assert "ceiling for pipeline/raw" in line_with(out, "Spark alone: its json reader")
    assert "target < 5%" in line_with(out, "cost of all")
    assert "excluded from timing: SparkSession start" in out
    every_run_verified(out)


def test_fresh_worker_benchmark_times_the_first_record_and_checks_the_output():
    """One fresh `kctl worker start` (eager Spark) at a tiny size: the benchmark starts the
    worker the way a user does, so it breaks when the worker's start does."""
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_fresh_worker.py"),
                        "--records", RECORDS, "--up", "0", "--idle", "0", "--modes", "eager",
                        "--on", "embedded"], capture_output=True, text=True, timeout=540)
    assert r.returncode == 0, f"bench_fresh_worker.py failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    out = r.stdout
    run = line_with(out, "embedded spark.start eager tasks.max 1 batch.max.rows 100,000 "
                         "exactly_once run 1:")
    assert "first record" in run and "idle RSS python" in run
    assert f"output verified: {int(RECORDS) + 1:,} lines, every id exactly once" in run
    assert "(target <= 3)" in line_with(out, "embedded spark.start eager tasks.max 1 "
                                             "batch.max.rows 100,000 exactly_once: first record")
    assert "raw Python copy" in out


def test_dlq_show_benchmark_checks_every_format_and_prints_client_time():
    out = run_benchmark("bench_dlq_show.py")
    for fmt in ("json", "yaml", "table"):
        assert "client time beyond REST" in line_with(out, f"kctl dlq show -o {fmt}")
    assert "raw: GET /connectors/NAME/dlq" in out


def test_jdbc_sink_benchmark_prints_rates_and_ratios(postgres_server):
    url = f"jdbc:postgresql://127.0.0.1:{postgres_server.port}/postgres?user={postgres_server.user}"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_jdbc_sink.py"),
                        "--quick", "--records", RECORDS, "--url", url],
                       capture_output=True, text=True, timeout=540)
    assert r.returncode == 0, f"bench_jdbc_sink.py failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    out = r.stdout
    for label in ("JdbcSink insert, at_least_once", "JdbcSink insert, exactly_once"):
        assert "rows/s" in line_with(out, label)
    for label in ("JdbcSink upsert, new keys", "JdbcSink upsert, every key again"):
        assert "target >= 100,000 rows/s" in line_with(out, label)
    assert "target >= 0.5" in line_with(out, "raw: Spark createDataFrame + write.jdbc")
    assert "JdbcSink/this" in line_with(out, "ceiling: psycopg COPY")
    assert "excluded from timing: SparkSession start" in out
    every_run_verified(out)


def test_jdbc_source_benchmark_prints_rates_and_ratios(postgres_server):
    """benchmarks/jdbc_source.py at a tiny size on the test PostgreSQL: its topic holds every
    row once, and it prints the pipeline against Spark JDBC and COPY."""
    import os

    url = f"jdbc:postgresql://127.0.0.1:{postgres_server.port}/postgres?user={postgres_server.user}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's kctl, not an installed one
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "jdbc_source.py"), "--quick",
                        "--records", RECORDS, "--url", url], capture_output=True, text=True,
                       timeout=540, env=env)
    assert r.returncode == 0, f"jdbc_source.py failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    out = r.stdout
    assert "every id exactly once, keyed" in line_with(out, "run 1:")
    assert "rows/s" in line_with(out, "pipeline: JdbcSource bulk")
    for label in ("raw Spark JDBC read", "psycopg COPY TO STDOUT",
                  "JdbcSourceTask.poll() alone"):
        assert "JdbcSource/this" in line_with(out, label)
    assert "target >= 0.5" in line_with(out, "raw Spark JDBC read")
