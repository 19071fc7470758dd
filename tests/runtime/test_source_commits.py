"""A source task's periodic offset commit takes what the broker has acknowledged and goes
on: it does not hold the task until the rest is acknowledged (Kafka Connect's
SubmittedRecords). Offsets never run ahead of the acknowledgements.

The worker's transport is wrapped so the test plays a broker that is slow to acknowledge
one topic: its records are sent for real, their delivery reports are held back until the
test lets them through. Everything else is the real transport.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from support.inprocess import running_worker, unique
from support.waiting import wait_until

from kctl.transport.base import (
    Admin,
    Consumer,
    DeliveryCallback,
    Producer,
    ProducerRecord,
    Transport,
)


class SlowAcks(Transport):
    """The real transport; delivery reports for `topic` wait until `acks` is set."""

    def __init__(self, inner: Transport, topic: str):
        self.inner, self.name, self.topic = inner, inner.name, topic
        self.acks = threading.Event()
        self.sent = 0
        self.flushed_at: list[int] = []  # `sent` at each flush that found records unacknowledged

    def producer(self, config: Mapping[str, Any] | None = None) -> Producer:
        return _SlowProducer(self.inner.producer(config), self)

    def consumer(self, group_id: str | None, config: Mapping[str, Any] | None = None) -> Consumer:
        return self.inner.consumer(group_id, config)

    def admin(self, config: Mapping[str, Any] | None = None) -> Admin:
        return self.inner.admin(config)

    def close(self) -> None:
        self.inner.close()


class _SlowProducer(Producer):
    def __init__(self, inner: Producer, owner: SlowAcks):
        self.inner, self.owner = inner, owner
        self.held: list[tuple[DeliveryCallback, Any, Any]] = []
        self.lock = threading.Lock()

    def send(self, record: ProducerRecord, on_delivery: DeliveryCallback | None = None) -> None:
        if record.topic != self.owner.topic or on_delivery is None:
            self.inner.send(record, on_delivery)
            return

        def later(md: Any, err: Any, cb: DeliveryCallback = on_delivery) -> None:
            with self.lock:
                self.held.append((cb, md, err))

        self.inner.send(record, later)
        self.owner.sent += 1

    def send_batch(self, topic: str, values: pa.Array, on_done: Any, **kwargs: Any) -> None:
        self.inner.send_batch(topic, values, on_done, **kwargs)

    def _release(self) -> int:
        if not self.owner.acks.is_set():
            return len(self.held)
        with self.lock:
            held, self.held = self.held, []
        for cb, md, err in held:
            cb(md, err)
        return 0

    def poll(self, timeout: float = 0.0) -> int:
        n = self.inner.poll(timeout)
        return n + self._release()

    def flush(self, timeout: float | None = None) -> int:
        remaining = self.inner.flush(timeout)
        self.inner.poll(0)  # the inner delivery reports land in `held`
        if not self.owner.acks.is_set() and self.held:
            self.owner.flushed_at.append(self.owner.sent)
            self.owner.acks.wait(timeout)  # a broker that has not acknowledged yet
        return remaining + self._release()

    def close(self) -> None:
        self.owner.acks.set()
        self.inner.close()
        self._release()


def test_a_source_keeps_sending_while_its_records_wait_for_acknowledgement(
        tmp_path, transport_settings):
    topic, name = unique("slow-acks"), unique("keyed")
    wrapped: list[SlowAcks] = []

    def wrap(t: Transport) -> Transport:
        wrapped.append(SlowAcks(t, topic))
        return wrapped[0]

    # commits every 100 ms, each allowed a minute to flush: a commit that waited for the
    # acknowledgements would hold the task for that minute. The source never runs out.
    settings = {**transport_settings, "offset.flush.timeout.ms": 60_000}
    with running_worker(tmp_path / "state", settings, wrap=wrap) as w:
        slow = wrapped[0]
        w.herder.create_connector(name, {
            "connector.class": "support.probes.KeyedSourceConnector", "topic": topic,
            "count": 10**9, "value.converter": "JsonConverter",
            "value.converter.schemas.enable": "false"})
        wait_until(lambda: slow.flushed_at and slow.sent >= slow.flushed_at[0] + 1000,
                   timeout=30, message="1000 more records sent after a commit found records "
                                       "unacknowledged")
        assert w.herder.connector_offsets(name) == [], "nothing acknowledged, nothing committed"
        slow.acks.set()

        def committed() -> int | None:
            offsets = w.herder.connector_offsets(name)
            return offsets[0]["offset"]["i"] if offsets else None

        wait_until(lambda: committed() is not None, timeout=30,
                   message="an offset committed once records are acknowledged")
        assert committed() < slow.sent  # never past what was sent
