"""Small contexts implementing the api Protocols, so tests drive tasks directly and
play the part of the runtime."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kctl.api import SourceBatch, SourceRecord, TopicPartition, partition_key
from kctl.runtime.spark import SparkEngine


def expand(items: Sequence[SourceRecord | SourceBatch] | None) -> list[SourceRecord]:
    """What a poll() means record by record (SourceBatch columns taken apart)."""
    out: list[SourceRecord] = []
    for item in items or ():
        out.extend(item.records() if isinstance(item, SourceBatch) else [item])
    return out


class OffsetStore:
    """What the runtime's offset storage reader serves: committed source offsets."""

    def __init__(self) -> None:
        self.committed: dict[tuple, dict[str, Any]] = {}
        self.batched_reads = 0

    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        return self.committed.get(partition_key(partition))

    def offsets(self, partitions: Sequence[Mapping[str, Any]]) -> dict[tuple, dict[str, Any] | None]:
        self.batched_reads += 1
        return {partition_key(p): self.committed.get(partition_key(p)) for p in partitions}

    def ack(self, records: Sequence[SourceRecord]) -> None:
        """Commit as the runtime does once records are acknowledged: the last offset wins."""
        for r in records:
            self.committed[partition_key(r.source_partition)] = dict(r.source_offset)


class SourceContext:
    def __init__(self, engine: SparkEngine, store: OffsetStore, configs: Mapping[str, str] = {}):
        self._engine, self.store, self._configs = engine, store, dict(configs)

    def spark(self) -> Any:
        return self._engine.spark()

    @property
    def offset_storage_reader(self) -> OffsetStore:
        return self.store

    @property
    def configs(self) -> Mapping[str, str]:
        return self._configs


class Reporter:
    """An errant record reporter that keeps what it was given."""

    def __init__(self) -> None:
        self.reports: list[tuple[SourceRecord, BaseException]] = []

    def report(self, record: SourceRecord, error: BaseException) -> None:
        self.reports.append((record, error))


class ReportingContext(SourceContext):
    """A source context whose errant record reporter is `reporter` (None: no DLQ)."""

    def __init__(self, engine, store, configs, reporter: Reporter | None = None):
        super().__init__(engine, store, configs)
        self.reporter = reporter

    def errant_record_reporter(self) -> Reporter | None:
        return self.reporter


class ConnectorContext(SourceContext):
    def __init__(self, engine: SparkEngine, store: OffsetStore | None = None):
        super().__init__(engine, store or OffsetStore())
        self.reconfigurations = 0
        self.errors: list[BaseException] = []

    def request_task_reconfiguration(self) -> None:
        self.reconfigurations += 1

    def raise_error(self, error: BaseException) -> None:
        self.errors.append(error)


class SinkContext:
    def __init__(self, engine: SparkEngine, configs: Mapping[str, str] = {}):
        self._engine, self._configs = engine, dict(configs)
        self.rewinds: dict[TopicPartition, int] = {}
        self.assigned: set[TopicPartition] = set()

    def spark(self) -> Any:
        return self._engine.spark()

    @property
    def configs(self) -> Mapping[str, str]:
        return self._configs

    def offset(self, offsets: Mapping[TopicPartition, int]) -> None:
        self.rewinds.update(offsets)

    def timeout(self, timeout_ms: int) -> None:
        pass

    def assignment(self) -> set[TopicPartition]:
        return set(self.assigned)

    def pause(self, *partitions: TopicPartition) -> None:
        pass

    def resume(self, *partitions: TopicPartition) -> None:
        pass

    def request_commit(self) -> None:
        pass

    def errant_record_reporter(self) -> None:
        return None


