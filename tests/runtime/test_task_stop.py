"""What a task holds is let go when it stops, and a stop is not held up by a retry wait.

Run on the embedded log and on the broker. The worker's transport is wrapped to count the
clients it hands out and those closed again; everything else is the real transport.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from support import probes
from support.inprocess import produce, running_worker, unique
from support.waiting import wait_until

from kctl.api.records import TopicPartition
from kctl.states import State
from kctl.transport.base import (
    Admin,
    Consumer,
    DeliveryCallback,
    LogRecord,
    Producer,
    ProducerRecord,
    Transport,
)


class CountingTransport(Transport):
    """The real transport, counting producers and consumers that are open."""

    def __init__(self, inner: Transport):
        self.inner = inner
        self.name = inner.name
        self.open_producers = 0
        self.open_consumers = 0
        self._lock = threading.Lock()

    def _count(self, attr: str, delta: int) -> None:
        with self._lock:
            setattr(self, attr, getattr(self, attr) + delta)

    def producer(self, config: Mapping[str, Any] | None = None) -> Producer:
        p = _CountedProducer(self.inner.producer(config), self)
        self._count("open_producers", 1)
        return p

    def consumer(self, group_id: str | None, config: Mapping[str, Any] | None = None) -> Consumer:
        c = _CountedConsumer(self.inner.consumer(group_id, config), self)
        self._count("open_consumers", 1)
        return c

    def admin(self, config: Mapping[str, Any] | None = None) -> Admin:
        return self.inner.admin(config)

    def close(self) -> None:
        self.inner.close()


class _CountedProducer(Producer):
    def __init__(self, inner: Producer, owner: CountingTransport):
        self.inner, self.owner, self.closed = inner, owner, False

    def send(self, record: ProducerRecord, on_delivery: DeliveryCallback | None = None) -> None:
        self.inner.send(record, on_delivery)

    def poll(self, timeout: float = 0.0) -> int:
        return self.inner.poll(timeout)

    def flush(self, timeout: float | None = None) -> int:
        return self.inner.flush(timeout)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.inner.close()
            self.owner._count("open_producers", -1)


class _CountedConsumer(Consumer):
    def __init__(self, inner: Consumer, owner: CountingTransport):
        self.inner, self.owner, self.closed = inner, owner, False

    def subscribe(self, topics: Sequence[str], **callbacks: Any) -> None:
        self.inner.subscribe(topics, **callbacks)

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        self.inner.assign(partitions)

    def assignment(self) -> set[TopicPartition]:
        return self.inner.assignment()

    def poll_batch(self, max_records: int, timeout: float) -> list[LogRecord]:
        return self.inner.poll_batch(max_records, timeout)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.inner.seek(tp, offset)

    def position(self, tp: TopicPartition) -> int:
        return self.inner.position(tp)

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        return self.inner.committed(partitions)

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        self.inner.commit(offsets)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        self.inner.pause(partitions)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self.inner.resume(partitions)

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self.inner.end_offsets(partitions)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.inner.close()
            self.owner._count("open_consumers", -1)


def task_states(herder: Any, name: str) -> list[State]:
    return [t.state for t in herder.connector_status(name).tasks]


def test_restarting_tasks_does_not_leave_dlq_producers_open(tmp_path, transport_settings):
    counting: list[CountingTransport] = []

    def wrap(t: Transport) -> Transport:
        counting.append(CountingTransport(t))
        return counting[0]

    topic = unique("restarts")
    source, sink = unique("src"), unique("snk")
    dlq = {"errors.tolerance": "all", "errors.deadletterqueue.topic.replication.factor": 1}
    with running_worker(tmp_path / "state", transport_settings, wrap=wrap) as w:
        t, h = counting[0], w.herder
        # what the worker itself keeps open (its Schema Registry's log) before any task
        base_producers, base_consumers = t.open_producers, t.open_consumers
        h.create_connector(source, {"connector.class": "support.connectors.CounterSourceConnector",
                                    "topic": topic, "count": 20, **dlq,
                                    "errors.deadletterqueue.topic.name": unique("src-dlq")})
        h.create_connector(sink, {"connector.class": "support.connectors.CollectingSinkConnector",
                                  "topics": topic, **dlq,
                                  "errors.deadletterqueue.topic.name": unique("snk-dlq")})
        for name in (source, sink):
            wait_until(lambda n=name: task_states(h, n) == [State.RUNNING], timeout=30)
        # the source's producer and DLQ producer, the sink's DLQ producer and its consumer
        running = (3, 1)

        def clients() -> tuple[int, int]:
            return t.open_producers - base_producers, t.open_consumers - base_consumers

        # (a consumer leaving a group mid-join may take longer than the graceful stop
        # timeout on the broker, so its task finishes closing after the next one started)
        wait_until(lambda: clients() == running, timeout=30, message="clients of both tasks")
        for _ in range(3):
            for name in (source, sink):
                h.restart_task(name, 0)
                wait_until(lambda n=name: task_states(h, n) == [State.RUNNING], timeout=30)
        wait_until(lambda: clients() == running, timeout=30,
                   message="each restart closed what the stopped task had opened")

        h.delete_connector(source)
        h.delete_connector(sink)
        wait_until(lambda: clients() == (0, 0), timeout=30, message="no client left open")


def test_stopping_a_sink_that_waits_to_retry_a_put_stops_it_at_once_without_loss(
        tmp_path, transport_settings):
    # the sink asks to wait 30 s before each retry; a stop must not wait for that, nor for
    # the worker's graceful timeout: the task ends cleanly and its batch stays uncommitted
    topic, name = unique("down"), unique("downstream")
    probes.DESTINATION_DOWN[name].set()
    settings = {**transport_settings, "task.shutdown.graceful.timeout.ms": 3000}
    with running_worker(tmp_path / "state", settings) as w:
        h = w.herder
        produce(w.transport, topic, [str(i).encode() for i in range(30)])
        h.create_connector(name, {"connector.class": "support.probes.DownstreamSinkConnector",
                                  "topics": topic, "value.converter": "JsonConverter",
                                  "value.converter.schemas.enable": "false"})
        wait_until(lambda: len(probes.PUT_SIZES[name]) >= 1, timeout=30,
                   message="a put failed and the task waits to retry it")

        h.stop_connector(name)
        assert probes.STOPS[name] == 1, "SinkTask.stop() ran before stop returned"
        assert h.connector_status(name).state is State.STOPPED
        assert h.connector_offsets(name) == [], "the batch that was never put is not committed"

        probes.DESTINATION_DOWN[name].clear()
        h.resume_connector(name)
        wait_until(lambda: len(probes.WRITTEN[name]) >= 30, timeout=60,
                   message="every record once the destination is back")
        assert sorted(probes.WRITTEN[name]) == list(range(30))
        assert task_states(h, name) == [State.RUNNING]
