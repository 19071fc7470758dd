"""Where a source task's records stand in the log: exactly-once source support, or nothing.

With `exactly.once.source.support=enabled` every produced record carries a `__kctl.source`
header with its connector, a per-task sequence number, source partition and source offset,
and each offset commit stores, next to the source offsets, how far the log had acknowledged
this task's writes. A crash between an acknowledgement and the next commit leaves records in
the log past that position; on start they are read back and their source offsets win, so the
task resumes after what the log really holds instead of producing it again. Dead-lettered
records carry the same header, so a crash does not dead-letter a record twice either.

`WorkerSourceTask` talks to one `SourcePositions`: `NoSourcePositions` when the support is
off, `ExactlyOncePositions` when it is on, so the task loop has no branch of its own for it.
The DLQ reporter asks the positions object (not the task) for a dead-lettered record's
header; the task hands it only a callable that sends and flushes what came before.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kctl.api.connector import partition_key
from kctl.api.records import RecordMetadata, SourceBatch, SourceRecord, TopicPartition
from kctl.runtime.error_handling import ErrorContext, Stage
from kctl.states import TaskId
from kctl.transport.base import Consumer, HeaderColumns

log = logging.getLogger(__name__)

__all__ = ["POSITION_KEY", "SOURCE_HEADER", "ExactlyOncePositions", "NoSourcePositions",
           "SourcePositions"]

SOURCE_HEADER = "__kctl.source"
POSITION_KEY = "kctl.task"
"""Offset-store partitions with this key hold log positions, not connector offsets."""
_RECOVERY_STALL_S = 30.0


class SourcePositions:
    """The interface, and what it does when exactly-once source support is off: nothing."""

    def recover(self) -> None:
        """On start: take the source offsets of records the log holds past the last commit."""

    def before_first_write(self, topic: str) -> None:
        """Called once per topic, before the task's first write to it."""

    def record_headers(self, record: SourceRecord) -> tuple[tuple[str, bytes], ...]:
        return ()

    def batch_headers(self, batch: SourceBatch) -> HeaderColumns:
        return ()

    def delivered(self, topic: str, partition: int, next_offset: int) -> None:
        """The log acknowledged this task's writes to `topic-partition` up to `next_offset`."""

    def commit(self) -> None:
        """Everything sent is acknowledged: store the positions with the source offsets."""

    @property
    def tracker(self) -> Any:
        """What the DLQ reporter asks for dead-lettered records' headers (None: nothing)."""
        return None


NoSourcePositions = SourcePositions


def _offset_json(offsets: Mapping[str, Sequence[Any]], n: int) -> Any:
    """Each row's source offset as compact JSON (what json.dumps writes): a pyarrow string
    array of n rows. Columns of ints, and columns holding one value throughout (a file's
    path), are joined column-wise; anything else is dumped row by row."""
    import pyarrow as pa

    keys = list(offsets)
    if keys and n:
        import pyarrow.compute as pc

        cols: list[Any] = []
        for k in keys:
            col = offsets[k]
            if isinstance(col, list) and type(col[0]) is str and col.count(col[0]) == len(col):
                cols.append(json.dumps(col[0]))  # the same in every row
            elif type(col[0]) is int and type(col[-1]) is int:
                arr = pa.array(col)
                if not pa.types.is_integer(arr.type):  # not ints after all: the general way
                    break
                cols.append(pc.cast(arr, pa.string()))
            else:
                break
        else:
            parts: list[Any] = []
            for i, (k, col) in enumerate(zip(keys, cols, strict=True)):
                parts.append(("{" if i == 0 else ",") + json.dumps(k) + ":")
                parts.append(col)
            parts.append("}")
            if not any(isinstance(p, pa.Array) for p in parts):  # all constant
                return pa.array(["".join(parts)] * n, pa.string())
            return pc.binary_join_element_wise(*parts, "")
    return pa.array([json.dumps(dict(zip(keys, row, strict=True)), separators=(",", ":"))
                     for row in zip(*offsets.values(), strict=True)] if keys else ["{}"] * n,
                    pa.string())


class ExactlyOncePositions(SourcePositions):
    def __init__(self, task_id: TaskId, *, offset_writer: Any, commit_timeout: float,
                 log_reader: Callable[[], Consumer] | None,
                 stored_offsets: Callable[[], list[tuple[dict, dict | None]]] | None,
                 partition_count: Callable[[str], int],
                 flush_sent: Callable[[], bool]):
        self.id = task_id
        self.offset_writer = offset_writer
        self.commit_timeout = commit_timeout
        self.log_reader = log_reader
        self.stored_offsets = stored_offsets
        self.partition_count = partition_count
        # Sends what the task converted and waits for the log: True when all acknowledged.
        self.flush_sent = flush_sent
        self._next_seq = time.time_ns()  # increases across restarts: newest position wins
        self._positions: dict[tuple[str, int], int] = {}
        self._dlq_topics: set[str] = set()

    @property
    def tracker(self) -> ExactlyOncePositions:
        return self

    def recover(self) -> None:
        if self.log_reader is None or self.stored_offsets is None:
            return
        positions = [(p, o) for p, o in self.stored_offsets()
                     if p.get(POSITION_KEY) is not None and o]
        if not positions:
            return
        newest: dict[tuple, tuple[int, dict, dict]] = {}
        consumer = self.log_reader()
        try:
            # several stored positions may name one partition (each task of a connector
            # keeps its own): read it once, from the earliest of them
            starts: dict[TopicPartition, int] = {}
            for p, o in positions:
                tp = TopicPartition(p["topic"], int(p["partition"]))
                starts[tp] = min(int(o["position"]), starts.get(tp, int(o["position"])))
            tps = list(starts)
            consumer.assign(tps)
            for tp, start in starts.items():
                consumer.seek(tp, start)
            # read to the ends the partitions have now (a slow broker makes this wait, not
            # stop early and produce again what the log already holds)
            pending = set(tps)
            progress = time.monotonic()
            while True:
                batch = consumer.poll_batch(10000, 0.1)
                if batch:
                    progress = time.monotonic()
                elif time.monotonic() - progress > _RECOVERY_STALL_S:
                    log.warning("Task %s: no progress reading %s back for %.0fs; recovering "
                                "from what was read", self.id, sorted(pending),
                                _RECOVERY_STALL_S)
                    break
                for r in batch:
                    for k, v in r.headers:
                        if k == SOURCE_HEADER and v is not None:
                            conn, seq, part, off = json.loads(v)
                            if conn != self.id.connector:
                                continue
                            key = partition_key(part)
                            if key not in newest or newest[key][0] < seq:
                                newest[key] = (seq, part, off)
                    self._positions[(r.topic, r.partition)] = r.offset + 1
                ends = consumer.end_offsets(pending)
                pending = {tp for tp in pending if consumer.position(tp) < ends[tp]}
                if not pending and not batch:  # at the ends, and an empty poll to be sure
                    break
        finally:
            consumer.close()
        if not newest:
            return
        log.info("Task %s recovered %d source offset(s) from the log", self.id, len(newest))
        for _, part, off in newest.values():
            self.offset_writer.offset(part, off)
        self._write_positions()
        self._flush_offsets()

    def before_first_write(self, topic: str) -> None:
        """Store where the topic's partitions end, so a crash before the first commit can
        still be recovered by reading from there."""
        if self.log_reader is None:
            return
        consumer = self.log_reader()
        try:
            n = self.partition_count(topic)
            ends = consumer.end_offsets([TopicPartition(topic, p) for p in range(n)])
        finally:
            consumer.close()
        added = False
        for tp, end in ends.items():
            if (tp.topic, tp.partition) not in self._positions:
                self._positions[(tp.topic, tp.partition)] = max(0, end - 1)
                added = True
        if added:
            self._write_positions()
            self._flush_offsets()

    def record_headers(self, record: SourceRecord) -> tuple[tuple[str, bytes], ...]:
        return ((SOURCE_HEADER, self._header(record)),)

    def _header(self, record: SourceRecord) -> bytes:
        seq = self._next_seq
        self._next_seq += 1
        return json.dumps([self.id.connector, seq, dict(record.source_partition),
                           dict(record.source_offset)], separators=(",", ":")).encode()

    def batch_headers(self, batch: SourceBatch) -> HeaderColumns:
        """The per-record header of `record_headers`, built for all rows at once."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        n = len(batch)
        first = self._next_seq
        self._next_seq += n
        head = "[" + json.dumps(self.id.connector) + ","
        part = "," + json.dumps(dict(batch.source_partition), separators=(",", ":")) + ","
        seqs = pc.cast(pa.array(np.arange(first, first + n, dtype=np.int64)), pa.string())
        texts = pc.binary_join_element_wise(head, seqs, part, _offset_json(batch.offsets, n),
                                            "]", "")
        return [(SOURCE_HEADER, texts.cast(pa.binary()))]

    def delivered(self, topic: str, partition: int, next_offset: int) -> None:
        key = (topic, partition)
        if self._positions.get(key, -1) < next_offset:
            self._positions[key] = next_offset

    def commit(self) -> None:
        self._write_positions()

    # -- the DLQ reporter's SourcePositionTracker ------------------------------------------
    def dlq_headers(self, topic: str, ctx: ErrorContext) -> list[tuple[str, bytes]]:
        """A dead-lettered record carries its source position like a delivered one, so the
        recovery after a crash sees it as done and does not dead-letter it again. Records
        before it must be in the log first: recovery takes the newest position it finds,
        so a later one must never stand there without those before it."""
        if ctx.source is None or ctx.stage is Stage.KAFKA_PRODUCE:
            return []  # a delivery callback: no flushing from inside the producer
        if topic not in self._dlq_topics:
            self._dlq_topics.add(topic)
            self.before_first_write(topic)
        if not self.flush_sent():
            return []  # not all acknowledged: without the header it may be reported again
        return [(SOURCE_HEADER, self._header(ctx.source))]

    def dlq_written(self, metadata: RecordMetadata) -> None:
        self.delivered(metadata.topic, metadata.partition, metadata.offset + 1)

    def _write_positions(self) -> None:
        for (topic, partition), pos in self._positions.items():
            self.offset_writer.offset({POSITION_KEY: self.id.task, "topic": topic,
                                       "partition": partition}, {"position": pos})

    def _flush_offsets(self) -> None:
        if self.offset_writer.begin_flush():
            self.offset_writer.do_flush().result(self.commit_timeout)
