"""The registry on its compacted topic (`schema.registry.topic`, `_schemas`) of the worker's
log: the embedded log of a standalone worker, the Kafka cluster of a distributed one."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kctl.backoff import Backoff
from kctl.errors import KctlError
from kctl.runtime.registry.model import RegistryError
from kctl.runtime.registry.registry import SchemaRegistry
from kctl.storage.topic_log import LogTopic, TopicBackedLog
from kctl.transport.base import LogRecord, Transport

log = logging.getLogger(__name__)
RETRY = Backoff(1.0, 30.0)

DEFAULT_TOPIC = "_schemas"


class TopicRecordLog:
    """The registry's records appended to, and read back from, a TopicBackedLog."""

    def __init__(self, log: TopicBackedLog, timeout_s: float = 30.0):
        self._log = log
        self._timeout_s = timeout_s

    def append(self, key: bytes, value: bytes | None) -> None:
        try:
            self._log.send(key, value)
            self._log.flush(self._timeout_s)
        except KctlError as e:
            raise _unavailable(e) from e

    def read_to_end(self) -> None:
        try:
            self._log.read_to_end(self._timeout_s)
        except KctlError as e:
            raise _unavailable(e) from e


def _unavailable(e: Exception) -> RegistryError:
    return RegistryError(500, 50003, f"The registry's topic cannot be written or read now: {e}")


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
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def _consume(self, record: LogRecord) -> None:
        self.registry.apply(record.key, record.value)

    def start(self, wait: bool = True) -> None:
        """Read the topic to its end. With `wait=False` (a Kafka cluster, which may not
        answer) a first attempt that fails goes on in the background, retried with backoff,
        so a worker starts whatever the cluster does; until then reads find nothing and
        writes answer 500 (50003)."""
        if wait:
            self._log.start()
            return
        try:
            self._log.start(timeout=30.0)
            return
        except KctlError as e:
            log.warning("Schema registry: cannot read its topic yet (%s); retrying", e)
        self._thread = threading.Thread(target=self._start_retrying, name="kctl-registry-start",
                                        daemon=True)
        self._thread.start()

    def _start_retrying(self) -> None:
        attempt = 0
        while not self._stopping.is_set():
            try:
                self._log.start()
                log.info("Schema registry: its topic is read; it serves")
                return
            except KctlError:
                attempt += 1
                self._stopping.wait(RETRY.delay(attempt))

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(5)
        self._log.stop()
