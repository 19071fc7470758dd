"""Connector and task identities, states and the status values REST and the CLI show.

Plain values at the bottom of the layering: storage persists them, the runtime produces
them, the group protocol assigns `TaskId`s, REST and the CLI render them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from kctl.errors import ConfigError


@dataclass(frozen=True, order=True, slots=True)
class TaskId:
    """A connector task; sorts by connector then task number; str() is "ct1-0"."""

    connector: str
    task: int

    def __str__(self) -> str:
        return f"{self.connector}-{self.task}"

    @classmethod
    def parse(cls, text: str) -> TaskId:
        """Inverse of str(): the task number follows the last dash."""
        connector, dash, number = text.rpartition("-")
        if not dash or not connector or not number.isdigit():
            raise ConfigError(f"not a task id (expected 'connector-N'): {text!r}", key=text)
        return cls(connector, int(number))


class State(Enum):
    """Kafka Connect's states (AbstractStatus.State)."""

    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"
    FAILED = "FAILED"
    RESTARTING = "RESTARTING"
    DESTROYED = "DESTROYED"


class TargetState(Enum):
    """What the user asked for; the runtime moves actual states toward it."""

    STARTED = "STARTED"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


class ConnectorType(Enum):
    SOURCE = "source"
    SINK = "sink"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class TaskStatus:
    connector: str
    task: int
    state: State
    worker_id: str
    trace: str | None = None
    generation: int = 0

    def to_json(self) -> dict:
        d = {"id": self.task, "state": self.state.value, "worker_id": self.worker_id}
        if self.trace:
            d["trace"] = self.trace
        return d


@dataclass(frozen=True)
class ConnectorStatus:
    name: str
    state: State
    worker_id: str
    type: ConnectorType
    tasks: tuple[TaskStatus, ...] = ()
    trace: str | None = None

    def to_json(self) -> dict:
        conn = {"state": self.state.value, "worker_id": self.worker_id}
        if self.trace:
            conn["trace"] = self.trace
        return {"name": self.name, "connector": conn,
                "tasks": [t.to_json() for t in self.tasks], "type": self.type.value}


@dataclass(frozen=True)
class ConnectorInfo:
    name: str
    config: dict[str, str]
    tasks: tuple[int, ...]
    type: ConnectorType

    def to_json(self) -> dict:
        return {"name": self.name, "config": self.config,
                "tasks": [{"connector": self.name, "task": t} for t in self.tasks],
                "type": self.type.value}


@dataclass(frozen=True)
class PluginInfo:
    class_name: str
    type: str  # "source" | "sink" | "transformation" | "predicate" | "converter"
    version: str
    aliases: tuple[str, ...] = field(default=())

    def to_json(self) -> dict:
        return {"class": self.class_name, "type": self.type, "version": self.version}
