"""Small pure-Python connectors for runtime tests (no Spark): they fail on demand."""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from kctl.api import (
    ConfigDef,
    ConfigType,
    RetriableError,
    SinkBatch,
    SinkConnector,
    SinkRecord,
    SinkTask,
    SourceBatch,
    SourceConnector,
    SourceRecord,
    SourceTask,
)
from kctl.api import data as d

# connector name -> list of (topic, partition, offset, value); shared with the tests
SINK_RECEIVED: dict[str, list[tuple[str, int, int, object]]] = defaultdict(list)
SINK_PUT_CALLS: dict[str, int] = defaultdict(int)
TASK_STARTS: dict[str, int] = defaultdict(int)
_lock = threading.Lock()


class CounterSourceConnector(SourceConnector):
    """Emits `count` records per task: values 0..count-1, offset {"i": i}."""

    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("topic", ConfigType.STRING, doc="Target topic")
                .define("count", ConfigType.INT, 100, doc="Records per task")
                .define("per.poll", ConfigType.INT, 10, doc="Records per poll")
                .define("poll.sleep.ms", ConfigType.INT, 0, doc="Pause before each poll")
                .define("fail.at", ConfigType.INT, -1, doc="Raise when reaching this value")
                .define("partitions", ConfigType.INT, 0, doc="Extra tasks requested later"))
    # `events.file` (undeclared, so the connector's documented keys stay as they are): the
    # task appends 'start', 'acked <value>' and 'exhausted' lines there, so a test can wait
    # for what the task has done. `hold.at` and `hold.until` (a path): the task produces
    # nothing from value `hold.at` on until that file exists, so a test can act (restart the
    # worker) at a known point mid-way instead of racing the data.

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self):
        return CounterSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        n = min(max_tasks, int(self.props.get("partitions") or max_tasks))
        return [{**self.props, "task.index": str(i)} for i in range(n)]

    def stop(self) -> None:
        pass


class CounterSourceTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        self.topic = props["topic"]
        self.count = int(props.get("count", 100))
        self.per_poll = int(props.get("per.poll", 10))
        self.sleep_s = int(props.get("poll.sleep.ms", 0)) / 1000
        self.fail_at = int(props.get("fail.at", -1))
        self.index = int(props["task.index"])
        self.partition = {"task": self.index}
        with _lock:
            TASK_STARTS[props["name"]] += 1
        stored = self.context.offset_storage_reader.offset(self.partition)
        self.next = stored["i"] + 1 if stored else 0
        self.events = props.get("events.file") or ""
        self.hold_at = int(props.get("hold.at", -1))
        self.hold_until = props.get("hold.until") or ""
        self.exhausted = False
        self._event("start")

    def _event(self, line: str) -> None:
        if self.events:
            with _lock, open(self.events, "a") as f:
                f.write(line + "\n")

    def commit_record(self, record: SourceRecord, metadata: Any) -> None:
        """Called once the record is acknowledged (or dead-lettered: metadata None)."""
        self._event(f"acked {record.value}")

    def _held(self) -> bool:
        return (self.next >= self.hold_at >= 0 and bool(self.hold_until)
                and not os.path.exists(self.hold_until))

    def poll(self) -> list[SourceRecord] | None:
        time.sleep(self.sleep_s)
        if self._held():
            time.sleep(0.02)
            return None
        if self.next >= self.count:
            if not self.exhausted:
                self.exhausted = True
                self._event("exhausted")
            time.sleep(0.02)
            return None
        out = []
        for _ in range(min(self.per_poll, self.count - self.next)):
            if self._held():
                break
            if self.next == self.fail_at:
                raise RuntimeError(f"boom at {self.next}")
            out.append(SourceRecord(self.topic, None, None, None, d.INT64_SCHEMA,
                                    self.index * 1_000_000 + self.next,
                                    source_partition=self.partition,
                                    source_offset={"i": self.next}))
            self.next += 1
        return out

    def stop(self) -> None:
        pass


class LingeringSourceConnector(CounterSourceConnector):
    """A counter whose task starts a thread that never ends and is not a daemon, as a
    library a connector uses can (py4j's callback server is one)."""

    def task_class(self):
        return LingeringSourceTask


class LingeringSourceTask(CounterSourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        super().start(props)
        threading.Thread(target=threading.Event().wait, name="library-thread-that-lingers",
                         daemon=False).start()


class CollectingSinkConnector(SinkConnector):
    def config(self) -> ConfigDef:
        return ConfigDef().define("fail.first.puts", ConfigType.INT, 0, doc="Retriable failures")

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self):
        return CollectingSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass


class CollectingSinkTask(SinkTask):
    def start(self, props: Mapping[str, str]) -> None:
        self.name = props["name"]
        self.fail_first = int(props.get("fail.first.puts", 0))
        with _lock:
            TASK_STARTS[self.name] += 1

    def put(self, records: Sequence[SinkRecord]) -> None:
        if not records:  # an idle poll's put: the failures on purpose are for records
            return
        with _lock:
            SINK_PUT_CALLS[self.name] += 1
            if SINK_PUT_CALLS[self.name] <= self.fail_first:
                raise RetriableError(f"put #{SINK_PUT_CALLS[self.name]} fails on purpose")
            SINK_RECEIVED[self.name].extend(
                (r.topic, r.kafka_partition, r.kafka_offset, r.value) for r in records)
            SINK_KEYS[self.name].extend((r.key_schema, r.key) for r in records)

    def stop(self) -> None:
        pass


# -- columnar batches ------------------------------------------------------------------------

COLUMN_NAMES = ["plain", 'quote "q"', "back\\slash", "tab\there", "line\nbreak", "ünïcødé ✓",
                "emoji 🦆", "", "\x00nul", "slash/ok"]


def column_row(i: int) -> dict:
    """Row i of the columnar test data: every kind of string JSON must escape, and nulls."""
    return {"id": i, "name": COLUMN_NAMES[i % len(COLUMN_NAMES)],
            "score": None if i % 7 == 0 else i / 4, "ok": i % 3 == 0,
            "inner": None if i % 11 == 0 else {"n": -i, "tag": f"t{i % 5}"}}


class ColumnSourceConnector(SourceConnector):
    """Emits `count` rows of `column_row` per task, as SourceBatch columns (`columnar`
    true) or as the SourceRecords those batches stand for (false)."""

    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("topic", ConfigType.STRING, doc="Target topic")
                .define("count", ConfigType.INT, 1000, doc="Rows per task")
                .define("per.poll", ConfigType.INT, 250, doc="Rows per poll")
                .define("columnar", ConfigType.BOOLEAN, True, doc="Return SourceBatch columns")
                .define("keyed", ConfigType.BOOLEAN, False, doc="Key each row by {id}"))

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self):
        return ColumnSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{**self.props, "task.index": str(i)} for i in range(max_tasks)]

    def stop(self) -> None:
        pass


class ColumnSourceTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        import pyarrow as pa

        from kctl.api.arrow import arrow_type_to_connect

        self.topic = props["topic"]
        self.count = int(props.get("count", 1000))
        self.per_poll = int(props.get("per.poll", 250))
        self.columnar = props.get("columnar", "true").lower() == "true"
        self.partition = {"task": int(props["task.index"])}
        self.type = pa.struct([("id", pa.int64()), ("name", pa.string()),
                               ("score", pa.float64()), ("ok", pa.bool_()),
                               ("inner", pa.struct([("n", pa.int32()), ("tag", pa.string())]))])
        self.schema = arrow_type_to_connect(self.type, optional=False)
        self.keyed = props.get("keyed", "false").lower() == "true"
        self.key_type = pa.struct([pa.field("id", pa.int64(), nullable=False)])
        self.key_schema = arrow_type_to_connect(self.key_type, optional=False)
        stored = self.context.offset_storage_reader.offset(self.partition)
        self.next = stored["i"] + 1 if stored else 0

    def poll(self) -> list[SourceRecord | SourceBatch] | None:
        import pyarrow as pa

        if self.next >= self.count:
            time.sleep(0.02)
            return None
        ids = range(self.next, min(self.next + self.per_poll, self.count))
        self.next = ids[-1] + 1
        keys = pa.array([{"id": i} for i in ids], self.key_type) if self.keyed else None
        batch = SourceBatch(self.topic, self.partition, self.schema,
                            pa.array([column_row(i) for i in ids], self.type),
                            {"i": list(ids), "half": [i // 2 for i in ids]},
                            self.key_schema if self.keyed else None, keys)
        return [batch] if self.columnar else batch.records()

    def stop(self) -> None:
        pass


class ColumnSinkConnector(CollectingSinkConnector):
    def task_class(self):
        return ColumnSinkTask


class ColumnSinkTask(CollectingSinkTask):
    """Takes columns (put_batch); SINK_PUT_CALLS counts puts of either kind, and
    SINK_BATCHES how many records came as columns."""

    def put_batch(self, batch: SinkBatch) -> None:
        with _lock:
            SINK_BATCHES[self.name] += len(batch)
        self.put(batch.records())


SINK_BATCHES: dict[str, int] = defaultdict(int)
SINK_KEYS: dict[str, list] = defaultdict(list)  # (key_schema, key) of each record put
