"""A standalone worker in the test's own process, driven through its Herder as REST does.

`transport_settings` (tests/conftest.py) picks the embedded log or the real broker; the
worker's transport can be wrapped (e.g. to count clients) before the worker starts.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from kctl.launch import StandaloneWorker
from kctl.runtime.worker_config import WorkerConfig
from kctl.transport.base import ProducerRecord, TopicSpec, Transport


@contextlib.contextmanager
def running_worker(state_dir: Path, settings: Mapping[str, Any], *,
                   wrap: Callable[[Transport], Transport] | None = None
                   ) -> Iterator[StandaloneWorker]:
    cfg = WorkerConfig({"state.dir": str(state_dir), "listeners": "http://127.0.0.1:0",
                        "offset.flush.interval.ms": 100, **settings})
    worker = StandaloneWorker(cfg)
    if wrap is not None:
        worker.transport = wrap(worker.transport)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()


def unique(prefix: str) -> str:
    """Topic, group and connector names: the broker is shared by the whole session."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(transport: Transport, topic: str, values: list[bytes | None]) -> None:
    """Raw bytes into partition 0 of `topic`, in order (offset n + i holds values[i] when
    the topic held n records); the topic is created with one partition when missing."""
    transport.admin().create_topics([TopicSpec(topic, 1)], exist_ok=True)
    producer = transport.producer()
    errors: list[BaseException] = []
    try:
        for v in values:
            producer.send(ProducerRecord(topic, v, partition=0),
                          lambda md, err: err is not None and errors.append(err))
        assert producer.flush(30) == 0
    finally:
        producer.close()
    assert not errors, errors
