"""The file pipeline's records/s on a three-worker cluster next to one worker, same broker.

Not a test: run it by hand and read the ratio.

    python benchmarks/bench_cluster_throughput.py [--records 300000] [--runs 3]
        [--partitions 6] [--tasks 6] [--workers 1,3] [--bootstrap HOST:PORT]

N JSON-lines records (benchmarks/_pipeline.py's click records, ~83 B a line) in `--files`
files go FileSource -> topic (`--partitions` partitions, created up front) -> FileSink
(delivery.guarantee exactly_once; sources in a cluster are at-least-once) through
`kctl worker start` processes in one group: first a cluster of one worker, then a fresh
cluster of three, on the same broker, with the same connector configs; `tasks.max` of
both connectors is `--tasks`, so the three workers share the work (FileSource splits the
files over its tasks by a hash of each file's identity). Each cluster first runs a small
warm-up pipeline (so every worker has started its SparkSession and run some jobs; not
timed), then `--runs` timed runs, each with a fresh topic, connectors and output:

- the connectors are created on a directory holding one small probe file per task;
- start: from the POST that creates the source until every probe line is in committed
  output files (tasks started over the group's rebalances, the sink's consumer group
  formed: on the test broker every join round waits half a session timeout). Reported,
  not in the rate;
- then the N records' files are renamed into the directory, and the run is timed until
  all N are in committed output files (polled every 50 ms): records/s = N / that time.
  The output is checked after (every id exactly once).

Each worker is its own Python process with its own JVM and SparkSession (`--master`,
local[2] by default, as the other pipeline benchmarks): on a 2-core machine three workers
share the same two cores, three times the JVM and Spark's fixed per-job cost, plus the
broker, so more workers are not expected to be faster here; the ratio says what the
cluster costs or gains on this machine, not what it gains on machines of their own.

With no `--bootstrap`, the test broker is started (and stopped) here. All worker
processes are stopped on exit, Ctrl-C included.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _cluster import (
    broker_at,
    cluster_of,
    create_connector,
    delete_connector,
    failures,
    interruptible,
    placement,
    spread,
    status,
)
from _pipeline import CommittedLines, generate, make_value, verify_output

POLL_S = 0.05
FAILED_RUNS: list[str] = []


@dataclass
class ThroughputRun:
    workers: int
    records: int
    seconds: float  # creation -> N committed lines
    running: float | None  # creation -> every task RUNNING
    started: float | None  # creation -> the probe lines all committed (the timed part starts)
    spread_over: int  # workers that ran tasks
    check: str

    @property
    def rate(self) -> float:
        return self.records / self.seconds


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                             replication_factor=1)]).values():
        fut.result(30)


def connectors(indir: Path, outdir: Path, topic: str, tasks: int, batch: int,
               flush: int) -> dict[str, dict[str, Any]]:
    return {
        "source": {"connector.class": "FileSource", "path": str(indir), "format": "json",
                   "topic": topic, "tasks.max": tasks, "batch.max.rows": batch,
                   "poll.interval.ms": 200},
        "sink": {"connector.class": "FileSink", "topics": topic, "path": str(outdir),
                 "format": "json", "delivery.guarantee": "exactly_once", "tasks.max": tasks,
                 "flush.size": flush, "rotate.interval.ms": 1000},
    }


def write_probe(indir: Path, first_id: int, files: int, per_file: int) -> int:
    """`files` small files of ids first_id.. (one per task, if the hash spreads them)."""
    indir.mkdir(parents=True, exist_ok=True)
    i = first_id
    for k in range(files):
        (indir / f"probe-{k:02d}.jsonl").write_text(
            "".join(json.dumps(make_value(j)) + "\n" for j in range(i, i + per_file)))
        i += per_file
    return i - first_id


def pipeline(cluster, bootstrap: str, work: Path, label: str, n: int, args) -> ThroughputRun:
    """One timed run on the cluster; its connectors deleted after.

    The connectors are created on a directory of small probe files (ids n..), and once the
    probe lines are all in the output (every task started, the sink's consumer group
    formed) the N records' files are moved in: timed from then until every line is in
    committed output files."""
    indir, outdir, staged = (work / f"{label}-{d}" for d in ("in", "out", "staged"))
    staged_files = generate(staged, n, args.files)
    probe = write_probe(indir, n, args.files, 10)
    topic = f"{label}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, args.partitions)
    names = {kind: f"{topic}-{kind}" for kind in ("source", "sink")}
    configs = connectors(indir, outdir, topic, args.tasks, args.batch, args.flush)
    expected = {names["source"]: min(args.tasks, args.files), names["sink"]: args.tasks}
    w1 = cluster.workers[0]
    count = CommittedLines(outdir)
    running = started = None
    spread_over = 0
    created = time.perf_counter()
    next_status = created
    try:
        for kind in ("source", "sink"):
            create_connector(w1, names[kind], configs[kind])
        deadline = created + max(300.0, n / 500)
        start = None
        while True:
            done = count()
            now = time.perf_counter()
            if start is None and done >= probe and running is not None:
                started = now - created
                start = time.perf_counter()
                for f in staged_files:  # a rename each: the source never sees half a file
                    f.rename(indir / f.name)
            if done >= probe + n:
                break
            if now >= next_status:  # statuses are REST calls: not every 50 ms
                statuses = {name: status(w1, name) for name in expected}
                if bad := failures(statuses):
                    raise RuntimeError("\n".join(bad))
                where = placement(statuses, expected)
                if running is None and where is not None:
                    running = now - created
                    spread_over = sum(1 for c in where.values() if c["task"])
                next_status = now + (POLL_S if running is None else 1.0)
            if now > deadline:
                raise TimeoutError(f"only {done} of {probe} + {n} lines after "
                                   f"{now - created:.0f} s\n{cluster.logs()}")
            time.sleep(POLL_S)
        seconds = time.perf_counter() - start
    finally:
        for name in names.values():
            delete_connector(w1, name)
    check = verify_output(outdir, n + probe)
    for d in (indir, outdir, staged):
        shutil.rmtree(d, ignore_errors=True)
    return ThroughputRun(len(cluster.workers), n, seconds, running, started, spread_over,
                         check)


def worker_settings(args) -> dict[str, Any]:
    return {"spark.master": args.master, "spark.driver.memory": args.driver_memory,
            "spark.driver.extraJavaOptions": "", "spark.sql.shuffle.partitions": "2",
            "spark.ui.showConsoleProgress": "false", "offset.flush.interval.ms": 1000}


def measure(bootstrap: str, root: Path, size: int, args) -> list[ThroughputRun]:
    with cluster_of(root / f"cluster-{size}", bootstrap, size,
                    **worker_settings(args)) as cluster:
        t = time.perf_counter()
        warm = pipeline(cluster, bootstrap, root, f"warmup{size}", args.warmup_records,
                        _warmup_args(args))
        print(f"  {size} worker(s): warm-up {args.warmup_records:,} records in "
              f"{time.perf_counter() - t:.1f} s (each worker's SparkSession start; not "
              f"timed; {warm.check})", flush=True)
        runs = []
        for k in range(args.runs):
            try:
                run = pipeline(cluster, bootstrap, root, f"run{size}w{k}", args.records, args)
            except RuntimeError as e:  # a FAILED task: this run measured nothing
                failed = [ln for ln in str(e).splitlines() if "Error" in ln][-1:]
                print(f"  {size} worker(s) run {k + 1}: FAILED ({str(e).splitlines()[0]} ... "
                      f"{''.join(failed)})", flush=True)
                FAILED_RUNS.append(f"{size} worker(s) run {k + 1}")
                continue
            runs.append(run)
            print(f"  {size} worker(s) run {k + 1}: {run.seconds:6.2f} s {run.rate:>9,.0f} "
                  f"records/s; all tasks RUNNING after {_s(run.running)} s (tasks on "
                  f"{run.spread_over} worker(s)), probe through after {_s(run.started)} s; "
                  f"{run.check}", flush=True)
        return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="a broker (default: start the test broker)")
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--runs", type=int, default=3, help="timed runs per cluster size")
    parser.add_argument("--workers", default="1,3", help="cluster sizes, comma-separated")
    parser.add_argument("--files", type=int, default=12, help="input files")
    parser.add_argument("--partitions", type=int, default=6, help="the topic's partitions")
    parser.add_argument("--tasks", type=int, default=6, help="tasks.max of both connectors")
    parser.add_argument("--batch", type=int, default=50_000, help="FileSource batch.max.rows")
    parser.add_argument("--flush", type=int, default=25_000, help="FileSink flush.size")
    parser.add_argument("--warmup-records", type=int, default=12_000)
    parser.add_argument("--master", default="local[2]", help="each worker's spark.master")
    parser.add_argument("--driver-memory", default="1g")
    args = parser.parse_args()
    sizes = [int(s) for s in args.workers.split(",") if s.strip()]

    results: dict[int, list[ThroughputRun]] = {}
    with interruptible(), broker_at(args.bootstrap) as bootstrap, \
            tempfile.TemporaryDirectory(prefix="kctl-bench-cluster-") as tmp:
        print(f"file -> topic -> file on kctl clusters ({bootstrap}): {args.records:,} JSON "
              f"lines in {args.files} files, topic of {args.partitions} partitions, tasks.max "
              f"{args.tasks}, batch.max.rows {args.batch:,}, flush.size {args.flush:,}, "
              f"FileSink exactly_once; each worker spark.master {args.master}, driver memory "
              f"{args.driver_memory}; {os.cpu_count()} CPU(s)")
        for size in sizes:  # one cluster at a time: only the one measured is running
            results[size] = measure(bootstrap, Path(tmp), size, args)

    print()
    print(f"  {'workers':<8} {'records/s':>28} {'seconds':>22} {'start (not in the rate)':>26}")
    for size, runs in results.items():
        if not runs:
            continue
        starts = [r.started for r in runs if r.started is not None]
        print(f"  {size:<8} {spread([r.rate for r in runs], '{:,.0f}'):>28} "
              f"{spread([r.seconds for r in runs]):>22} {spread(starts):>26}")
    print(f"  median (min-max) of {args.runs} run(s); records/s from the files' arrival to "
          "the last line committed; start = connector creation -> the probe lines through "
          "(rebalances, task and consumer group start)")
    if len(sizes) >= 2 and results[sizes[0]] and results[sizes[-1]]:
        base, other = sizes[0], sizes[-1]
        ratio = (statistics.median(r.rate for r in results[other])
                 / statistics.median(r.rate for r in results[base]))
        print(f"  {other}-worker / {base}-worker records/s: {ratio:.2f} (medians)")
    bad = [r for runs in results.values() for r in runs
           if not r.check.startswith("output verified")]
    if bad:
        raise SystemExit("OUTPUT MISMATCH: the figures above do not count")
    if FAILED_RUNS:
        raise SystemExit(f"a task FAILED in {', '.join(FAILED_RUNS)}: those runs are left out")


def _warmup_args(args) -> argparse.Namespace:
    """Small batches and files: about ten Spark jobs per task."""
    batch = max(100, args.warmup_records // (args.files * 10))
    return argparse.Namespace(**{**vars(args), "batch": batch, "flush": batch})


def _s(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


if __name__ == "__main__":
    main()
