"""A compacted topic as a replicated key/value log (Kafka Connect's KafkaBasedLog).

A distributed worker keeps connector configs, statuses and source offsets in three
compacted topics. Each store reads its topic from the beginning into memory (last value
per key wins; a null value deletes the key), keeps tailing it, and writes through an
idempotent producer with acks=all. A store learns of every change, its own included,
from the log, so every worker applies the same changes in the same order.

Built on kctl's `Transport`, so the same log runs on a Kafka cluster and on the embedded
log. Reading "to the end" never trusts the end offset a broker reports before anything
was fetched alone: `Consumer.end_offsets` also takes the high watermark the last fetch
carried, and a read that reaches the end it was given checks it once more against the high
watermark the fetches carried by then.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kctl.api.records import TopicPartition
from kctl.errors import ConfigError, KctlError, NotFoundError, TransportError
from kctl.transport.base import (
    Consumer,
    DeliveryCallback,
    LogRecord,
    Producer,
    ProducerRecord,
    TopicSpec,
    Transport,
)

log = logging.getLogger(__name__)

POLL_TIMEOUT_S = 0.1
POLL_RECORDS = 10_000


@dataclass(frozen=True)
class LogTopic:
    """Which topic a store keeps its records in, and how to create it when missing."""

    name: str
    partitions: int = 1
    replication_factor: int = 1
    # the worker setting that names the topic, for messages that tell the user what to change
    setting: str = ""


@dataclass
class _ReadToEnd:
    done: threading.Event = field(default_factory=threading.Event)
    ends: dict[TopicPartition, int] | None = None
    refined: bool = False  # its ends were checked against a fetched high watermark
    error: BaseException | None = None


class TopicBackedLog:
    """Start reads the whole topic; `consume` is called for every record, one at a time,
    on the log's own thread (or the starting thread, before `start` returns)."""

    def __init__(self, transport: Transport, topic: LogTopic,
                 consume: Callable[[LogRecord], None], *,
                 producer_config: Mapping[str, Any] | None = None,
                 consumer_config: Mapping[str, Any] | None = None):
        self.transport = transport
        self.topic = topic
        self._consume = consume
        self._producer_config = {"acks": "all", "enable.idempotence": True,
                                 **(producer_config or {})}
        self._consumer_config = {"enable.auto.commit": False, "auto.offset.reset": "earliest",
                                 **(consumer_config or {})}
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._partitions: list[TopicPartition] = []
        self._requests: queue.SimpleQueue[_ReadToEnd] = queue.SimpleQueue()
        self._pending: list[_ReadToEnd] = []
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> None:
        """Create or check the topic, read it to the end, then keep tailing it."""
        spec = self._ensure_topic()
        self._partitions = [TopicPartition(spec.name, p) for p in range(spec.partitions)]
        self._producer = self.transport.producer(self._producer_config)
        self._consumer = self.transport.consumer(None, self._consumer_config)
        self._consumer.assign(self._partitions)
        for tp in self._partitions:
            self._consumer.seek(tp, 0)
        self._read_to_end_here(time.monotonic() + timeout)
        self._thread = threading.Thread(target=self._tail, name=f"kctl-log-{spec.name}",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._producer is not None:
            self._producer.flush(timeout)
            self._producer.close()
        if self._consumer is not None:
            self._consumer.close()
        for request in self._drain_requests():
            request.error = TransportError(f"the log of topic {self.topic.name} stopped")
            request.done.set()

    # -- writing -----------------------------------------------------------------------------
    def send(self, key: bytes, value: bytes | None,
             on_delivery: DeliveryCallback | None = None) -> None:
        """Append a record (None: a tombstone that deletes `key` once compacted)."""
        if self._producer is None:
            raise TransportError(f"the log of topic {self.topic.name} is not started")
        self._producer.send(ProducerRecord(self.topic.name, value, key), on_delivery)

    def flush(self, timeout: float = 30.0) -> None:
        if self._producer is not None and self._producer.flush(timeout):
            raise TransportError(f"records to {self.topic.name} not acknowledged within "
                                 f"{timeout:g} s")

    # -- reading -----------------------------------------------------------------------------
    def read_to_end(self, timeout: float = 30.0) -> None:
        """Return once every record written before this call has been consumed."""
        if self._thread is None:
            raise TransportError(f"the log of topic {self.topic.name} is not started")
        request = _ReadToEnd()
        self._requests.put(request)
        if not request.done.wait(timeout):
            raise TransportError(f"could not read topic {self.topic.name} to its end within "
                                 f"{timeout:g} s")
        if request.error is not None:
            raise request.error

    def _ensure_topic(self) -> TopicSpec:
        admin = self.transport.admin()
        t = self.topic
        try:
            spec = admin.describe_topic(t.name)
        except NotFoundError:
            admin.create_topics([TopicSpec(t.name, t.partitions, t.replication_factor,
                                           {"cleanup.policy": "compact"})])
            spec = admin.describe_topic(t.name)
        policy = spec.config.get("cleanup.policy", "delete")
        if "compact" not in {p.strip() for p in policy.split(",")}:
            where = f" (set by {t.setting})" if t.setting else ""
            raise ConfigError(
                f"topic {t.name}{where} has cleanup.policy={policy}, but kctl keeps its "
                "latest value per key there and needs cleanup.policy=compact: alter the "
                "topic's config, or name a new topic and kctl creates it compacted",
                key=t.setting or None)
        return spec

    def _positions_reached(self, ends: Mapping[TopicPartition, int]) -> bool:
        assert self._consumer is not None
        return all(self._consumer.position(tp) >= end for tp, end in ends.items())

    def _poll_once(self) -> None:
        assert self._consumer is not None
        for record in self._consumer.poll_batch(POLL_RECORDS, POLL_TIMEOUT_S):
            try:
                self._consume(record)
            except Exception:  # one bad record must not stop the log for the others
                log.exception("topic %s: could not apply the record at offset %d of "
                              "partition %d", record.topic, record.offset, record.partition)

    def _read_to_end_here(self, deadline: float) -> None:
        """Read to the end as of now on this thread (the tail thread is not running yet),
        settled as the tail thread settles a request: the end fetched once and checked once
        against the fetched high watermark, never chased (a worker joining a cluster whose
        tasks commit offsets all the time would stay a few records behind a moving end)."""
        assert self._consumer is not None
        request = _ReadToEnd(ends=self._consumer.end_offsets(self._partitions))
        self._pending = [request]
        while True:
            self._settle_pending()
            if request.done.is_set():
                return
            if time.monotonic() > deadline:
                self._pending = []
                at = {tp.partition: self._consumer.position(tp) for tp in self._partitions}
                end = {tp.partition: offset for tp, offset in (request.ends or {}).items()}
                raise TransportError(f"could not read topic {self.topic.name} to its end: "
                                     f"partitions read up to {at} of {end}")
            self._poll_once()

    def _settle_pending(self) -> None:
        """Complete the requests whose ends were read. A broker may answer ListOffsets short
        of the end (Tansu: the newest batch's base offset + 1); the fetch that delivered the
        record before that end carried the batch's true high watermark, so a request whose
        ends are reached takes the fetched ends once more, and is done when those are read
        too. Only once: a log written all the time (offsets from hundreds of tasks) would
        otherwise keep moving the end away from a reader that chases it."""
        assert self._consumer is not None
        fresh: dict[TopicPartition, int] | None = None
        still: list[_ReadToEnd] = []
        for request in self._pending:
            assert request.ends is not None
            if self._positions_reached(request.ends) and not request.refined:
                if fresh is None:
                    fresh = self._consumer.end_offsets(self._partitions)
                request.ends = {tp: max(end, fresh.get(tp, end))
                                for tp, end in request.ends.items()}
                request.refined = True
            if request.refined and self._positions_reached(request.ends):
                request.done.set()
            else:
                still.append(request)
        self._pending = still

    def _new_requests(self) -> list[_ReadToEnd]:
        out = []
        while True:
            try:
                out.append(self._requests.get_nowait())
            except queue.Empty:
                return out

    def _drain_requests(self) -> list[_ReadToEnd]:
        out, self._pending = self._pending + self._new_requests(), []
        return out

    def _tail(self) -> None:
        assert self._consumer is not None
        while not self._stopping.is_set():
            try:
                new = self._new_requests()
                if new:
                    # the end as of now, once for every request that came meanwhile (a
                    # hundred tasks starting at once ask together: one ListOffsets round)
                    ends = self._consumer.end_offsets(self._partitions)
                    for request in new:
                        request.ends = ends  # replaced, never changed in place
                    self._pending += new
                self._poll_once()
                if self._pending:
                    self._settle_pending()
            except KctlError as e:
                log.warning("topic %s: reading the log failed, retrying: %s", self.topic.name, e)
                self._stopping.wait(1.0)
