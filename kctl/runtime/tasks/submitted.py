"""Source records in flight: offsets advance only over an acknowledged prefix (Kafka's
SubmittedRecords)."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any

from kctl.api.connector import (
    partition_key,
)
from kctl.api.records import (
    SourceBatch,
    SourceRecord,
)


class SubmittedRecords:
    """Records in flight per source partition; offsets advance only over an acked prefix."""

    def __init__(self) -> None:
        self._pending: dict[tuple, collections.deque[list]] = {}
        self._partitions: dict[tuple, Mapping[str, Any]] = {}
        self._committable: dict[tuple, Mapping[str, Any]] = {}
        self.in_flight = 0
        self.acked = 0  # ever: a task whose count stands still while records wait is stalled

    def submit(self, record: SourceRecord) -> list:
        return self._submit(record.source_partition, record.source_offset)

    def submit_batch(self, batch: SourceBatch) -> list:
        """One entry for all rows: the offset moves to the last row once all are acked."""
        return self._submit(batch.source_partition, batch.offset(len(batch) - 1))

    def _submit(self, partition: Mapping[str, Any], offset: Mapping[str, Any]) -> list:
        key = partition_key(partition)
        entry = [offset, False]
        dq = self._pending.get(key)
        if dq is None:
            dq = self._pending[key] = collections.deque()
            self._partitions[key] = partition
        dq.append(entry)
        self.in_flight += 1
        return entry

    def ack(self, entry: list) -> None:
        if not entry[1]:
            entry[1] = True
            self.in_flight -= 1
            self.acked += 1

    def committable(self) -> dict[tuple, tuple[Mapping[str, Any], Mapping[str, Any]]]:
        """Pop acked prefixes; return {key: (partition, latest offset)} that advanced."""
        out = {}
        for key, dq in self._pending.items():
            last = None
            while dq and dq[0][1]:
                last = dq.popleft()[0]
            if last is not None:
                out[key] = (self._partitions[key], last)
        return out

