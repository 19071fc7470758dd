"""`kctl dlq show` and `replay` read a dead letter queue to its end, however long the
broker takes to answer; on the embedded log and on the broker.

A slow broker is played by the real transport whose consumers answer their first fetches
with nothing, as a broker still loading or far away would.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from support.inprocess import unique

from kctl.launch import build_transport
from kctl.runtime.dlq import read_topic
from kctl.runtime.worker_config import WorkerConfig
from kctl.transport.base import Admin, Consumer, LogRecord, ProducerRecord, TopicSpec, Transport


class SlowToAnswer(Transport):
    """The real transport; each consumer's first `empty_polls` polls wait and bring nothing."""

    def __init__(self, inner: Transport, empty_polls: int):
        self.inner, self.name, self.empty_polls = inner, inner.name, empty_polls

    def producer(self, config: Mapping[str, Any] | None = None) -> Any:
        return self.inner.producer(config)

    def consumer(self, group_id: str | None, config: Mapping[str, Any] | None = None) -> Consumer:
        consumer = self.inner.consumer(group_id, config)
        real_poll, left = consumer.poll_batch, [self.empty_polls]

        def poll_batch(max_records: int, timeout: float) -> list[LogRecord]:
            if left[0] > 0:
                left[0] -= 1
                time.sleep(timeout)
                return []
            return real_poll(max_records, timeout)

        consumer.poll_batch = poll_batch  # type: ignore[method-assign]
        return consumer

    def admin(self, config: Mapping[str, Any] | None = None) -> Admin:
        return self.inner.admin(config)

    def close(self) -> None:
        self.inner.close()


def test_a_dlq_is_read_to_its_end_even_when_the_broker_is_slow_to_answer(
        tmp_path, transport_settings):
    transport = build_transport(WorkerConfig({"state.dir": str(tmp_path / "state"),
                                              **transport_settings}))
    try:
        topic = unique("slow-dlq")
        transport.admin().create_topics([TopicSpec(topic, 3)])
        producer = transport.producer()
        for i in range(300):
            producer.send(ProducerRecord(topic, f"rejected-{i}".encode(), partition=i % 3))
        assert producer.flush(30) == 0
        producer.close()

        # ten empty answers, two seconds of silence, before the first records come
        got = read_topic(SlowToAnswer(transport, empty_polls=10), topic)
        assert sorted(r.value for r in got) == sorted(f"rejected-{i}".encode()
                                                      for i in range(300))
        limited = read_topic(transport, topic, limit=50)
        assert len(limited) == 50 and set(limited) <= set(got)
        assert read_topic(transport, unique("no-such-topic")) == []
    finally:
        transport.close()
