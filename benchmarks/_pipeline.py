"""Shared parts of the pipeline benchmarks: data, an in-process worker, waiting, reporting.

Not a benchmark itself. `bench_file_pipeline.py` (embedded log) and
`bench_broker_pipeline.py` (a real Kafka-protocol broker) run the same
file -> topic -> file pipeline through an in-process `StandaloneWorker` and compare
it with raw baselines measured in the same run.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 0.5  # "the pipeline reaches at least half the raw rate"
WARMUP_RECORDS = 20_000  # enough rows for the JVM to compile Spark's hot paths
# Spark jobs each warm-up connector runs: the JIT keeps compiling Spark's planner for dozens
# of jobs (measured here: 0.16 CPU-s of compiling per write job at job 25, 0.07 at job 50,
# 0.03 from job 100 on), so a worker that has been running a while pays half what a fresh
# JVM pays per job.
WARMUP_JOBS = 60


# -- data ----------------------------------------------------------------------------------------


def make_value(i: int) -> dict[str, Any]:
    """One click-like record, ~75 bytes as a JSON line."""
    return {"id": i, "user": f"user-{i % 5000}", "page": f"/products/{i % 397}",
            "ms": i % 1000, "ok": i % 3 != 0}


def generate(indir: Path, n: int, files: int) -> list[Path]:
    """N JSON lines split over `files` files; ids 0..n-1, in file order."""
    indir.mkdir(parents=True, exist_ok=True)
    per = -(-n // files)
    paths = []
    i = 0
    for k in range(files):
        count = min(per, n - i)
        if count <= 0:
            break
        path = indir / f"clicks-{k:02d}.jsonl"
        with open(path, "w") as f:
            f.write("".join(json.dumps(make_value(j)) + "\n" for j in range(i, i + count)))
        paths.append(path)
        i += count
    return paths


def read_lines(paths: list[Path]) -> list[bytes]:
    """Every line's bytes (without the newline), in file order."""
    out: list[bytes] = []
    for p in paths:
        out.extend(p.read_bytes().splitlines())
    return out


# -- connector and worker configs ------------------------------------------------------------


@dataclass
class Settings:
    """What the pipeline runs with; printed in each benchmark's header."""

    records: int
    files: int = 4
    batch_max_rows: int | None = None  # None: FileSource's default
    flush_size: int | None = None  # None: FileSink's default
    guarantee: str = "exactly_once"
    master: str = "local[2]"
    driver_memory: str = "1g"
    warmup_jobs: int = WARMUP_JOBS
    worker_extra: dict[str, Any] = field(default_factory=dict)

    def worker_config(self, state_dir: Path) -> dict[str, Any]:
        return {"state.dir": str(state_dir), "listeners": "http://127.0.0.1:0",
                "spark.master": self.master, "spark.driver.memory": self.driver_memory,
                "spark.ui.enabled": "false", **self.worker_extra}

    @property
    def rows_per_batch(self) -> int:
        from kctl.connectors.file.source import CONFIG_DEF as SOURCE_DEF

        return self.batch_max_rows or SOURCE_DEF.keys["batch.max.rows"].default

    @property
    def records_per_file(self) -> int:
        from kctl.connectors.file.sink import CONFIG_DEF as SINK_DEF

        return self.flush_size or SINK_DEF.keys["flush.size"].default

    def source(self, path: Path, topic: str, **extra: Any) -> dict[str, Any]:
        return {"connector.class": "FileSource", "path": str(path), "format": "json",
                "topic": topic, "batch.max.rows": self.rows_per_batch, **extra}

    def sink(self, topic: str, outdir: Path, **extra: Any) -> dict[str, Any]:
        """flush.size at most the records moved, so the last file need not wait for the
        time-based rotation."""
        return {"connector.class": "FileSink", "topics": topic, "path": str(outdir),
                "format": "json", "flush.size": min(self.records_per_file, self.records),
                "delivery.guarantee": self.guarantee, **extra}

    def describe(self) -> str:
        """The settings, with the defaults the worker and the connectors will apply."""
        from kctl.connectors.file.sink import CONFIG_DEF as SINK_DEF
        from kctl.runtime.connector_config import as_strings
        from kctl.runtime.worker_config import WorkerConfig

        worker = WorkerConfig(self.worker_config(Path("state")))
        sink = SINK_DEF.parse(as_strings(self.sink("topic", Path("out"))))
        return (f"worker: spark.master {self.master}, spark.driver.memory {self.driver_memory}, "
                f"offset.flush.interval.ms {worker.get_int('offset.flush.interval.ms')}, "
                f"value.converter {worker.get_str('value.converter')} (schemas.enable default), "
                f"exactly.once.source.support {worker.get_str('exactly.once.source.support')}\n"
                f"FileSource: format json, batch.max.rows {self.rows_per_batch}, tasks.max 1, "
                f"schema inferred\n"
                f"FileSink: format json, delivery.guarantee {self.guarantee}, "
                f"flush.size {sink['flush.size']}, rotate.interval.ms "
                f"{sink['rotate.interval.ms']}")


@contextlib.contextmanager
def running_worker(config: dict[str, Any]) -> Iterator[Any]:
    from kctl.launch import StandaloneWorker
    from kctl.runtime.worker_config import WorkerConfig

    worker = StandaloneWorker(WorkerConfig(config, "<benchmark>"))
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()


# -- waiting ---------------------------------------------------------------------------------


class TaskFailed(RuntimeError):
    pass


def check_running(worker: Any, name: str) -> None:
    """Raise with the trace when the connector or one of its tasks FAILED."""
    from kctl.states import State

    st = worker.herder.connector_status(name)
    if st.state is State.FAILED:
        raise TaskFailed(f"connector {name} FAILED:\n{st.trace}")
    for t in st.tasks:
        if t.state is State.FAILED:
            raise TaskFailed(f"task {name}-{t.task} FAILED:\n{t.trace}")


def wait_for_count(count: Callable[[], int], target: int, *, worker: Any, names: list[str],
                   timeout: float, what: str = "records",
                   marks: dict[str, Callable[[], bool]] | None = None) -> tuple[float, dict]:
    """Poll count() until it reaches target; returns (time.perf_counter() then, marks).

    The polling interval grows with the time waited (5 ms up to 100 ms, about 0.5% of the
    elapsed time), so it costs the pipeline next to nothing and adds at most that much
    error. `marks` are conditions whose first true moment is recorded (perf_counter).
    Every second the connectors' statuses are checked, so a FAILED task ends the wait
    with its trace instead of a timeout.
    """
    start = time.perf_counter()
    deadline = start + timeout
    next_check = start + 1.0
    pending = dict(marks or {})
    seen: dict[str, float] = {}
    while True:
        for label, cond in list(pending.items()):
            if cond():
                seen[label] = time.perf_counter()
                del pending[label]
        last = count()
        now = time.perf_counter()
        if last >= target:
            return now, seen
        if now >= next_check:
            for name in names:
                check_running(worker, name)
            next_check = now + 1.0
        if now > deadline:
            raise TimeoutError(f"only {last} of {target} {what} after {timeout:.0f} s")
        time.sleep(min(0.1, max(0.005, (now - start) / 200)))


class CommittedLines:
    """Lines in the FileSink's committed output files.

    Committed files appear by atomic rename and never change, so each is counted once.
    Dot-directories (Spark's temporary output) and dot/underscore files are skipped.
    """

    def __init__(self, outdir: Path, suffix: str = ".json"):
        self.outdir = outdir
        self.suffix = suffix
        self._counted: dict[str, int] = {}

    def __call__(self) -> int:
        for root, dirs, names in os.walk(self.outdir):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in names:
                if not name.endswith(self.suffix) or name.startswith((".", "_")):
                    continue
                path = os.path.join(root, name)
                if path not in self._counted:
                    with contextlib.suppress(FileNotFoundError), open(path, "rb") as f:
                        self._counted[path] = f.read().count(b"\n")
        return sum(self._counted.values())

    def paths(self) -> list[str]:
        self()
        return sorted(self._counted)


def output_ids(outdir: Path) -> list[int]:
    """The `id` of every committed output line (for the after-the-fact correctness check)."""
    ids = []
    for path in CommittedLines(outdir).paths():
        with open(path, "rb") as f:
            ids.extend(json.loads(line)["id"] for line in f)
    return ids


def verify_output(outdir: Path, n: int) -> str:
    """Every id exactly once; returns a short verdict for the report."""
    ids = output_ids(outdir)
    if sorted(ids) == list(range(n)):
        return f"output verified: {n:,} lines, every id exactly once"
    return (f"OUTPUT MISMATCH: {len(ids):,} lines, {len(set(ids)):,} distinct ids, "
            f"expected {n:,}")


# -- Spark -------------------------------------------------------------------------------------


class SparkJobs:
    """Spark jobs the session ran (from its status store): to attribute time to Spark."""

    def __init__(self, session: Any):
        try:
            self._store = session.sparkContext._jsc.sc().statusStore()
        except Exception:  # Spark Connect: no JVM access
            self._store = None

    def snapshot(self) -> dict[int, float]:
        """Completed job id -> duration in seconds."""
        if self._store is None:
            return {}
        out = {}
        jobs = self._store.jobsList(None)
        for i in range(jobs.length()):
            j = jobs.apply(i)
            sub, end = j.submissionTime(), j.completionTime()
            if sub.isDefined() and end.isDefined():
                out[j.jobId()] = (end.get().getTime() - sub.get().getTime()) / 1000
        return out

    @staticmethod
    def between(before: dict[int, float], after: dict[int, float]) -> tuple[int, float]:
        new = [d for k, d in after.items() if k not in before]
        return len(new), sum(new)


@dataclass
class Phase:
    """One timed pipeline phase."""

    label: str
    records: int
    seconds: float
    spark_jobs: int = 0
    spark_seconds: float = 0.0
    assigned_after: float | None = None  # sinks: when the consumer group gave it partitions

    @property
    def rate(self) -> float:
        return self.records / self.seconds


@dataclass
class Run:
    """One file -> topic -> file run: its two phases and the output check."""

    tolerance: str
    source: Phase
    sink: Phase
    check: str

    @property
    def sink_steady_rate(self) -> float:
        """Records/s of the sink after its consumer group assigned it the partition."""
        return self.sink.records / (self.sink.seconds - (self.sink.assigned_after or 0.0))


def fastest(phases: list[Phase]) -> Phase:
    return min(phases, key=lambda p: p.seconds)


def run_line(k: int, run: Run) -> str:
    return (f"  run {k}: file -> topic {run.source.seconds:6.2f} s "
            f"{run.source.rate:>9,.0f} records/s; topic -> file {run.sink.seconds:6.2f} s "
            f"{run.sink.rate:>9,.0f} records/s ({run.sink_steady_rate:,.0f} after assignment); "
            f"{run.check}")


def exit_on_mismatch(runs: list[Run]) -> None:
    """A benchmark whose output is wrong measured nothing: after the report, exit 1."""
    bad = [k for k, r in enumerate(runs, 1) if not r.check.startswith("output verified")]
    if bad:
        print(f"OUTPUT MISMATCH in run(s) {', '.join(map(str, bad))}: the figures above do "
              "not count", file=sys.stderr)
        raise SystemExit(1)


def start_spark(worker: Any) -> float:
    """Create the worker's SparkSession (the one its tasks get); returns seconds taken."""
    t = time.perf_counter()
    session = worker.spark.spark()
    session.range(1).count()  # the first job after start is slow too
    return time.perf_counter() - t


def sink_assigned(worker: Any, name: str) -> Callable[[], bool]:
    """True once the sink's task 0 has been assigned partitions by its consumer group."""
    from kctl.states import TaskId

    def check() -> bool:
        task = worker.herder.worker.tasks.get(TaskId(name, 0))
        return task is not None and bool(task.consumer.assignment())

    return check


def source_phase(worker: Any, name: str, config: dict[str, Any], count: Callable[[], int],
                 n: int, jobs: SparkJobs, label: str) -> Phase:
    """Create a source connector; timed until count() (records in its topic) reaches n."""
    before = jobs.snapshot()
    start = time.perf_counter()
    worker.herder.create_connector(name, config)
    end, _ = wait_for_count(count, n, worker=worker, names=[name], timeout=max(180.0, n / 500),
                            what="records in the topic")
    jobs_n, jobs_s = SparkJobs.between(before, jobs.snapshot())
    return Phase(label, n, end - start, jobs_n, jobs_s)


def sink_phase(worker: Any, name: str, config: dict[str, Any], outdir: Path, n: int,
               jobs: SparkJobs, label: str) -> Phase:
    """Create a FileSink; timed until n lines are in its committed output files."""
    before = jobs.snapshot()
    start = time.perf_counter()
    worker.herder.create_connector(name, config)
    end, marks = wait_for_count(CommittedLines(outdir), n, worker=worker, names=[name],
                                timeout=max(180.0, n / 500), what="committed output lines",
                                marks={"assigned": sink_assigned(worker, name)})
    jobs_n, jobs_s = SparkJobs.between(before, jobs.snapshot())
    assigned = marks.get("assigned")
    return Phase(label, n, end - start, jobs_n, jobs_s,
                 None if assigned is None else assigned - start)


class _NoOffsets:
    def offset(self, partition: Any) -> None:
        return None

    def offsets(self, partitions: Any) -> dict:
        return {}


class _Context:
    """Just enough of a task context to drive a file connector's task without a runtime."""

    def __init__(self, worker: Any, props: dict[str, str]):
        self._worker, self.configs = worker, props
        self.offset_storage_reader = _NoOffsets()

    def spark(self) -> Any:
        return self._worker.spark.spark()

    def offset(self, offsets: Any) -> None:
        pass

    def timeout(self, timeout_ms: int) -> None:
        pass


def connector_alone_source(worker: Any, config: dict[str, Any], n: int) -> tuple[float, list]:
    """FileSourceTask.poll() until n records, no runtime: reading, Spark parsing, batches.

    Returns (seconds, what poll returned: SourceBatch columns or SourceRecords)."""
    from kctl.connectors.file.source import FileSourceTask
    from kctl.runtime.connector_config import as_strings

    props = as_strings(config)
    task = FileSourceTask()
    task.initialize(_Context(worker, props))
    records: list = []
    count = 0
    start = time.perf_counter()
    task.start(props)
    try:
        while count < n:
            batch = task.poll()
            if not batch:
                raise RuntimeError(f"the source task stopped at {count} of {n} records")
            records.extend(batch)
            count += sum(len(b) if hasattr(b, "offsets") else 1 for b in batch)
        return time.perf_counter() - start, records
    finally:
        task.stop()


def connector_alone_sink(worker: Any, config: dict[str, Any], records: list,
                         outdir: Path) -> float:
    """FileSinkTask of the source's values, then flush: no runtime. Columns the source gave
    go in as SinkBatches (`put_batch`, as the runtime gives them), records by `put()` in
    batches of 10000 (the runtime's consumer.max.poll.records). Building them is not timed."""
    from kctl.api.records import (
        OffsetAndMetadata,
        SinkBatch,
        SinkRecord,
        SourceBatch,
        TopicPartition,
    )
    from kctl.connectors.file.sink import FileSinkTask
    from kctl.runtime.connector_config import as_strings

    topic = str(config["topics"])
    tp = TopicPartition(topic, 0)
    batches: list[SinkBatch] = []
    sink_records: list[SinkRecord] = []
    offset = 0
    for r in records:
        if isinstance(r, SourceBatch):
            n = len(r)
            batches.append(SinkBatch(topic, 0, list(range(offset, offset + n)), [0] * n,
                                     [()] * n, r.value_schema, r.values))
            offset += n
        else:
            sink_records.append(SinkRecord(topic, 0, None, None, r.value_schema, r.value,
                                           kafka_offset=offset))
            offset += 1
    props = as_strings(config)
    task = FileSinkTask()
    task.initialize(_Context(worker, props))
    start = time.perf_counter()
    task.start(props)
    task.open([tp])
    for b in batches:
        for i in range(0, len(b), 10_000):
            task.put_batch(b.slice(i, i + 10_000))
    for i in range(0, len(sink_records), 10_000):
        task.put(sink_records[i:i + 10_000])
    task.flush({tp: OffsetAndMetadata(offset)})
    elapsed = time.perf_counter() - start
    task.stop()
    written = CommittedLines(outdir)()
    assert written == offset, f"the sink task wrote {written} of {offset} lines"
    return elapsed


def warmup_records(settings: Settings) -> int:
    return min(WARMUP_RECORDS, settings.records)


def warmup_note(settings: Settings, seconds: float) -> str:
    return (f"warm-up pipeline ({warmup_records(settings):,} records file -> topic -> file in "
            f"about {settings.warmup_jobs} Spark jobs per connector, then deleted) {seconds:.1f} s")


def warm_up(worker: Any, settings: Settings, work: Path, topic: str,
            timeout: float = 180) -> float:
    """A small file -> topic -> file run through the same connectors, then deleted.

    Warms the JVM, Spark's code generation and the Python paths before anything is timed,
    in small batches so each connector runs `settings.warmup_jobs` Spark jobs: the timed
    runs then see the per-job cost of a worker that has been running for a while, not of a
    fresh JVM. Returns seconds taken.
    """
    t = time.perf_counter()
    n = warmup_records(settings)
    batch = max(1, -(-n // max(settings.warmup_jobs, 1)))
    generate(work / "warmup-in", n, 1)
    out = work / "warmup-out"
    h = worker.herder
    h.create_connector("warmup-source", {**settings.source(work / "warmup-in", topic),
                                         "batch.max.rows": batch})
    h.create_connector("warmup-sink", {**settings.sink(topic, out), "flush.size": batch})
    wait_for_count(CommittedLines(out), n, worker=worker, names=["warmup-source", "warmup-sink"],
                   timeout=timeout, what="warm-up lines")
    h.delete_connector("warmup-sink")
    h.delete_connector("warmup-source")
    return time.perf_counter() - t


def best_of(repeat: int, run: Callable[[], float]) -> float:
    """The shortest of `repeat` runs; run() returns the seconds it measured."""
    return min(run() for _ in range(repeat))


# -- reporting -------------------------------------------------------------------------------


def verdict(pipeline_rate: float, raw_rate: float) -> str:
    ratio = pipeline_rate / raw_rate
    met = "met" if ratio >= TARGET_RATIO else "NOT met"
    return f"pipeline/raw {ratio:5.2f}  (target >= {TARGET_RATIO}: {met})"


def row(label: str, records: int, seconds: float, pipeline_rate: float | None = None,
        *, reference: bool = False) -> str:
    """A table row; a raw row gets the pipeline/raw ratio against it and the verdict (a
    reference row only the ratio)."""
    rate = records / seconds
    text = f"  {label:<54} {seconds:8.3f} s {rate:>11,.0f} records/s"
    if pipeline_rate is not None:
        text += "   " + (f"pipeline/raw {pipeline_rate / rate:5.2f}  (for reference)"
                         if reference else verdict(pipeline_rate, rate))
    return text


def spark_parse_alone(worker: Any, paths: list[Path], repeat: int = 3) -> float:
    """Seconds Spark's json reader takes to parse the input files into Arrow on the worker's
    session, with the schema given (nothing else: no runtime, no log): a ceiling for any
    pipeline in which Spark parses the lines."""
    spark = worker.spark.spark()
    files = [str(p) for p in paths]
    schema = spark.read.json(files[0]).schema  # inference is not timed

    def once() -> float:
        start = time.perf_counter()
        spark.read.schema(schema).json(files).toArrow()
        return time.perf_counter() - start

    return best_of(repeat, once)


def ceiling_note(records: int, spark_seconds: float, raw_seconds: float, raw: str) -> str:
    """What Spark parsing alone allows: the best pipeline/raw ratio any Spark pipeline has."""
    ratio = raw_seconds / spark_seconds
    return (f"  {'Spark alone: its json reader, files -> Arrow':<54} {spark_seconds:8.3f} s "
            f"{records / spark_seconds:>11,.0f} records/s   ceiling for pipeline/{raw} "
            f"{ratio:5.2f}")


def spark_note(phase: Phase) -> str:
    if not phase.spark_jobs:
        return "    Spark: no job recorded"
    return (f"    Spark jobs: {phase.spark_jobs} (one per batch or file), "
            f"{phase.spark_seconds:.2f} s by Spark's own job clock = "
            f"{phase.spark_seconds / phase.seconds:.0%} of the phase; query planning and "
            f"moving Arrow data to and from Python are not in that clock")


def header(title: str, settings: Settings, paths: list[Path]) -> str:
    size = sum(p.stat().st_size for p in paths)
    return (f"{title}\n"
            f"{settings.records:,} JSON-lines records in {len(paths)} file(s), "
            f"{size / 1e6:.1f} MB ({size / settings.records:.0f} B/line)\n"
            f"{settings.describe()}\n"
            f"python {sys.version.split()[0]}, {os.cpu_count()} CPU(s)")


def assignment_note(phase: Phase) -> str:
    """For a sink: how long the consumer group took to hand it partitions."""
    if phase.assigned_after is None:
        return "    (the sink's partition assignment was not observed)"
    after = phase.seconds - phase.assigned_after
    return (f"    of which {phase.assigned_after:.2f} s before the consumer group assigned the "
            f"partition; {phase.records / after:,.0f} records/s after it")
