"""The registry on its compacted topic (`schema.registry.topic`, `_schemas`) of the worker's
log: the embedded log of a standalone worker, the Kafka cluster of a distributed one."""

from __future__ import annotations

from collections.abc import Callable

from kctl.runtime.registry.registry import SchemaRegistry
from kctl.storage.topic_log import LogTopic, TopicBackedLog
from kctl.transport.base import LogRecord, Transport

DEFAULT_TOPIC = "_schemas"


class TopicRecordLog:
    """The registry's records appended to, and read back from, a TopicBackedLog."""

    def __init__(self, log: TopicBackedLog, timeout_s: float = 30.0):
        self._log = log
        self._timeout_s = timeout_s

    def append(self, key: bytes, value: bytes | None) -> None:
        self._log.send(key, value)
        self._log.flush(self._timeout_s)

    def read_to_end(self) -> None:
        self._log.read_to_end(self._timeout_s)


class TopicSchemaRegistry:
    """A started registry and the log it lives on."""

    def __init__(self, transport: Transport, topic: str = DEFAULT_TOPIC,
                 replication_factor: int = -1,
                 require_writer: Callable[[], None] = lambda: None):
        self.registry = SchemaRegistry(require_writer=require_writer)
        self._log = TopicBackedLog(
            transport, LogTopic(topic, 1, replication_factor, setting="schema.registry.topic"),
            self._consume)
        self.registry.attach(TopicRecordLog(self._log))

    def _consume(self, record: LogRecord) -> None:
        self.registry.apply(record.key, record.value)

    def start(self) -> None:
        self._log.start()

    def stop(self) -> None:
        self._log.stop()
