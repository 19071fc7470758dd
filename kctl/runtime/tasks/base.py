"""The task base: the thread, the state machine and the status reports every task loop shares."""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from kctl.runtime.error_handling import ErrorCounters
from kctl.runtime.memory import IdleRelease
from kctl.states import State, TaskId

log = logging.getLogger(__name__)


class StatusListener(Protocol):
    def on_task_state(self, task: TaskId, state: State, trace: str | None = None) -> None: ...

    def on_topic_used(self, connector: str, topic: str) -> None: ...


class Transforms(Protocol):
    def apply(self, record: Any) -> Any: ...


class _NoTransforms:
    def apply(self, record: Any) -> Any:
        return record


def _trace(e: BaseException) -> str:
    return "".join(traceback.format_exception(e))


def _class_name(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _transform_class(chain: Any) -> Callable[[], str]:
    """The class of the transform that failed (as Kafka reports it), not the chain's."""

    def name() -> str:
        stage = getattr(chain, "failed_stage", None)
        return stage.class_name if stage is not None else _class_name(chain)

    return name


def _close_transforms(chain: Any) -> None:
    close = getattr(chain, "close", None)
    if close is not None:
        try:
            close()
        except Exception as e:
            log.warning("closing transforms failed: %s", e)


@dataclass(frozen=True)
class TaskSnapshot:
    """A task's counters at one moment, as `/metrics` reports them (`WorkerTask.snapshot()`):
    read by the scrape, never written."""

    kind: Literal["source", "sink"]
    polled: int  # source: records poll() returned; sink: records read from the log
    delivered: int  # source: records sent to the log; sink: records put()
    batches: int
    batch_size_max: int
    commits: int
    commit_failures: int
    commit_seconds: float
    commit_seconds_max: float
    lag: tuple[tuple[str, int, int], ...]  # sink: (topic, partition, records behind)
    stalled_since_ms: int  # 0: not stalled
    errors: ErrorCounters
    connector: Mapping[str, float]  # what the connector's task counts itself (`metrics()`)


def _connector_counters(task: Any) -> dict[str, float]:
    """Counters a connector's task keeps itself (`metrics()`: name -> value), if any."""
    read = getattr(task, "metrics", None)
    if not callable(read):
        return {}
    try:
        return {str(k): float(v) for k, v in read().items()}
    except Exception:  # a connector's bug must not break the scrape
        return {}


@dataclass
class TaskCounters:
    """Plain counters the task thread bumps once per batch; `/metrics` reads them when it
    is scraped, so the loops never call a metrics library."""

    polled: int = 0  # source: records poll() returned; sink: records read from the log
    batches: int = 0
    batch_size_max: int = 0
    commits: int = 0
    commit_failures: int = 0
    commit_seconds: float = 0.0
    commit_seconds_max: float = 0.0
    lag: dict[Any, int] = field(default_factory=dict)  # sink: partition -> records behind
    stall: Any = None  # kctl.transport.base.Stall while the task cannot move records

    def batch(self, n: int) -> None:
        self.polled += n
        self.batches += 1
        if n > self.batch_size_max:
            self.batch_size_max = n

    def committed(self, seconds: float, ok: bool) -> None:
        self.commits += 1
        self.commit_failures += not ok
        self.commit_seconds += seconds
        if seconds > self.commit_seconds_max:
            self.commit_seconds_max = seconds

    def snapshot(self, kind: Literal["source", "sink"], *, delivered: int,
                 errors: ErrorCounters, connector_task: Any = None) -> TaskSnapshot:
        stall = self.stall
        return TaskSnapshot(
            kind=kind, polled=self.polled, delivered=delivered, batches=self.batches,
            batch_size_max=self.batch_size_max, commits=self.commits,
            commit_failures=self.commit_failures, commit_seconds=self.commit_seconds,
            commit_seconds_max=self.commit_seconds_max,
            lag=tuple(sorted((tp.topic, tp.partition, behind)
                             for tp, behind in dict(self.lag).items())),
            stalled_since_ms=stall.since_ms if stall is not None else 0,
            errors=errors, connector=_connector_counters(connector_task))


class WorkerTask:
    """Lifecycle shared by both loops: thread, pause/resume, stop, failure reporting."""

    def __init__(self, task_id: TaskId, status: StatusListener, *, paused: bool,
                 commit_interval_ms: int, clock: Callable[[], float] = time.monotonic):
        self.id = task_id
        self.status = status
        self.clock = clock
        self.commit_interval = commit_interval_ms / 1000
        self._paused = paused
        self._stopping = threading.Event()
        self._abandoned = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=f"task-{task_id}", daemon=True)
        self.failed: BaseException | None = None
        self.started_count = 0
        self.counters = TaskCounters()
        self.idle_release = IdleRelease(clock)

    def snapshot(self) -> TaskSnapshot:
        """The task's counters now, for `/metrics` (any thread)."""
        raise NotImplementedError

    # -- control (any thread) --------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def pause(self) -> None:
        with self._cond:
            self._paused = True
            self._cond.notify_all()

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    def stop(self) -> None:
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()

    def join(self, timeout: float) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def abandon(self) -> None:
        """The worker gave up waiting: a restarted task may already run under this id, so
        whatever this thread does when it finally ends must not overwrite its status."""
        self._abandoned = True

    def _report(self, state: State, trace: str | None = None) -> None:
        if not self._abandoned:
            self.status.on_task_state(self.id, state, trace)

    def note_stall(self, stall: Any) -> None:
        """Tell once that the task cannot move records (`stall`, a transport `Stall`), and
        once that it can again (None): a note on its RUNNING status saying why and since
        when, `/health` (which reads `counters.stall`), a metric and one log line."""
        if stall == self.counters.stall:
            return
        before, self.counters.stall = self.counters.stall, stall
        if stall is not None:
            since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stall.since_ms / 1000))
            log.warning("Task %s is stalled since %s: %s", self.id, since, stall.reason)
            if not self._paused and not self.stopping:
                self._report(State.RUNNING, f"Stalled since {since}: {stall.reason}")
        elif before is not None:
            log.info("Task %s moves records again", self.id)
            if not self._paused and not self.stopping:
                self._report(State.RUNNING)

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def wait_unless_stopping(self, seconds: float) -> bool:
        """Sleep for a backoff, waking at once when a stop is requested; True if stopping."""
        return self._stopping.wait(seconds)

    # -- task thread ---------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self.initialize_and_start()
            self._report(State.PAUSED if self._paused else State.RUNNING)
            self.execute()
        except BaseException as e:  # a task failure must never take the worker down
            self.failed = e
            log.error("Task %s failed: %s", self.id, e, exc_info=e)
            self._report(State.FAILED, _trace(e))
            try:
                self.close(failed=True)
            except BaseException as ce:
                log.warning("Task %s failed to close: %s", self.id, ce)
            return
        try:
            self.close(failed=False)
        except BaseException as e:
            log.error("Task %s failed while stopping: %s", self.id, e, exc_info=e)
            self._report(State.FAILED, _trace(e))
            return
        self._report(State.UNASSIGNED)

    def wait_if_paused(self) -> bool:
        """Block while paused; returns True when the loop should go on."""
        if not self._paused:
            return not self.stopping
        self.on_pause()
        self._report(State.PAUSED)
        with self._cond:
            while self._paused and not self.stopping:
                self._cond.wait(0.5)
                self.while_paused()
        if not self.stopping:
            self.on_resume()
            self._report(State.RUNNING)
        return not self.stopping

    def on_pause(self) -> None:
        pass

    def on_resume(self) -> None:
        pass

    def while_paused(self) -> None:
        pass

    def initialize_and_start(self) -> None:
        raise NotImplementedError

    def execute(self) -> None:
        raise NotImplementedError

    def close(self, failed: bool) -> None:
        raise NotImplementedError


def _raise(err: BaseException) -> Any:
    raise err


def _header_bytes(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    return str(v).encode()

