"""The standalone worker's file pipeline on the embedded log, against raw baselines.

Not a test: run it by hand and read the ratios (target: the pipeline reaches at least half
the raw rate).

    python benchmarks/bench_file_pipeline.py [--records 1000000] [--quick] [--files 4]

N JSON-lines records in files under a temporary directory go through an in-process
`StandaloneWorker` on the embedded log (no external service):

- file -> topic: a FileSource connector, timed from its creation until the topic's end
  offset reaches N; against (a) plain Python reading the same files with `json.loads` per
  line, (b) the embedded log's own producer writing the same lines' bytes and (c) the same
  producer writing the pipeline's own records (envelopes and headers; batches of 5000, one
  flush at the end); for reference, (d) the lines' bytes appended a column per batch
  (send_batch, as the pipeline's runtime appends). "Spark alone" is Spark's json reader
  parsing the same files in one job: the ceiling of any pipeline in which Spark parses.
- topic -> file: a FileSink connector on that topic, timed from its creation until N lines
  are in committed output files; against reading the same N records from the embedded log
  through its consumer API, a record object each (poll_batch) and as columns per partition
  (poll_columns, which the sink's runtime uses).

SparkSession start-up and a warm-up pipeline (20k records in about 60 Spark jobs per
connector, so the JIT has compiled Spark's planner) run before anything is timed.
Raw baselines are the best of 3 runs; the pipeline runs three times (fresh topic,
connectors and output each time) and each phase reports its fastest run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _pipeline import (
    WARMUP_JOBS,
    Phase,
    Run,
    Settings,
    SparkJobs,
    assignment_note,
    best_of,
    ceiling_note,
    connector_alone_sink,
    connector_alone_source,
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
    verify_output,
    warm_up,
    warmup_note,
)

from kctl.api.records import TopicPartition
from kctl.transport.base import HeaderList, ProducerRecord, TopicSpec

RAW_REPEAT = 3
PRODUCE_BATCH = 5_000


# -- raw baselines -------------------------------------------------------------------------------


def raw_python_read(paths: list[Path], n: int) -> float:
    """(a) read every file line by line and json.loads each line."""
    start = time.perf_counter()
    count = 0
    loads = json.loads
    for p in paths:
        with open(p, "rb") as f:
            for line in f:
                loads(line)
                count += 1
    elapsed = time.perf_counter() - start
    assert count == n, f"read {count} lines, expected {n}"
    return elapsed


def raw_embedded_produce(logdir: Path, rows: list[tuple[bytes | None, HeaderList]],
                         column_batch: int | None = None) -> float:
    """The embedded log's own producer writing these (value, headers) rows in batches, as
    fast as it goes: (b) the lines' bytes, (c) the pipeline's records as they are; with
    `column_batch`, header-less values as one column per that many rows (send_batch)."""
    import pyarrow as pa

    from kctl.transport.embedded import EmbeddedTransport

    n = len(rows)
    runs = iter(range(1, RAW_REPEAT + 1))
    column = pa.array([v for v, _ in rows], pa.binary()) if column_batch else None
    with EmbeddedTransport(logdir) as t:
        def once() -> float:
            topic = f"raw-{next(runs)}"
            t.create_topic(TopicSpec(topic, 1))
            producer = t.producer()
            start = time.perf_counter()
            if column is not None:
                step = column_batch or n
                for i in range(0, n, step):
                    producer.send_batch(topic, column.slice(i, step), lambda r: None)
            else:
                for i in range(0, n, PRODUCE_BATCH):
                    producer.send_many([ProducerRecord(topic, v, headers=h)
                                        for v, h in rows[i:i + PRODUCE_BATCH]])
            producer.flush()
            elapsed = time.perf_counter() - start
            producer.close()
            end = t.end_offset(TopicPartition(topic, 0))
            assert end == n, f"raw produce wrote {end} records, expected {n}"
            return elapsed

        return best_of(RAW_REPEAT, once)


def pipeline_records(worker: Any, topic: str, n: int) -> list[tuple[bytes | None, HeaderList]]:
    """The records the pipeline wrote (values and headers), to append them raw."""
    consumer = worker.transport.consumer(None, {"kctl.passive": "true"})
    try:
        consumer.assign([TopicPartition(topic, 0)])
        out: list[tuple[bytes | None, HeaderList]] = []
        while len(out) < n:
            batch = consumer.poll_batch(10_000, 1.0)
            if not batch:
                raise AssertionError(f"read {len(out)} of {n} records back")
            out.extend((r.value, r.headers) for r in batch)
        return out
    finally:
        consumer.close()


def raw_embedded_consume(worker: Any, topic: str, n: int, columnar: bool = False) -> float:
    """Read the N records of the pipeline's topic straight through the log's consumer API:
    a record object each (poll_batch), or columns per partition (poll_columns, what the
    sink's runtime reads)."""
    def once() -> float:
        consumer = worker.transport.consumer(None, {"kctl.passive": "true"})
        try:
            start = time.perf_counter()
            consumer.assign([TopicPartition(topic, 0)])
            count = 0
            while count < n:
                if columnar:
                    got = sum(map(len, consumer.poll_columns(10_000, 1.0)))
                else:
                    got = len(consumer.poll_batch(10_000, 1.0))
                if not got:
                    raise AssertionError(f"raw consume stalled at {count} of {n}")
                count += got
            return time.perf_counter() - start
        finally:
            consumer.close()

    return best_of(RAW_REPEAT, once)


# -- the pipeline ------------------------------------------------------------------------------


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


def record_sizes(worker: Any, topic: str, sample: int = 1000) -> tuple[float, float]:
    """Average value bytes and header bytes of the first records of a topic."""
    consumer = worker.transport.consumer(None, {"kctl.passive": "true"})
    try:
        consumer.assign([TopicPartition(topic, 0)])
        recs = consumer.poll_batch(sample, 1.0)
    finally:
        consumer.close()
    count = max(len(recs), 1)
    values = sum(len(r.value or b"") for r in recs) / count
    headers = sum(len(k) + len(v or b"") for r in recs for k, v in r.headers) / count
    return values, headers


def runtime_note(phase: Phase, alone: float, what: str) -> str:
    extra = phase.seconds - alone
    return (f"    the worker runtime around it ({what}): {extra:.2f} s, "
            f"{extra / phase.seconds:.0%} of the pipeline phase, "
            f"{extra / phase.records * 1e6:.0f} us/record")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", "-n", type=int, default=None,
                        help="records to move (default 1000000: ten batches at the connectors' "
                             "default batch sizes; 20000 with --quick)")
    parser.add_argument("--quick", action="store_true", help="a small run (20k records)")
    parser.add_argument("--files", type=int, default=4, help="input files (default 4)")
    parser.add_argument("--batch-max-rows", type=int, default=None,
                        help="FileSource batch.max.rows (default: the connector's default)")
    parser.add_argument("--flush-size", type=int, default=None,
                        help="FileSink flush.size (default: the connector's default)")
    parser.add_argument("--runs", type=int, default=3, help="pipeline runs (default 3)")
    parser.add_argument("--warm-up-jobs", type=int, default=None,
                        help=f"Spark jobs per connector in the untimed warm-up (default "
                             f"{WARMUP_JOBS}; 2 with --quick; 1 gives a fresh JVM's costs)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    n = args.records or (20_000 if args.quick else 1_000_000)
    settings = Settings(records=n, files=args.files, batch_max_rows=args.batch_max_rows,
                        flush_size=args.flush_size,
                        warmup_jobs=args.warm_up_jobs or (2 if args.quick else WARMUP_JOBS))
    work = Path(tempfile.mkdtemp(prefix="kctl-bench-file-"))
    try:
        run(settings, work, args.runs)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def pipeline_run(worker: Any, settings: Settings, work: Path, k: int, jobs: SparkJobs) -> Run:
    """file -> topic, then topic -> file, on a fresh topic, group and output directory."""
    n = settings.records
    topic, outdir = f"bench-clicks-{k}", work / f"out-{k}"
    source = source_phase(worker, f"source-{k}", settings.source(work / "in", topic),
                          topic_end(worker, topic), n, jobs,
                          "pipeline: FileSource -> embedded log")
    worker.herder.delete_connector(f"source-{k}")
    sink = sink_phase(worker, f"sink-{k}", settings.sink(topic, outdir), outdir, n, jobs,
                      "pipeline: embedded log -> FileSink")
    worker.herder.delete_connector(f"sink-{k}")
    return Run("none", source, sink, verify_output(outdir, n))


def run(settings: Settings, work: Path, runs_wanted: int) -> None:
    n = settings.records
    paths = generate(work / "in", n, settings.files)
    lines = read_lines(paths)
    print(header("kctl file pipeline benchmark: embedded log, in-process StandaloneWorker",
                 settings, paths), flush=True)

    runs: list[Run] = []
    with running_worker(settings.worker_config(work / "state")) as worker:
        spark_s = start_spark(worker)
        warm_s = warm_up(worker, settings, work, "bench-warmup")
        print(f"excluded from timing: SparkSession start {spark_s:.1f} s; "
              f"{warmup_note(settings, warm_s)}",
              flush=True)
        jobs = SparkJobs(worker.spark.spark())

        raw_read = best_of(RAW_REPEAT, lambda: raw_python_read(paths, n))
        spark_alone = spark_parse_alone(worker, paths)
        raw_produce = raw_embedded_produce(work / "rawlog", [(v, ()) for v in lines])
        raw_column = raw_embedded_produce(work / "rawlog3", [(v, ()) for v in lines],
                                          column_batch=settings.rows_per_batch)
        for k in range(1, runs_wanted + 1):
            runs.append(pipeline_run(worker, settings, work, k, jobs))
            print(run_line(k, runs[-1]), flush=True)
            if k == 1:
                value_b, header_b = record_sizes(worker, "bench-clicks-1")
                raw_consume = raw_embedded_consume(worker, "bench-clicks-1", n)
                raw_columns = raw_embedded_consume(worker, "bench-clicks-1", n, columnar=True)
                raw_records = raw_embedded_produce(
                    work / "rawlog2", pipeline_records(worker, "bench-clicks-1", n))
        alone_src, records = connector_alone_source(
            worker, settings.source(work / "in", "alone"), n)
        alone_sink = connector_alone_sink(
            worker, settings.sink("alone", work / "out-alone"), records, work / "out-alone")
        del records

    source = fastest([r.source for r in runs])
    sink = fastest([r.sink for r in runs])
    print()
    print("file -> topic (timed from connector creation until the topic's end offset is N; "
          f"best of {len(runs)} run(s))")
    print(row(source.label, n, source.seconds))
    print(row("raw (a): Python read + json.loads per line", n, raw_read, source.rate))
    print(row("raw (b): embedded log producer, the lines' bytes", n, raw_produce, source.rate))
    print(row("raw (c): embedded log producer, the pipeline's records", n, raw_records,
              source.rate))
    print(row("raw (d): the lines' bytes as columns (send_batch)", n, raw_column, source.rate,
              reference=True))
    print("    (c) appends what the pipeline wrote, envelopes and exactly-once headers included;"
          " (d) appends the lines a batch at a time, as the pipeline's runtime appends")
    print(ceiling_note(n, spark_alone, raw_read, "raw (a)"))
    print(spark_note(source))
    print()
    print("topic -> file (timed from connector creation until N lines are committed; "
          f"best of {len(runs)} run(s))")
    print(row(sink.label, n, sink.seconds))
    print(row("raw: embedded log consumer read of the same records", n, raw_consume, sink.rate))
    print(row("raw: the same read as columns (poll_columns)", n, raw_columns, sink.rate,
              reference=True))
    print("    the sink's runtime reads columns (no JSON decoded in this row); a record object "
          "each is what a consumer of the log gets")
    print(spark_note(sink))
    print(assignment_note(sink))
    print()
    print("where the time goes: the same connector tasks driven directly, without the worker "
          "runtime (one run)")
    print(row("FileSourceTask.poll() until N records", n, alone_src))
    print(runtime_note(source, alone_src, "transforms, converters, exactly-once header, "
                       "producer, acknowledgements"))
    print(row("FileSinkTask.put_batch() + flush of N ready records", n, alone_sink))
    print(runtime_note(sink, alone_sink, "consumer, converters, SinkRecords, offsets"))
    print()
    print(f"bytes per record: file line {sum(map(len, lines)) / n:.0f} B; in the topic, value "
          f"{value_b:.0f} B (JsonConverter envelope with schema) + headers {header_b:.0f} B "
          f"(exactly-once source position)")
    print("; ".join(sorted({r.check for r in runs})) + f" ({len(runs)} run(s))")
    print("raw baselines: best of 3 runs; SparkSession start and warm-up excluded")
    exit_on_mismatch(runs)


if __name__ == "__main__":
    main()
