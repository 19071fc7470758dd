"""Deterministic kill points for SIGKILL stories: a connector that behaves exactly like a
built-in one until its tasks have handed over a given number of records, then says so in a
file and stops right there, so the test kills the worker at that point and not when some
amount of data happens to have flowed (data size is no timer: a fast machine finishes first).

- a sink task stops inside `put` after the built-in sink has taken the records: what it
  wrote (a database transaction, a committed file) is durable, the worker has committed no
  offsets for them yet;
- a source task stops inside `poll` holding the records it read: the worker never sees them.

The worker process gets the point from its environment (`env()`), so the connector config
stays the built-in one. A gate whose file exists is open: the restarted worker runs on.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kctl.connectors.file.sink import FileSinkConnector
from kctl.connectors.file.source import FileSourceConnector
from kctl.connectors.jdbc.sink import JdbcSinkConnector
from kctl.connectors.jdbc.source import JdbcSourceConnector

SINK_VAR, SOURCE_VAR = "KCTL_TEST_SINK_KILL_POINT", "KCTL_TEST_SOURCE_KILL_POINT"
HOLD_S = 300  # longer than any test waits; a worker stopped rather than killed gets out


def env(marker: Path, records: int, *, sink: bool) -> dict[str, str]:
    """The environment of a worker whose gated sink (or source) stops after `records`."""
    return {SINK_VAR if sink else SOURCE_VAR: f"{records}:{marker}"}


def reached(marker: Path) -> bool:
    return marker.exists()


def taken(marker: Path) -> int:
    """How many records the task had handed over when it stopped at its point (the put or
    poll that reached it counts whole, so at least the point's number)."""
    return int(marker.read_text().split()[0])


class _Gate:
    def __init__(self, var: str):
        after, _, path = os.environ.get(var, "").partition(":")
        self.after = int(after) if after else None
        self.marker = Path(path) if path else None
        self.seen = 0

    def passed(self, n: int) -> None:
        """`n` more records handed over; at the point, mark it and hold the thread."""
        if self.after is None or self.marker is None or self.marker.exists():
            return
        self.seen += n
        if self.seen >= self.after:
            self.marker.write_text(f"{self.seen} records\n")
            threading.Event().wait(HOLD_S)


def _gated_sink(name: str, connector: type) -> type:
    base: Any = connector().task_class()

    class Task(base):
        def start(self, props: Mapping[str, str]) -> None:
            self._gate, self._depth = _Gate(SINK_VAR), 0
            super().start(props)

        def _counted(self, write: Any, arg: Any, n: int) -> None:
            self._depth += 1  # put_batch may fall back to put: count the records once
            try:
                write(arg)
            finally:
                self._depth -= 1
            if self._depth == 0:
                self._gate.passed(n)

        def put(self, records: Sequence[Any]) -> None:
            self._counted(super().put, records, len(records))

        def put_batch(self, batch: Any) -> None:
            self._counted(super().put_batch, batch, len(batch))

    return _named(name, connector, Task)


def _gated_source(name: str, connector: type) -> type:
    base: Any = connector().task_class()

    class Task(base):
        def start(self, props: Mapping[str, str]) -> None:
            self._gate = _Gate(SOURCE_VAR)
            super().start(props)

        def poll(self) -> Any:
            out = super().poll()
            if out:
                self._gate.passed(sum(len(r) if hasattr(r, "__len__") else 1 for r in out))
            return out

    return _named(name, connector, Task)


def _named(name: str, connector: type, task: type) -> type:
    task.__name__ = task.__qualname__ = f"{name}Task"
    task.__module__ = __name__
    return type(name, (connector,), {"task_class": lambda self: task, "__module__": __name__})


KillPointFileSink = _gated_sink("KillPointFileSink", FileSinkConnector)
KillPointJdbcSink = _gated_sink("KillPointJdbcSink", JdbcSinkConnector)
KillPointFileSource = _gated_source("KillPointFileSource", FileSourceConnector)
KillPointJdbcSource = _gated_source("KillPointJdbcSource", JdbcSourceConnector)
# the task classes by their names too, so anything that pickles one finds it again
KillPointFileSinkTask = KillPointFileSink().task_class()
KillPointJdbcSinkTask = KillPointJdbcSink().task_class()
KillPointFileSourceTask = KillPointFileSource().task_class()
KillPointJdbcSourceTask = KillPointJdbcSource().task_class()
