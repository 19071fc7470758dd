"""A freshly started `kctl worker start` process: first record latency and first N records.

Not a test: run it by hand and read the figures (targets, issue 27: connectors created on a
worker that is up -> first record in the sink's output <= 3 s; the first 400k records end
to end >= 0.5 of a raw Python copy of the same lines, 2M >= 0.8).

    python benchmarks/bench_fresh_worker.py [--records 400000] [--up 20]
        [--modes eager,lazy] [--runs 1] [--on embedded,broker] [--bootstrap HOST:PORT]
        [--profile PREFIX] [--tasks-max 1,2] [--batch-max-rows 50000,100000]
        [--delivery exactly_once,at_least_once]

The last three sweep the configurations users choose (FileSource `tasks.max` and
`batch.max.rows`, FileSink `delivery.guarantee`): each combination is a fresh worker.

For each `spark.start` mode (each a fresh worker process, one after the other):

1. `kctl worker start` (`--on embedded`: standalone on the embedded log; `--on broker`: a
   one-worker cluster on the test broker or `--bootstrap`), and `--up` seconds of waiting once its REST API answers
   (a user types the next command);
2. FileSource and exactly-once FileSink (JSON, the connectors' defaults but
   rotate.interval.ms 1000) are created on a directory holding one probe line: **first
   record** = creation -> the probe line in a committed output file;
3. then N JSON lines (4 files) are renamed into the directory: **first N** = their arrival
   -> every line committed (records/s), and **from creation** = creation -> every line
   committed (what a user who created the connectors on the files waits for).

The baseline, measured in the same run after the workers: a raw Python copy of the same
lines (read each file, `json.loads` and `json.dumps` each line, write one file). The output
is verified each time: every id exactly once.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from _cluster import (
    SpiedWorker,
    broker_at,
    cpu_seconds,
    create_connector,
    failures,
    interruptible,
    jvm_pid,
    rss_mb,
    status,
)
from _pipeline import CommittedLines, generate, make_value, verify_output
from support.cluster import cluster_settings
from support.worker import LISTENER  # tests/ is on the path through _cluster

POLL_S = 0.05


def raw_copy(paths: list[Path], out: Path) -> float:
    """What a plain Python program does with the same lines: parse, re-encode, write."""
    start = time.perf_counter()
    loads, dumps = json.loads, json.dumps
    with open(out, "w") as f:
        for p in paths:
            with open(p, "rb") as src:
                f.writelines(dumps(loads(line)) + "\n" for line in src)
    return time.perf_counter() - start


def worker_config(work: Path, mode: str, args: argparse.Namespace,
                  bootstrap: str | None) -> dict[str, Any]:
    conf: dict[str, Any] = {"listeners": LISTENER,
                            "state.dir": str(work / "state"), "spark.master": args.master,
                            "spark.start": mode, "offset.flush.interval.ms": 1000}
    if bootstrap is not None:
        conf = {**cluster_settings(bootstrap, f"fresh-{work.name}-{os.getpid()}"), **conf,
                "spark.driver.memory": "1g", "spark.driver.extraJavaOptions": "",
                "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
                "rebalance.timeout.ms": 10000, "exactly.once.source.support": "disabled",
                # the test broker answers a waiting fetch only when the wait is over, so the
                # sink reads each batch about half the wait late (Kafka answers at once);
                # the suite's 200 ms, set there to spare the broker hundreds of idle
                # consumers, would measure that wait rather than the path
                "fetch.max.wait.ms": args.fetch_max_wait_ms}
        conf.pop("spark.sql.shuffle.partitions", None)
    return conf


def one_worker(root: Path, mode: str, n: int, args: argparse.Namespace,
               bootstrap: str | None, place: str, run: int = 0,
               setting: tuple[int, int, str] = (1, 100_000, "exactly_once")) -> dict[str, Any]:
    tasks_max, batch_rows, delivery = setting
    # a cluster's group and topics are per run
    work = root / f"worker-{place}-{mode}-{run}-{tasks_max}-{batch_rows}-{delivery}"
    work.mkdir(parents=True)
    (work / "worker.yaml").write_text(yaml.safe_dump(worker_config(work, mode, args,
                                                                   bootstrap)))
    indir, outdir, staged = work / "in", work / "out", work / "staged"
    staged_files = generate(staged, n, 4)
    indir.mkdir()
    (indir / "probe.jsonl").write_text(json.dumps(make_value(n)) + "\n")
    worker = SpiedWorker(work, args.profile and f"{args.profile}.{place}.{mode}.txt")
    launched = time.perf_counter()
    worker.launch()
    try:
        worker.wait_for_rest(timeout=120)
        rest_up = time.perf_counter() - launched
        time.sleep(args.up)
        source = {"connector.class": "FileSource", "path": str(indir), "format": "json",
                  "topic": "clicks", "tasks.max": tasks_max, "batch.max.rows": batch_rows}
        sink = {"connector.class": "FileSink", "topics": "clicks", "path": str(outdir),
                "format": "json", "delivery.guarantee": delivery,
                "rotate.interval.ms": 1000}
        count = CommittedLines(outdir)
        created = time.perf_counter()
        create_connector(worker, "src", source)  # type: ignore[arg-type]
        create_connector(worker, "sink", sink)  # type: ignore[arg-type]
        first = arrived = None
        next_status = created
        steps: list[tuple[float, int]] = []  # (s after the arrival, lines committed by then)
        while True:
            done = count()
            now = time.perf_counter()
            if arrived is not None and done - 1 > (steps[-1][1] if steps else 0):
                steps.append((now - arrived, done - 1))
            if first is None and done >= 1:
                first = now - created
                arrived = time.perf_counter()
                java = jvm_pid(worker.pid)
                cpu_before = cpu_seconds(worker.pid), cpu_seconds(java)
                for f in staged_files:
                    f.rename(indir / f.name)
            if done >= n + 1:
                break
            if now >= next_status:
                if bad := failures({name: status(worker, name) for name in ("src", "sink")}):
                    raise RuntimeError("\n".join(bad))
                next_status = now + 1.0
            if now - created > max(1200, n / 200):
                raise TimeoutError(f"{done} of {n + 1} lines\n"
                                   + (work / "worker.log").read_text()[-3000:])
            time.sleep(POLL_S)
        end = time.perf_counter()
        cpu = (cpu_seconds(worker.pid) - cpu_before[0], cpu_seconds(java) - cpu_before[1])
        check = verify_output(outdir, n + 1)
        time.sleep(args.idle)  # idle after the pipeline: what the worker keeps
        java = jvm_pid(worker.pid)
        memory = (rss_mb(worker.pid), rss_mb(java) if java else 0.0)
        warm = [ln for ln in (work / "worker.log").read_text().splitlines()
                if "Spark warm-up:" in ln or "SparkSession ready" in ln]
        return {"place": place, "mode": mode, "setting": setting, "rest_up": rest_up, "first": first, "n_seconds": end - arrived,
                "from_creation": end - created, "check": check, "memory": memory, "cpu": cpu,
                "warm": [ln.split(": ", 1)[-1] for ln in warm], "steps": steps}
    finally:
        worker.stop()
        shutil.rmtree(work, ignore_errors=True)


def _setting(setting: tuple[int, int, str]) -> str:
    tasks_max, batch_rows, delivery = setting
    return f"tasks.max {tasks_max} batch.max.rows {batch_rows:,} {delivery}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--up", type=float, default=20.0,
                        help="seconds between the worker's REST API answering and the "
                             "connectors' creation")
    parser.add_argument("--idle", type=float, default=45.0,
                        help="seconds idle after the pipeline before memory is read (tasks "
                             "release memory after 5 s idle, the JVM collects every 30 s)")
    parser.add_argument("--modes", default="eager,lazy", help="spark.start modes to compare")
    parser.add_argument("--runs", type=int, default=1, help="workers per mode")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--on", default="embedded",
                        help="where, comma-separated: embedded (a standalone worker on the "
                             "embedded log), broker (a one-worker cluster on the test broker, "
                             "started here, or on --bootstrap)")
    parser.add_argument("--bootstrap", help="the broker for --on broker")
    parser.add_argument("--fetch-max-wait-ms", type=int, default=50,
                        help="the cluster worker's fetch.max.wait.ms (the test broker answers "
                             "a waiting fetch only when the wait is over)")
    parser.add_argument("--profile", metavar="PREFIX",
                        help="run each worker under py-spy (raw collapsed stacks in "
                             "PREFIX.WHERE.MODE.txt, for profile_summary.py; pip install py-spy)")
    parser.add_argument("--tasks-max", default="1", help="FileSource tasks.max values")
    parser.add_argument("--batch-max-rows", default="100000",
                        help="FileSource batch.max.rows values")
    parser.add_argument("--delivery", default="exactly_once",
                        help="FileSink delivery.guarantee values")
    args = parser.parse_args()
    n = args.records
    settings = list(itertools.product(
        [int(v) for v in args.tasks_max.split(",")],
        [int(v) for v in args.batch_max_rows.split(",")],
        [v.strip() for v in args.delivery.split(",")]))
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    places = [p.strip() for p in args.on.split(",") if p.strip()]
    results = []
    with interruptible(), tempfile.TemporaryDirectory(prefix="kctl-bench-fresh-") as tmp, \
            (broker_at(args.bootstrap) if "broker" in places
             else contextlib.nullcontext(None)) as bootstrap:
        root = Path(tmp)
        print(f"fresh kctl worker start ({', '.join(places)}), spark.master {args.master}; "
              f"{n:,} JSON lines in 4 files after a 1-line probe; connectors created "
              f"{args.up:.0f} s after REST is up; {os.cpu_count()} CPU(s)", flush=True)
        for k in range(args.runs):
            for place in places:
                for mode, setting in itertools.product(modes, settings):
                    r = one_worker(root, mode, n, args, bootstrap if place == "broker" else None,
                                   place, k, setting)
                    results.append(r)
                    print(f"  {place} spark.start {mode:<5} {_setting(setting)} run {k + 1}: "
                          "REST up "
                          f"{r['rest_up']:.1f} s; first record {r['first']:.2f} s; {n:,} "
                          f"records {r['n_seconds']:.2f} s ({n / r['n_seconds']:,.0f}/s), "
                          f"{r['from_creation']:.2f} s from creation; CPU during the N "
                          f"records: python {r['cpu'][0]:.1f} s, JVM {r['cpu'][1]:.1f} s; idle "
                          f"RSS python {r['memory'][0]:.0f} MB, JVM {r['memory'][1]:.0f} MB; "
                          f"{r['check']}", flush=True)
                    for line in r["warm"]:
                        print(f"      {line}")
                    print("      lines committed, s after the files' arrival: " + ", ".join(
                        f"{t:.2f} s {k:,}" for t, k in r["steps"]))
        paths = generate(root / "raw-in", n, 4)
        raw = min(raw_copy(paths, root / "raw-out.jsonl") for _ in range(3))
    print(f"\n  raw Python copy (json.loads + json.dumps per line, best of 3): {raw:.2f} s "
          f"({n / raw:,.0f}/s)")
    for r in results:
        print(f"  {r['place']} spark.start {r['mode']:<5} {_setting(r['setting'])}: first record {r['first']:.2f} s "
              f"(target <= 3); {n:,} records / raw copy {raw / r['n_seconds']:.2f}, from "
              f"creation {raw / r['from_creation']:.2f}; CPU-s per 100k records "
              f"{sum(r['cpu']) * 100_000 / n:.1f}")
    for mode in modes:
        by = {r["place"]: r for r in results if r["mode"] == mode and r["setting"] == settings[-1]}
        if "embedded" in by and "broker" in by:
            print(f"  spark.start {mode}: broker / embedded records/s "
                  f"{by['embedded']['n_seconds'] / by['broker']['n_seconds']:.2f}, CPU-s "
                  f"{sum(by['embedded']['cpu']) / sum(by['broker']['cpu']):.2f} "
                  "(last runs; target >= 0.85)")
    if any(not r["check"].startswith("output verified") for r in results):
        raise SystemExit("OUTPUT MISMATCH: the figures above do not count")


if __name__ == "__main__":
    main()
