"""A test connector whose task set changes while it runs, through
`context.request_task_reconfiguration()`, as a connector watching an external system would.

The test reaches the running connector instance through `RUNNING[name]` and calls
`reshard(n)`; every task start is recorded with its config in `TASK_STARTS[name]`.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Mapping

from kctl.api import ConfigDef, ConfigType, SourceConnector, SourceRecord, SourceTask

RUNNING: dict[str, ShardedSourceConnector] = {}
TASK_STARTS: dict[str, list[dict[str, str]]] = defaultdict(list)
_lock = threading.Lock()


class ShardedSourceConnector(SourceConnector):
    """One task per shard (up to tasks.max); `shards` comes from the config, then reshard()."""

    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("topic", ConfigType.STRING, doc="Target topic (nothing is written)")
                .define("shards", ConfigType.INT, 1, doc="Shards at start"))

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        self.shards = int(props.get("shards", 1))
        with _lock:
            RUNNING[props["name"]] = self

    def reshard(self, shards: int) -> None:
        """The external system changed: ask the runtime for new task configs."""
        self.shards = shards
        self.context.request_task_reconfiguration()

    def task_class(self) -> type[SourceTask]:
        return ShardTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        n = min(self.shards, max_tasks)
        return [{**self.props, "shard": str(i), "of": str(n)} for i in range(n)]

    def stop(self) -> None:
        with _lock:
            if RUNNING.get(self.props["name"]) is self:
                del RUNNING[self.props["name"]]


class ShardTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        with _lock:
            TASK_STARTS[props["name"]].append(dict(props))

    def poll(self) -> list[SourceRecord] | None:
        time.sleep(0.02)
        return None

    def stop(self) -> None:
        pass
