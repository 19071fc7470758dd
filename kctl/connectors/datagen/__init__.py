"""DataGen: a sequence at a configured rate, for demos, tests and rebalance storms.

Kafka's VerifiableSource in kctl's clothes: each task writes `{"task": N, "seqno": S}`
strings to `topic`, S counting from 0, at most `throughput` records a second (-1: as
fast as polled), and stops producing after `max.messages` (-1: never). The source offset
is the last seqno per task, so a restarted or moved task carries on where the committed
offset says, and a consumer can check every seqno arrived once. It needs no Spark: its
tasks start in milliseconds, which makes a thousand of them a cheap rebalance load.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kctl.api import (
    ConfigDef,
    ConfigType,
    Importance,
    NonEmptyString,
    Range,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
)
from kctl.api.data import STRING_SCHEMA

__all__ = ["DataGenSourceConnector", "DataGenSourceTask"]

TASK_ID = "task.id"
BATCH_MAX = 1000  # most records one poll returns
IDLE_POLL_S = 0.5  # how long a finished or throttled task waits in poll

CONFIG_DEF = (
    ConfigDef()
    .define("topic", ConfigType.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
            doc="Topic the sequence is written to.", group="DataGen")
    .define("throughput", ConfigType.LONG, 10, Range.at_least(-1), Importance.MEDIUM,
            "Records a second per task; -1 as fast as the worker polls.", group="DataGen")
    .define("max.messages", ConfigType.LONG, -1, Range.at_least(-1), Importance.MEDIUM,
            "Records per task, then it idles; -1 never stops.", group="DataGen")
)


class DataGenSourceConnector(SourceConnector):
    """One task config per task: only the task's number differs."""

    def __init__(self) -> None:
        self._props: dict[str, str] = {}

    def version(self) -> str:
        return "1.0"

    def config(self) -> ConfigDef:
        return CONFIG_DEF

    def start(self, props: Mapping[str, str]) -> None:
        CONFIG_DEF.parse(props)
        self._props = dict(props)

    def task_class(self) -> type[Task]:
        return DataGenSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{**self._props, TASK_ID: str(i)} for i in range(max(1, max_tasks))]

    def stop(self) -> None:
        pass


class DataGenSourceTask(SourceTask):
    def __init__(self) -> None:
        self._stop = threading.Event()
        self._seqno = 0
        self._started = 0.0
        self._sent_since_start = 0

    def version(self) -> str:
        return "1.0"

    def start(self, props: Mapping[str, str]) -> None:
        parsed = CONFIG_DEF.parse(props)
        self._topic = str(parsed["topic"])
        self._throughput = int(parsed["throughput"])
        self._max = int(parsed["max.messages"])
        self._task = int(props.get(TASK_ID, "0"))
        self._partition = {"task": self._task}
        stored = self.context.offset_storage_reader.offset(self._partition)
        self._seqno = int(stored["seqno"]) + 1 if stored and "seqno" in stored else 0
        self._started = time.monotonic()
        self._sent_since_start = 0
        self._stop.clear()

    def _due(self) -> int:
        """How many records the rate allows now."""
        if self._throughput < 0:
            return BATCH_MAX
        allowed = int((time.monotonic() - self._started) * self._throughput) + 1
        return max(0, min(BATCH_MAX, allowed - self._sent_since_start))

    def poll(self) -> Sequence[SourceRecord] | None:
        count = self._due()
        if self._max >= 0:
            count = min(count, self._max - self._seqno)
        if count <= 0:
            self._stop.wait(IDLE_POLL_S if self._max >= 0 and self._seqno >= self._max
                            else min(IDLE_POLL_S, 1 / max(1, self._throughput)))
            return None
        now_ms = int(time.time() * 1000)
        records = [self._record(self._seqno + i, now_ms) for i in range(count)]
        self._seqno += count
        self._sent_since_start += count
        return records

    def _record(self, seqno: int, now_ms: int) -> SourceRecord:
        value = json.dumps({"task": self._task, "seqno": seqno}, separators=(",", ":"))
        offset: dict[str, Any] = {"seqno": seqno}
        return SourceRecord(self._topic, None, None, None, STRING_SCHEMA, value,
                            timestamp=now_ms, source_partition=self._partition,
                            source_offset=offset)

    def stop(self) -> None:
        self._stop.set()
