"""Connector and task statuses, and the topics each connector used (KIP-558).

Records follow Kafka Connect's status topic: ``status-connector-<name>`` and
``status-task-<name>-<n>`` -> ``{"state", "trace", "worker_id", "generation"}``, and
``status-topic-<topic>:connector-<name>`` -> ``{"topic": {"name", "connector", "task",
"discoverTimestamp"}}``; ``None`` is a tombstone. The memory store keeps them in a dict,
the file store also in a JSON file rewritten atomically, and a Kafka store would put the
same records on a compacted topic.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from kctl.durable import atomic_write_json, read_json
from kctl.states import State, TaskStatus

__all__ = [
    "FileStatusBackingStore",
    "MemoryStatusBackingStore",
    "StatusBackingStore",
    "StatusEntry",
    "connector_status_key",
    "task_status_key",
    "topic_status_key",
]

StatusRecord = tuple[str, dict[str, Any] | None]


class StatusEntry(NamedTuple):
    """What the store knows of one connector or task; unpacks as (state, worker_id, trace)."""

    state: State
    worker_id: str
    trace: str | None


def connector_status_key(name: str) -> str:
    return f"status-connector-{name}"


def task_status_key(name: str, task: int) -> str:
    return f"status-task-{name}-{task}"


def topic_status_key(connector: str, topic: str) -> str:
    return f"status-topic-{topic}:connector-{connector}"


def _entry(value: Mapping[str, Any]) -> StatusEntry | None:
    try:
        return StatusEntry(State(value["state"]), str(value.get("worker_id", "")),
                           value.get("trace"))
    except (KeyError, ValueError):
        return None


class StatusBackingStore(ABC):
    """Where connector/task states and used topics live (connect-status)."""

    def __init__(self, *, clock: Callable[[], float] = time.time):
        self._lock = threading.RLock()
        self._clock = clock
        self._records: dict[str, dict[str, Any]] = {}
        self._generation = 0

    def configure(self, config: Mapping[str, Any]) -> None:
        """Receive the worker config."""

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    @abstractmethod
    def _persist(self, records: dict[str, dict[str, Any]]) -> None:
        """Make the full new record set durable (raise to refuse the change)."""

    def read_to_end(self) -> None:
        """Catch up with every status written so far (a store over a shared log reads it
        to its end; the local stores always are)."""

    def _write(self, changes: Sequence[StatusRecord]) -> None:
        with self._lock:
            updated = dict(self._records)
            for key, value in changes:
                if value is None:
                    updated.pop(key, None)
                else:
                    updated[key] = value
            if updated != self._records:
                self._persist(updated)
                self._records = updated

    # -- connectors and tasks ----------------------------------------------------------
    def put_connector_state(self, name: str, state: State, worker_id: str,
                            trace: str | None = None, generation: int | None = None) -> None:
        self._write([(connector_status_key(name), self._status(state, worker_id, trace, generation))])

    def put_task_state(self, connector: str, task: int, state: State, worker_id: str,
                       trace: str | None = None, generation: int | None = None) -> None:
        self._write([(task_status_key(connector, task),
                      self._status(state, worker_id, trace, generation))])

    def put_task(self, status: TaskStatus) -> None:
        self.put_task_state(status.connector, status.task, status.state, status.worker_id,
                            status.trace, status.generation)

    def _status(self, state: State, worker_id: str, trace: str | None,
                generation: int | None) -> dict[str, Any]:
        return {"state": state.value, "trace": trace, "worker_id": worker_id,
                "generation": self._generation if generation is None else generation}

    def connector_state(self, name: str) -> StatusEntry | None:
        with self._lock:
            value = self._records.get(connector_status_key(name))
        return _entry(value) if value is not None else None

    def task_state(self, connector: str, task: int) -> StatusEntry | None:
        with self._lock:
            value = self._records.get(task_status_key(connector, task))
        return _entry(value) if value is not None else None

    def get_task(self, connector: str, task: int) -> TaskStatus | None:
        with self._lock:
            value = self._records.get(task_status_key(connector, task))
        entry = _entry(value) if value is not None else None
        if entry is None:
            return None
        return TaskStatus(connector, task, entry.state, entry.worker_id, entry.trace,
                          int(value.get("generation") or 0))  # type: ignore[union-attr]

    def tasks(self, connector: str) -> list[TaskStatus]:
        """Every stored task status of a connector, by task id."""
        prefix = f"status-task-{connector}-"
        with self._lock:
            ids = sorted(int(k[len(prefix):]) for k in self._records
                         if k.startswith(prefix) and k[len(prefix):].isdigit())
        return [s for i in ids if (s := self.get_task(connector, i)) is not None]

    def connectors(self) -> list[str]:
        prefix = "status-connector-"
        with self._lock:
            return sorted(k[len(prefix):] for k in self._records if k.startswith(prefix))

    def remove_tasks(self, connector: str, *, keep: int = 0) -> None:
        """Forget the statuses of tasks with id >= keep (after tasks.max shrank, or a stop)."""
        prefix = f"status-task-{connector}-"
        with self._lock:
            doomed = [k for k in self._records
                      if k.startswith(prefix) and k[len(prefix):].isdigit()
                      and int(k[len(prefix):]) >= keep]
        if doomed:
            self._write([(k, None) for k in doomed])

    def remove_connector(self, name: str) -> None:
        """Forget a deleted connector's status, its tasks' statuses and its topics."""
        task_prefix = f"status-task-{name}-"
        topic_suffix = f":connector-{name}"
        with self._lock:
            doomed = [k for k in self._records
                      if k == connector_status_key(name)
                      or (k.startswith(task_prefix) and k[len(task_prefix):].isdigit())
                      or (k.startswith("status-topic-") and k.endswith(topic_suffix))]
        if doomed:
            self._write([(k, None) for k in doomed])

    # -- topics (KIP-558) --------------------------------------------------------------
    def put_topic(self, connector: str, topic: str, task: int | None = None) -> None:
        """Record that a connector used a topic (kept until reset; first use wins)."""
        key = topic_status_key(connector, topic)
        with self._lock:
            if key in self._records:
                return
            self._write([(key, {"topic": {"name": topic, "connector": connector,
                                          "task": task if task is not None else 0,
                                          "discoverTimestamp": int(self._clock() * 1000)}})])

    def topics(self, connector: str) -> set[str]:
        suffix = f":connector-{connector}"
        with self._lock:
            return {v["topic"]["name"] for k, v in self._records.items()
                    if k.startswith("status-topic-") and k.endswith(suffix)}

    def reset_topics(self, connector: str) -> None:
        suffix = f":connector-{connector}"
        with self._lock:
            doomed = [k for k in self._records if k.startswith("status-topic-") and k.endswith(suffix)]
        if doomed:
            self._write([(k, None) for k in doomed])

    # -- generations (what each worker saw of each rebalance; kctl's, for rebalance history)
    def put_generation(self, key: str, record: Mapping[str, Any]) -> None:
        """One worker's record of one generation (`kctl.group.history.GenerationRecord`
        as JSON) under its `generation-<worker>-<n>` key."""
        self._write([(key, {"generation": dict(record)})])

    def generations(self) -> list[dict[str, Any]]:
        """Every worker's generation records, oldest generation first."""
        with self._lock:
            docs = [v["generation"] for k, v in self._records.items()
                    if k.startswith("generation-") and isinstance(v.get("generation"), dict)]
        return sorted(docs, key=lambda d: (d.get("generation", 0), d.get("worker", "")))

    def records(self) -> dict[str, dict[str, Any]]:
        """Every live record (what a compacted status topic would hold)."""
        with self._lock:
            return dict(self._records)


class MemoryStatusBackingStore(StatusBackingStore):
    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def _persist(self, records: dict[str, dict[str, Any]]) -> None:
        pass


class FileStatusBackingStore(StatusBackingStore):
    """Statuses in one JSON file, rewritten atomically on every change."""

    def __init__(self, path: str | Path, *, fsync: bool = False,
                 clock: Callable[[], float] = time.time):
        super().__init__(clock=clock)
        self.path = Path(path)
        self.fsync = fsync

    def start(self) -> None:
        raw = read_json(self.path, {"records": {}})
        with self._lock:
            self._records = {str(k): v for k, v in raw.get("records", {}).items()
                             if isinstance(v, dict)}

    def stop(self) -> None:
        pass

    def _persist(self, records: dict[str, dict[str, Any]]) -> None:
        atomic_write_json(self.path, {"version": 1, "records": records}, fsync=self.fsync)
