"""Connector configs, task configs and target states, as Kafka Connect's config topic holds them.

Every change is a record with Kafka Connect's key and value shape (``connector-<name>``
-> ``{"properties": {...}}``, ``task-<name>-<n>`` -> ``{"properties": {...}}``,
``commit-<name>`` -> ``{"tasks": n}``, ``target-state-<name>`` -> ``{"state": ...}``; a
``None`` value is a tombstone). The stores here apply those records to a ClusterConfigState
and keep the last value per key: the memory store in a dict, the file store in a JSON file
rewritten atomically. A Kafka store over a compacted topic replays the same records.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kctl.durable import atomic_write_json, read_json
from kctl.states import TargetState

log = logging.getLogger(__name__)

__all__ = [
    "ClusterConfigState",
    "ConfigBackingStore",
    "ConfigEvent",
    "ConfigListener",
    "ConnectorConfigRemoved",
    "ConnectorConfigUpdated",
    "FileConfigBackingStore",
    "MemoryConfigBackingStore",
    "RestartRequest",
    "RestartRequested",
    "SessionKey",
    "SessionKeyUpdated",
    "TargetStateChanged",
    "TaskConfigsUpdated",
    "commit_key",
    "connector_key",
    "target_state_key",
    "task_key",
]

ConfigRecord = tuple[str, dict[str, Any] | None]


def connector_key(name: str) -> str:
    return f"connector-{name}"


def task_key(name: str, task: int) -> str:
    return f"task-{name}-{task}"


def commit_key(name: str) -> str:
    return f"commit-{name}"


def target_state_key(name: str) -> str:
    return f"target-state-{name}"


SESSION_KEY = "session-key"
RESTART_PREFIX = "restart-connector-"


@dataclass(frozen=True)
class SessionKey:
    """The key workers sign internal requests with (KIP-507), as the config topic holds it."""

    key: bytes
    algorithm: str
    created_ms: int


@dataclass(frozen=True)
class RestartRequest:
    """A restart of a connector and (some of) its tasks, as KIP-745 writes it to the config
    topic: every worker restarts the part it runs."""

    connector: str
    include_tasks: bool = False
    only_failed: bool = False


# -- what a change to the config topic means, as one typed value ------------------------------
# The store's state returns these when it applies a record; listeners (the herders) receive
# them unchanged and `match` on them (Kafka's ConfigBackingStore.UpdateListener callbacks).


@dataclass(frozen=True)
class ConnectorConfigUpdated:
    connector: str


@dataclass(frozen=True)
class ConnectorConfigRemoved:
    connector: str


@dataclass(frozen=True)
class TaskConfigsUpdated:
    """A commit record made the connector's task configs visible together."""

    connector: str
    tasks: tuple[int, ...]


@dataclass(frozen=True)
class TargetStateChanged:
    connector: str


@dataclass(frozen=True)
class SessionKeyUpdated:
    key: SessionKey


@dataclass(frozen=True)
class RestartRequested:
    request: RestartRequest


ConfigEvent = (ConnectorConfigUpdated | ConnectorConfigRemoved | TaskConfigsUpdated
               | TargetStateChanged | SessionKeyUpdated | RestartRequested)
ConfigListener = Callable[[ConfigEvent], None]


@dataclass(frozen=True)
class ClusterConfigState:
    """An immutable snapshot of every connector's config, task configs and target state."""

    offset: int
    connector_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    task_configs: Mapping[str, tuple[Mapping[str, str], ...]] = field(default_factory=dict)
    target_states: Mapping[str, TargetState] = field(default_factory=dict)

    def connectors(self) -> list[str]:
        return sorted(self.connector_configs)

    def target_state(self, connector: str) -> TargetState | None:
        if connector not in self.connector_configs:
            return None
        return self.target_states.get(connector, TargetState.STARTED)


class _State:
    """Applies config records in order; mutable, guarded by the store's lock."""

    def __init__(self) -> None:
        self.offset = 0
        self.connectors: dict[str, dict[str, str]] = {}
        self.tasks: dict[str, list[dict[str, str]]] = {}
        self.targets: dict[str, TargetState] = {}
        self.pending: dict[str, dict[int, dict[str, str]]] = {}  # task records before their commit
        self.session_key: SessionKey | None = None

    def apply(self, key: str, value: dict[str, Any] | None) -> list[ConfigEvent]:
        """Returns the events the record causes, for the store's listeners."""
        self.offset += 1
        if key == SESSION_KEY:
            if value is None:
                return []
            import base64

            self.session_key = SessionKey(base64.b64decode(str(value.get("key", ""))),
                                          str(value.get("algorithm", "HmacSHA256")),
                                          int(value.get("creation-timestamp", 0)))
            return [SessionKeyUpdated(self.session_key)]
        if key.startswith(RESTART_PREFIX):
            if value is None:
                return []
            return [RestartRequested(RestartRequest(key[len(RESTART_PREFIX):],
                                                    bool(value.get("include-tasks", False)),
                                                    bool(value.get("only-failed", False))))]
        if key.startswith("target-state-"):
            name = key[len("target-state-"):]
            if value is None:
                self.targets.pop(name, None)
                return []
            raw = value.get("state.v2") or value.get("state") or "STARTED"
            try:
                state = TargetState(str(raw))
            except ValueError:
                log.warning("Ignoring unknown target state %r of %s", raw, name)
                return []
            self.targets[name] = state
            return [TargetStateChanged(name)]
        if key.startswith("connector-"):
            name = key[len("connector-"):]
            if value is None:
                existed = name in self.connectors
                self.connectors.pop(name, None)
                self.tasks.pop(name, None)
                self.targets.pop(name, None)
                self.pending.pop(name, None)
                return [ConnectorConfigRemoved(name)] if existed else []
            self.connectors[name] = {str(k): str(v) for k, v in value.get("properties", {}).items()}
            return [ConnectorConfigUpdated(name)]
        if key.startswith("task-"):
            name, _, idx = key[len("task-"):].rpartition("-")
            if not idx.isdigit():
                return []
            if value is None:
                self.pending.get(name, {}).pop(int(idx), None)
                return []
            self.pending.setdefault(name, {})[int(idx)] = {
                str(k): str(v) for k, v in value.get("properties", {}).items()}
            return []
        if key.startswith("commit-"):
            name = key[len("commit-"):]
            if value is None:
                return []
            n = int(value.get("tasks", 0))
            pending = self.pending.pop(name, {})
            old = self.tasks.get(name, [])
            configs = []
            for i in range(n):
                c = pending.get(i, old[i] if i < len(old) else None)
                if c is None:
                    log.error("Commit of %d task config(s) for %s is missing task %d; ignored",
                              n, name, i)
                    return []
                configs.append(c)
            self.tasks[name] = configs
            return [TaskConfigsUpdated(name, tuple(range(n)))]
        log.debug("Ignoring config record with unknown key %s", key)
        return []

    def snapshot(self) -> ClusterConfigState:
        return ClusterConfigState(
            self.offset,
            {n: dict(c) for n, c in self.connectors.items()},
            {n: tuple(dict(c) for c in cs) for n, cs in self.tasks.items()},
            dict(self.targets))


class ConfigBackingStore(ABC):
    """Where connector configs, task configs and target states live (connect-configs)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._state = _State()
        self._listeners: list[ConfigListener] = []

    # -- lifecycle and plumbing --------------------------------------------------------
    def configure(self, config: Mapping[str, Any]) -> None:
        """Receive the worker config."""

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    @abstractmethod
    def _persist(self, records: Sequence[ConfigRecord]) -> None:
        """Make the records durable before they are applied (raise to refuse them)."""

    def add_listener(self, listener: ConfigListener) -> None:
        """`listener` gets every change as a ConfigEvent, on the thread that applied it."""
        self._listeners.append(listener)

    def remove_listener(self, listener: ConfigListener) -> None:
        self._listeners.remove(listener)

    def _write(self, records: Sequence[ConfigRecord]) -> None:
        with self._lock:
            self._persist(records)
            events = [e for key, value in records for e in self._state.apply(key, value)]
        self._fire(events)

    def _fire(self, events: list[ConfigEvent]) -> None:
        for event in events:
            for listener in list(self._listeners):
                try:
                    listener(event)
                except Exception as e:
                    log.error("Config listener %r failed on %s: %s", listener, event, e)

    def read_to_end(self) -> None:
        """Catch up with every change written so far. A store whose writes are applied
        when they are made (memory, file) is always caught up; a store over a shared log
        reads it to its end."""

    @property
    def offset(self) -> int:
        """How many config records this store has applied (the config topic's offset):
        what a worker advertises when it joins, and what an assignment asks it to reach."""
        with self._lock:
            return self._state.offset

    # -- reads -------------------------------------------------------------------------
    def snapshot(self) -> ClusterConfigState:
        with self._lock:
            return self._state.snapshot()

    def connector_names(self) -> list[str]:
        with self._lock:
            return sorted(self._state.connectors)

    def contains(self, name: str) -> bool:
        with self._lock:
            return name in self._state.connectors

    def connector_config(self, name: str) -> dict[str, str] | None:
        with self._lock:
            c = self._state.connectors.get(name)
            return dict(c) if c is not None else None

    def task_configs(self, name: str) -> list[dict[str, str]]:
        with self._lock:
            return [dict(c) for c in self._state.tasks.get(name, [])]

    def target_state(self, name: str) -> TargetState | None:
        """The requested state; STARTED when never set, None for an unknown connector."""
        with self._lock:
            if name not in self._state.connectors:
                return None
            return self._state.targets.get(name, TargetState.STARTED)

    # -- writes ------------------------------------------------------------------------
    def put_connector_config(self, name: str, config: Mapping[str, str],
                             target_state: TargetState | None = None) -> None:
        """Create or replace a connector's config; a given target state is written first."""
        records: list[ConfigRecord] = []
        if target_state is not None:
            records.append((target_state_key(name), _target_value(target_state)))
        records.append((connector_key(name), {"properties": {k: str(v) for k, v in config.items()}}))
        self._write(records)

    def put_task_configs(self, name: str, configs: Sequence[Mapping[str, str]]) -> None:
        """Replace all task configs at once: the commit record makes them visible together."""
        records: list[ConfigRecord] = [
            (task_key(name, i), {"properties": {k: str(v) for k, v in c.items()}})
            for i, c in enumerate(configs)]
        records.append((commit_key(name), {"tasks": len(configs)}))
        self._write(records)

    def put_target_state(self, name: str, state: TargetState) -> None:
        self._write([(target_state_key(name), _target_value(state))])

    def put_session_key(self, key: SessionKey) -> None:
        import base64

        self._write([(SESSION_KEY, {"key": base64.b64encode(key.key).decode(),
                                    "algorithm": key.algorithm,
                                    "creation-timestamp": key.created_ms})])

    def put_restart_request(self, request: RestartRequest) -> None:
        self._write([(RESTART_PREFIX + request.connector,
                      {"include-tasks": request.include_tasks,
                       "only-failed": request.only_failed})])

    def session_key(self) -> SessionKey | None:
        with self._lock:
            return self._state.session_key

    def remove_connector(self, name: str) -> None:
        with self._lock:
            n = len(self._state.tasks.get(name, []))
        records: list[ConfigRecord] = [(connector_key(name), None), (target_state_key(name), None),
                                       (commit_key(name), None)]
        records += [(task_key(name, i), None) for i in range(n)]
        self._write(records)


def _target_value(state: TargetState) -> dict[str, str]:
    # Kafka writes "state" for old readers (which only know STARTED/PAUSED) and "state.v2".
    return {"state": "PAUSED" if state is TargetState.PAUSED else "STARTED",
            "state.v2": state.value}


class MemoryConfigBackingStore(ConfigBackingStore):
    """Configs in memory only (tests; a worker that forgets its connectors on exit)."""

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def _persist(self, records: Sequence[ConfigRecord]) -> None:
        pass


class FileConfigBackingStore(ConfigBackingStore):
    """Configs in one JSON file of Kafka Connect config records, last value per key.

    Each write rewrites the file atomically before the change is applied, so a restart
    (even after kill -9) sees every change that was acknowledged.
    """

    def __init__(self, path: str | Path, *, fsync: bool = False):
        super().__init__()
        self.path = Path(path)
        self.fsync = fsync
        self._records: dict[str, dict[str, Any]] = {}

    def start(self) -> None:
        raw = read_json(self.path, {"records": []})
        with self._lock:
            self._state = _State()
            self._records = {}
            for key, value in raw.get("records", []):
                self._records[key] = value
                self._state.apply(key, value)

    def stop(self) -> None:
        pass

    def _persist(self, records: Sequence[ConfigRecord]) -> None:
        updated = dict(self._records)
        for key, value in records:
            if value is None:
                updated.pop(key, None)
            else:
                updated.pop(key, None)  # re-insert: the file keeps records in write order
                updated[key] = value
        atomic_write_json(self.path, {"version": 1, "records": [[k, v] for k, v in updated.items()]},
                          fsync=self.fsync)
        self._records = updated
