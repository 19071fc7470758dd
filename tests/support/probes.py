"""Test connectors and a converter that provoke or observe the runtime's error and commit
paths (no Spark). State they observe lives in module dicts keyed by connector name."""

from __future__ import annotations

import re
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
    SourceConnector,
    SourceRecord,
    SourceTask,
)
from kctl.api import data as d
from kctl.api.converter import Converter
from kctl.api.data import SchemaAndValue
from kctl.api.records import OffsetAndMetadata, TopicPartition
from kctl.errors import DataError

_lock = threading.Lock()

# connector name -> values the sink accepted (wrote), in order
WRITTEN: dict[str, list[Any]] = defaultdict(list)
# connector name -> size of every put() batch
PUT_SIZES: dict[str, list[int]] = defaultdict(list)
# connector name -> how many times pre_commit ran, and what each returned
PRE_COMMITS: dict[str, list[dict[TopicPartition, int]]] = defaultdict(list)
# connector name -> how many times SinkTask.stop() ran
STOPS: dict[str, int] = defaultdict(int)
# connector name -> set while the sink may flush (GatedSink) / while its destination is down
FLUSH_ALLOWED: dict[str, threading.Event] = defaultdict(threading.Event)
DESTINATION_DOWN: dict[str, threading.Event] = defaultdict(threading.Event)


class Rejected(Exception):
    """What a reporting sink says about a record it will not write."""


def _simple_sink(task: type[SinkTask], config: ConfigDef) -> type[SinkConnector]:
    class _Connector(SinkConnector):
        def config(self) -> ConfigDef:
            return config

        def start(self, props: Mapping[str, str]) -> None:
            self.props = dict(props)

        def task_class(self) -> type[SinkTask]:
            return task

        def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
            return [dict(self.props)]

        def stop(self) -> None:
            pass

    return _Connector


class ReportingSinkTask(SinkTask):
    """Writes integer values, except those it rejects through the errant record reporter
    (KIP-610): `report.in.put` values when put() sees them, `report.at.flush` values only
    when it flushes, after later batches have been put (as a sink that buffers would)."""

    def start(self, props: Mapping[str, str]) -> None:
        self.name = props["name"]
        self.in_put = re.compile(props.get("report.in.put") or r"(?!)")
        self.at_flush = re.compile(props.get("report.at.flush") or r"(?!)")
        self.buffer: list[SinkRecord] = []

    def put(self, records: Sequence[SinkRecord]) -> None:
        reporter = self.context.errant_record_reporter()
        with _lock:
            PUT_SIZES[self.name].append(len(records))
        for r in records:
            if self.in_put.fullmatch(str(self.value_of(r))):
                reporter.report(r, Rejected(f"put rejects {self.value_of(r)}"))
            else:
                self.buffer.append(r)

    def flush(self, current_offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        reporter = self.context.errant_record_reporter()
        for r in self.buffer:
            if self.at_flush.fullmatch(str(self.value_of(r))):
                reporter.report(r, Rejected(f"flush rejects {self.value_of(r)}"))
            else:
                with _lock:
                    WRITTEN[self.name].append(self.value_of(r))
        self.buffer = []

    @staticmethod
    def value_of(record: SinkRecord) -> Any:
        return record.value

    def stop(self) -> None:
        pass


_REPORTING_CONFIG = (ConfigDef()
    .define("report.in.put", ConfigType.STRING, "", doc="Values (regex) rejected in put()")
    .define("report.at.flush", ConfigType.STRING, "", doc="Values (regex) rejected at flush"))
ReportingSinkConnector = _simple_sink(ReportingSinkTask, _REPORTING_CONFIG)


class ReportingColumnSinkTask(ReportingSinkTask):
    """The same, taking columns (put_batch) of `{"v": int}` structs: what it reports comes
    from a batch, whose records the runtime never held one by one. COLUMN_RECORDS counts
    the records that came as columns."""

    def put_batch(self, batch: SinkBatch) -> None:
        with _lock:
            COLUMN_RECORDS[self.name] += len(batch)
        self.put(batch.records())

    @staticmethod
    def value_of(record: SinkRecord) -> Any:
        return record.value.get("v")


ReportingColumnSinkConnector = _simple_sink(ReportingColumnSinkTask, _REPORTING_CONFIG)
COLUMN_RECORDS: dict[str, int] = defaultdict(int)


class GatedSinkTask(SinkTask):
    """Takes records in put() but flushes them only once FLUSH_ALLOWED[name] is set; until
    then pre_commit says nothing is safe to commit. Each pre_commit answer is recorded."""

    def start(self, props: Mapping[str, str]) -> None:
        self.name = props["name"]
        self.flushed: dict[TopicPartition, int] = {}
        self.pending: dict[TopicPartition, int] = {}

    def put(self, records: Sequence[SinkRecord]) -> None:
        with _lock:
            PUT_SIZES[self.name].append(len(records))
            WRITTEN[self.name].extend(r.value for r in records)
        for r in records:
            self.pending[r.topic_partition] = r.kafka_offset + 1

    def pre_commit(self, current_offsets: Mapping[TopicPartition, OffsetAndMetadata]
                   ) -> Mapping[TopicPartition, OffsetAndMetadata]:
        if FLUSH_ALLOWED[self.name].is_set():
            self.flushed.update(self.pending)  # the flush: pending records are now durable
        with _lock:
            PRE_COMMITS[self.name].append(dict(self.flushed))
        return {tp: OffsetAndMetadata(off) for tp, off in self.flushed.items()}

    def stop(self) -> None:
        pass


GatedSinkConnector = _simple_sink(GatedSinkTask, ConfigDef())


class DownstreamSinkTask(SinkTask):
    """A sink whose destination can be down: while DESTINATION_DOWN[name] is set every put
    fails with a retriable error and asks for a long wait before the retry."""

    def start(self, props: Mapping[str, str]) -> None:
        self.name = props["name"]

    def put(self, records: Sequence[SinkRecord]) -> None:
        if not records:  # an idle poll's put: nothing to send downstream, nothing to fail
            return
        with _lock:
            PUT_SIZES[self.name].append(len(records))
        if DESTINATION_DOWN[self.name].is_set():
            self.context.timeout(30_000)
            raise RetriableError("destination is down")
        with _lock:
            WRITTEN[self.name].extend(r.value for r in records)

    def stop(self) -> None:
        with _lock:
            STOPS[self.name] += 1


DownstreamSinkConnector = _simple_sink(DownstreamSinkTask, ConfigDef())


class KeyedSourceConnector(SourceConnector):
    """One task emitting `count` records: key "k<i>", value i, offset {"i": i}; values in
    `big` (comma-separated) are strings of `big.size` characters instead."""

    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("topic", ConfigType.STRING, doc="Target topic")
                .define("count", ConfigType.INT, 100, doc="How many records")
                .define("big", ConfigType.STRING, "", doc="Indexes whose value is large")
                .define("big.size", ConfigType.INT, 10_000, doc="Size of a large value"))

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[SourceTask]:
        return KeyedSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass


class KeyedSourceTask(SourceTask):
    PARTITION = {"source": "keyed"}

    def start(self, props: Mapping[str, str]) -> None:
        self.topic = props["topic"]
        self.count = int(props.get("count", 100))
        self.big = {int(i) for i in (props.get("big") or "").split(",") if i.strip()}
        self.big_size = int(props.get("big.size", 10_000))
        stored = self.context.offset_storage_reader.offset(self.PARTITION)
        self.next = stored["i"] + 1 if stored else 0

    def poll(self) -> list[SourceRecord] | None:
        if self.next >= self.count:
            time.sleep(0.02)
            return None
        out = []
        for i in range(self.next, min(self.next + 10, self.count)):
            value: Any = "x" * self.big_size if i in self.big else i
            schema = d.STRING_SCHEMA if i in self.big else d.INT64_SCHEMA
            out.append(SourceRecord(self.topic, None, d.STRING_SCHEMA, f"k{i}", schema, value,
                                    source_partition=self.PARTITION, source_offset={"i": i}))
        self.next += len(out)
        return out

    def stop(self) -> None:
        pass


class RejectingConverter(Converter):
    """Writes str(value) as UTF-8, but refuses values matching `reject` (a regex), as a
    converter meeting data it cannot represent would."""

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        self.reject = re.compile(str(configs.get("reject") or r"(?!)"))

    def from_connect_data(self, topic: str, schema: Any, value: Any,
                          headers: Any = None) -> bytes | None:
        if value is None:
            return None
        if self.reject.fullmatch(str(value)):
            raise DataError(f"cannot represent {value!r}")
        return str(value).encode()

    def to_connect_data(self, topic: str, value: bytes | None,
                        headers: Any = None) -> SchemaAndValue:
        return SchemaAndValue(d.OPTIONAL_STRING_SCHEMA,
                              None if value is None else value.decode())
