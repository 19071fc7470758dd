"""What a distributed worker's status says about work that runs nowhere.

Kafka's incremental cooperative assignor holds a departed worker's connectors and tasks back
for `scheduled.rebalance.max.delay.ms` (the worker may come back). Until they are reassigned
their last status is the dead worker's RUNNING; the leader overwrites it with UNASSIGNED and
a note naming the lost worker, when it was lost and when the work is due to move (the
rebalance that moves it comes a few seconds after that; the history's round says when).
"""

from __future__ import annotations

import time

from kctl.group.assignors.connect import ConnectorsAndTasks
from kctl.group.history import GenerationRecord
from kctl.states import State
from kctl.storage.configs import ConfigBackingStore
from kctl.storage.status import StatusBackingStore, StatusEntry


def utc(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


class LostWork:
    """The leader's notes on lost work, kept across generations so "lost at" stays the
    time the work was first lost, not the latest round that still holds it back."""

    def __init__(self, configs: ConfigBackingStore, statuses: StatusBackingStore):
        self.configs = configs
        self.statuses = statuses
        self._since: dict[str, tuple[str, int]] = {}  # lost work -> (worker, when)

    def note(self, record: GenerationRecord) -> None:
        """Mark what the leader's round `record` holds back as UNASSIGNED, with the note."""
        sets = record.sets or {}
        waiting = (ConnectorsAndTasks.from_json(sets.get("lost", {}))
                   - ConnectorsAndTasks.from_json(sets.get("lost_reassigned", {})))
        keys = {*waiting.connectors, *map(str, waiting.tasks)}
        self._since = {k: v for k, v in self._since.items() if k in keys}
        if waiting.is_empty or record.delay_ms <= 0:
            return
        due = utc(record.at_ms + record.delay_ms)
        for name in sorted(waiting.connectors):
            if self.configs.contains(name):
                entry = self.statuses.connector_state(name)
                worker, trace = self._note(name, entry, record.at_ms, due)
                self.statuses.put_connector_state(name, State.UNASSIGNED, worker, trace)
        for tid in sorted(waiting.tasks):
            if self.configs.contains(tid.connector):
                entry = self.statuses.task_state(tid.connector, tid.task)
                worker, trace = self._note(str(tid), entry, record.at_ms, due)
                self.statuses.put_task_state(tid.connector, tid.task, State.UNASSIGNED,
                                             worker, trace)

    def _note(self, key: str, entry: StatusEntry | None, at_ms: int,
              due: str) -> tuple[str, str]:
        if key not in self._since:
            worker = entry.worker_id if entry is not None and entry.worker_id else "unknown"
            self._since[key] = (worker, at_ms)
        worker, since = self._since[key]
        return worker, (f"Worker {worker} left the group (stopped, or its session expired); "
                        f"lost at {utc(since)}, this runs nowhere until it is reassigned: due "
                        f"at {due}, when scheduled.rebalance.max.delay.ms expires and the "
                        f"next rebalance hands it out (unless {worker} rejoins first; "
                        "`kctl rebalance history` says when it was)")
