"""A source of keyed updates and deletions, for sinks that keep the last value per key."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from kctl.api import ConfigDef, ConfigType, SourceConnector, SourceRecord, SourceTask
from kctl.api.data import STRING_SCHEMA


def update(i: int, keys: int) -> tuple[str, dict | None]:
    """Record i: key k<i % keys>; every seventh a tombstone, the others {"i": i}."""
    return f"k{i % keys}", (None if i % 7 == 6 else {"i": i})


def final_state(count: int, keys: int) -> dict[str, dict]:
    """What a sink that keeps the last value per key holds after records 0..count-1."""
    state: dict[str, dict] = {}
    for i in range(count):
        key, value = update(i, keys)
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    return state


class UpdatesSourceConnector(SourceConnector):
    def config(self) -> ConfigDef:
        return (ConfigDef().define("topic", ConfigType.STRING)
                .define("count", ConfigType.INT, 1000).define("keys", ConfigType.INT, 50))

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[SourceTask]:
        return UpdatesSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass


class UpdatesSourceTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        cfg = UpdatesSourceConnector().config().parse(props)
        self.topic, self.count, self.keys = cfg["topic"], cfg["count"], cfg["keys"]
        stored = self.context.offset_storage_reader.offset({"updates": self.topic})
        self.next = stored["i"] + 1 if stored else 0
        self.stopping = threading.Event()

    def poll(self) -> list[SourceRecord]:
        out = []
        for i in range(self.next, min(self.next + 100, self.count)):
            key, value = update(i, self.keys)
            out.append(SourceRecord(self.topic, None, STRING_SCHEMA, key, None, value,
                                    source_partition={"updates": self.topic},
                                    source_offset={"i": i}))
        self.next += len(out)
        if not out:
            self.stopping.wait(0.1)  # done: do not spin
        return out

    def stop(self) -> None:
        self.stopping.set()
