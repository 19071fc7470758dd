"""ConnectorHarness: one connector and its tasks on the real runtime, turned by the test.

The connector runs in the runtime's own `Worker` (plugins, converters, transforms, error
handling, dead letter queue, offset store) on the embedded log in a directory of its own.
Its tasks are the runtime's task loops (`WorkerSourceTask`, `WorkerSinkTask`), built as a
worker builds them but not given a thread: each `poll()`/`put()` turns every loop once in
the test's thread, and the loops' commit intervals read a clock the test moves, so a test
decides when commits happen and never sleeps.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kctl.api.connector import Connector
from kctl.api.data import Schema
from kctl.api.records import TopicPartition
from kctl.runtime.connector_config import (
    CONNECTOR_CLASS_CONFIG,
    KEY_CONVERTER_CLASS_CONFIG,
    VALUE_CONVERTER_CLASS_CONFIG,
)
from kctl.runtime.dlq import describe, read_topic
from kctl.runtime.plugins import Plugins
from kctl.runtime.tasks import WorkerSinkTask, WorkerSourceTask, WorkerTask
from kctl.runtime.worker import Worker
from kctl.runtime.worker_config import WorkerConfig
from kctl.states import State, TargetState, TaskId
from kctl.storage.offsets import FileOffsetBackingStore, list_connector_offsets
from kctl.transport.base import LogRecord, ProducerRecord, TopicSpec
from kctl.transport.embedded import EmbeddedTransport


class ManualClock:
    """Seconds that pass only when the test says so (the task loops' commit intervals)."""

    def __init__(self, start: float = 1000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass(frozen=True)
class Written:
    """A record as a source wrote it to the log, decoded with the connector's converters."""

    topic: str
    partition: int
    offset: int
    key: Any
    value: Any
    key_schema: Schema | None
    value_schema: Schema | None
    headers: tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True)
class Delivery:
    """What arrived compared with what was expected: which ids never came, which came twice."""

    expected: int
    lost: tuple[Any, ...]
    duplicated: dict[Any, int]  # id -> extra copies
    unexpected: tuple[Any, ...]

    @property
    def duplicates(self) -> int:
        return sum(self.duplicated.values())


def delivery(expected: Iterable[Any], seen: Iterable[Any]) -> Delivery:
    """Compare ids: what never arrived, what arrived more than once, what nobody sent."""
    want = list(expected)
    wanted = set(want)
    counts: dict[Any, int] = {}
    for s in seen:
        counts[s] = counts.get(s, 0) + 1
    return Delivery(len(want), tuple(i for i in want if i not in counts),
                    {i: n - 1 for i, n in counts.items() if n > 1},
                    tuple(i for i in counts if i not in wanted))


def assert_delivered(expected: Iterable[Any], seen: Iterable[Any], *,
                     duplicates_allowed: bool = False) -> Delivery:
    """Fail naming the ids lost (and duplicated, unless allowed); returns the comparison."""
    d = delivery(expected, seen)
    problems = []
    if d.lost:
        problems.append(f"{len(d.lost)} lost: {list(d.lost)[:20]}")
    if d.duplicated and not duplicates_allowed:
        problems.append(f"{d.duplicates} duplicated: {dict(list(d.duplicated.items())[:20])}")
    if d.unexpected:
        problems.append(f"{len(d.unexpected)} unexpected: {list(d.unexpected)[:20]}")
    if problems:
        raise AssertionError(f"of {d.expected} expected records, " + "; ".join(problems))
    return d


class _Statuses:
    """The status listener: what the worker reported, as a herder would store it."""

    def __init__(self) -> None:
        self.connector: tuple[State, str | None] = (State.UNASSIGNED, None)
        self.tasks: dict[int, tuple[State, str | None]] = {}
        self.topics: set[str] = set()

    def on_connector_state(self, name: str, state: State, trace: str | None = None) -> None:
        self.connector = (state, trace)

    def on_task_state(self, task: TaskId, state: State, trace: str | None = None) -> None:
        self.tasks[task.task] = (state, trace)

    def on_topic_used(self, connector: str, topic: str) -> None:
        self.topics.add(topic)


class _LazySpark:
    """The worker's SparkSession, built (small, local) only if a task asks for it."""

    def __init__(self) -> None:
        self._engine: Any = None

    def spark(self) -> Any:
        if self._engine is None:
            from kctl.runtime.spark import SparkEngine, small_conf

            self._engine = SparkEngine(small_conf("local[1]"))
        return self._engine.spark()

    def stop(self) -> None:
        if self._engine is not None:
            self._engine.stop()


class ConnectorHarness:
    """Run one connector on the real runtime in-process; use it as a context manager.

    `connector`: the Connector class (or any name `connector.class` accepts). `config`:
    the connector's config (`name` and `connector.class` are filled in). `state_dir`: where
    the log and the offsets live (a temporary directory by default; pass the same one to
    a new harness to play a worker restarted on the same state). `worker`: worker settings
    (e.g. `offset.flush.interval.ms`, `exactly.once.source.support`). `spark`: anything
    with `.spark()` (by default a local session is built if a task asks for one).
    """

    def __init__(self, connector: type[Connector] | str, config: Mapping[str, Any], *,
                 name: str = "harness", tasks_max: int | None = None,
                 state_dir: str | Path | None = None, worker: Mapping[str, Any] | None = None,
                 spark: Any = None):
        self.name = name
        self.clock = ManualClock()
        self._tmp = None if state_dir is not None else tempfile.mkdtemp(prefix="kctl-harness-")
        self.state_dir = Path(state_dir if state_dir is not None else self._tmp)  # type: ignore[arg-type]
        self.plugins = Plugins()
        if isinstance(connector, str):
            class_name = connector
        else:
            class_name = self.plugins.register(connector).class_name
        self.config: dict[str, str] = {
            "name": name, CONNECTOR_CLASS_CONFIG: class_name,
            **{k: str(v) for k, v in config.items()}}
        if tasks_max is not None:
            self.config["tasks.max"] = str(tasks_max)
        self.tasks_max = int(self.config.setdefault("tasks.max", "1"))
        self.worker_config = WorkerConfig({"state.dir": str(self.state_dir),
                                           "offset.flush.interval.ms": 10_000,
                                           **(worker or {})}, "<kctl.testing>")
        self.transport = EmbeddedTransport(self.state_dir,
                                           assignment_strategy="cooperative-sticky")
        self.offsets = FileOffsetBackingStore(self.state_dir / "offsets.json")
        self.offsets.start()
        self.statuses = _Statuses()
        self._spark_owned = spark is None
        self.spark = spark if spark is not None else _LazySpark()
        self.worker = Worker(self.worker_config, worker_id="kctl-testing",
                             transport=self.transport, offset_store=self.offsets,
                             status=self.statuses, plugins=self.plugins, spark=self.spark,
                             clock=self.clock)
        self.tasks: dict[int, WorkerTask] = {}
        self.task_configs: list[dict[str, str]] = []
        self.reconfiguration_requests = 0
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> ConnectorHarness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> ConnectorHarness:
        """Start the connector, ask it for task configs and start each task."""
        if not self.worker.start_connector(self.name, dict(self.config), TargetState.STARTED,
                                           self._on_reconfigure):
            state, trace = self.statuses.connector
            raise AssertionError(f"connector {self.name} did not start ({state.value}):\n{trace}")
        self.task_configs = self.worker.connector_task_configs(self.name, self.tasks_max)
        self._start_tasks()
        return self

    def _on_reconfigure(self, name: str) -> None:
        self.reconfiguration_requests += 1

    def _start_tasks(self) -> None:
        for i, tc in enumerate(self.task_configs):
            tid = TaskId(self.name, i)
            try:
                wt = self.worker.build_task(tid, dict(self.config), dict(tc), TargetState.STARTED)
            except Exception as e:
                self.statuses.on_task_state(tid, State.FAILED, _trace(e))
                continue
            # retry backoffs move the test's clock instead of sleeping
            wt.operator.clock, wt.operator.sleep = self.clock, self.clock.advance
            wt.wait_unless_stopping = self._backoff  # type: ignore[method-assign]
            self.tasks[i] = wt
            try:
                wt.initialize_and_start()
            except Exception as e:
                self._fail(i, e)
                continue
            self.statuses.on_task_state(tid, State.RUNNING)

    def _backoff(self, seconds: float) -> bool:
        self.clock.advance(seconds)
        return False

    def _fail(self, i: int, e: BaseException) -> None:
        """What the task thread does when the task raises: FAILED with the trace, closed."""
        wt = self.tasks.pop(i)
        self.statuses.on_task_state(wt.id, State.FAILED, _trace(e))
        with contextlib.suppress(Exception):
            wt.close(failed=True)

    def stop_tasks(self) -> None:
        """Stop every task as a worker does: final commit, `stop()`, clients closed."""
        for _, wt in sorted(self.tasks.items()):
            wt.stop()
            try:
                wt.close(failed=False)
                self.statuses.on_task_state(wt.id, State.UNASSIGNED)
            except Exception as e:
                self.statuses.on_task_state(wt.id, State.FAILED, _trace(e))
        self.tasks.clear()

    def crash_tasks(self) -> None:
        """As `kill -9` leaves them: no commit and no `stop()`; what the log acknowledged
        stays, offsets not yet committed are lost. Only the runtime's clients are closed."""
        for wt in self.tasks.values():
            client = getattr(wt, "producer", None) or getattr(wt, "consumer", None)
            for close in (getattr(client, "close", None), wt.operator.close):
                if close is not None:
                    with contextlib.suppress(Exception):
                        close()
        self.tasks.clear()

    def restart_tasks(self, *, crash: bool = False) -> None:
        """Stop (or crash) every task and start new ones from the same task configs; a
        source resumes from its committed offsets, a sink from its group's."""
        self.crash_tasks() if crash else self.stop_tasks()
        self._start_tasks()

    def reconfigure(self) -> list[dict[str, str]]:
        """What the worker does on `request_task_reconfiguration`: stop the tasks, ask the
        connector for task configs again and start those; returns them."""
        self.stop_tasks()
        self.task_configs = self.worker.connector_task_configs(self.name, self.tasks_max)
        self._start_tasks()
        return self.task_configs

    def close(self) -> None:
        """Stop the tasks and the connector, and let go of the log and the offsets."""
        if self._closed:
            return
        self._closed = True
        try:
            self.stop_tasks()
            if self.name in self.worker.connectors:
                self.worker.stop_connector(self.name)
        finally:
            self.offsets.stop()
            self.transport.close()
            if self._spark_owned:
                self.spark.stop()
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)

    # -- turning the loops -------------------------------------------------------------------
    def poll(self, turns: int = 1) -> int:
        """Turn every task loop `turns` times (a source polls and sends, a sink polls and
        puts; each commits when the clock has passed its interval); returns the records
        moved. A task that raises is FAILED with its trace, as on a worker."""
        moved = 0
        for _ in range(turns):
            for i, wt in sorted(self.tasks.items()):
                try:
                    moved += wt.step()  # type: ignore[attr-defined]
                except Exception as e:
                    self._fail(i, e)
        return moved

    put = poll  # a sink's turn: poll the log and put

    def run_until(self, condition: Callable[[], Any], *, max_turns: int = 1000,
                  message: str = "the condition") -> Any:
        """Turn the loops until `condition()` is truthy (returned); fail after max_turns."""
        for _ in range(max_turns):
            got = condition()
            if got:
                return got
            if not self.tasks:
                break
            self.poll()
        got = condition()
        if got:
            return got
        raise AssertionError(f"{message} did not happen within {max_turns} turns; "
                             + self._describe_tasks())

    def _describe_tasks(self) -> str:
        return "tasks: " + "; ".join(
            f"{i} {s.value}" + (f":\n{trace}" if trace else "")
            for i, (s, trace) in sorted(self.statuses.tasks.items()))

    def _live(self, task: int) -> WorkerTask:
        wt = self.tasks.get(task)
        if wt is None:
            raise AssertionError(f"task {task} is not running; {self._describe_tasks()}")
        return wt

    def commit(self) -> None:
        """Commit every task's offsets now (a source's acknowledged ones, a sink's from
        `pre_commit`), as the periodic commit does."""
        for wt in self.tasks.values():
            if isinstance(wt, WorkerSourceTask):
                wt.commit_offsets(wait=True)
            elif isinstance(wt, WorkerSinkTask):
                wt.commit_offsets()

    # -- failures ----------------------------------------------------------------------------
    def inject(self, error: BaseException, *, into: str = "poll", times: int = 1,
               task: int = 0) -> None:
        """Make the next `times` calls of the task's `into` (poll, put, flush, pre_commit,
        commit) raise `error` before reaching the task; a RetriableError is retried by the
        runtime, anything else fails the task."""
        target = self._live(task).task  # type: ignore[attr-defined]
        names = ("put", "put_batch") if into == "put" else (into,)
        left = [times]
        for n in names:
            real = getattr(target, n)

            def failing(*args: Any, _real: Callable = real, **kwargs: Any) -> Any:
                if left[0] > 0:
                    left[0] -= 1
                    raise error
                return _real(*args, **kwargs)

            setattr(target, n, failing)

    def task_state(self, task: int = 0) -> State:
        return self.statuses.tasks.get(task, (State.UNASSIGNED, None))[0]

    def task_trace(self, task: int = 0) -> str | None:
        return self.statuses.tasks.get(task, (State.UNASSIGNED, None))[1]

    def task(self, index: int = 0) -> Any:
        """The connector's task object (SourceTask/SinkTask) the loop runs."""
        return self._live(index).task  # type: ignore[attr-defined]

    @property
    def connector(self) -> Connector:
        return self.worker.connectors[self.name].connector

    # -- what was written --------------------------------------------------------------------
    def raw(self, topic: str) -> list[LogRecord]:
        """Every record in `topic`, as bytes."""
        return read_topic(self.transport, topic, stall_s=5)

    def written(self, topic: str) -> list[Written]:
        """Every record in `topic`, decoded with the connector's key and value converters."""
        kc = self.worker._converter(self.config, KEY_CONVERTER_CLASS_CONFIG)
        vc = self.worker._converter(self.config, VALUE_CONVERTER_CLASS_CONFIG)
        out = []
        for r in self.raw(topic):
            k = kc.to_connect_data(topic, r.key)
            v = vc.to_connect_data(topic, r.value)
            out.append(Written(r.topic, r.partition, r.offset, k.value, v.value, k.schema,
                               v.schema, tuple(r.headers)))
        return out

    def dead_letters(self) -> list[dict[str, Any]]:
        """The dead letter queue (`errors.deadletterqueue.topic.name`) as `kctl dlq show`
        describes each record: stage, exception, message, where it came from, key, value."""
        topic = self.config.get("errors.deadletterqueue.topic.name")
        if not topic:
            raise AssertionError("the connector has no errors.deadletterqueue.topic.name")
        return [describe(r) for r in self.raw(topic)]

    def source_offsets(self) -> dict[tuple[tuple[str, Any], ...], dict[str, Any] | None]:
        """Committed source offsets: partition_key(partition) -> offset (the runtime's own
        exactly-once log positions left out)."""
        return {tuple(sorted(p.items())): o
                for p, o in list_connector_offsets(self.offsets, self.name)
                if "kctl.task" not in p}

    def sink_offsets(self, topic: str) -> dict[int, int]:
        """The sink's committed group offsets (partition -> next offset) for `topic`."""
        partitions = self.transport.admin().list_topics().get(topic, 0)
        consumer = self.transport.consumer(f"connect-{self.name}", {"kctl.passive": "true"})
        try:
            committed = consumer.committed([TopicPartition(topic, p) for p in range(partitions)])
        finally:
            consumer.close()
        return {tp.partition: o for tp, o in committed.items() if o is not None}

    # -- input for sinks ---------------------------------------------------------------------
    def produce(self, topic: str, values: Sequence[Any], *, keys: Sequence[Any] | None = None,
                schema: Schema | None = None, key_schema: Schema | None = None,
                partitions: int = 1) -> None:
        """Write records a sink will read, encoded with the connector's converters (with
        `schema`/`key_schema` when they carry one); a None value is a tombstone."""
        kc = self.worker._converter(self.config, KEY_CONVERTER_CLASS_CONFIG)
        vc = self.worker._converter(self.config, VALUE_CONVERTER_CLASS_CONFIG)
        keys = list(keys) if keys is not None else [None] * len(values)
        self.produce_raw(topic, [vc.from_connect_data(topic, schema, v) if v is not None else None
                                 for v in values],
                         keys=[kc.from_connect_data(topic, key_schema, k) if k is not None
                               else None for k in keys], partitions=partitions)

    def produce_raw(self, topic: str, values: Sequence[bytes | None], *,
                    keys: Sequence[bytes | None] | None = None, partitions: int = 1) -> None:
        """Write these bytes (a bad record, say) as they are."""
        self.transport.admin().create_topics([TopicSpec(topic, partitions)], exist_ok=True)
        producer = self.transport.producer()
        errors: list[BaseException] = []
        try:
            for v, k in zip(values, keys or [None] * len(values), strict=True):
                producer.send(ProducerRecord(topic, v, k),
                              lambda md, err: err is not None and errors.append(err))
            producer.flush(30)
        finally:
            producer.close()
        if errors:
            raise AssertionError(f"producing to {topic} failed: {errors[0]}")


def _trace(e: BaseException) -> str:
    return "".join(traceback.format_exception(e))
