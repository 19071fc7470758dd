"""Config, status and offset stores over compacted topics, as a distributed worker keeps them.

Keys and values are Kafka Connect's (``connector-<name>``, ``task-<name>-<n>``,
``commit-<name>``, ``target-state-<name>``, ``status-connector-<name>``,
``status-task-<name>-<n>``, ``["<connector>", {partition}]``; JSON values, null for a
tombstone), so any Kafka tool shows what a kctl cluster holds, and the topic names and
settings are Kafka Connect's worker settings.

Every worker applies every change from the log, its own included: a write is sent, then
the writer reads the log to its end, so when a write returns the change has been applied
and the listeners told, in the order all workers see.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from kctl.api.records import RecordMetadata
from kctl.errors import ConfigError, ConnectError
from kctl.storage.configs import ConfigBackingStore, ConfigRecord, _State
from kctl.storage.offsets import OffsetBackingStore
from kctl.storage.status import StatusBackingStore
from kctl.storage.topic_log import LogTopic, TopicBackedLog
from kctl.transport.base import LogRecord, Transport

log = logging.getLogger(__name__)

__all__ = [
    "KafkaConfigBackingStore",
    "KafkaOffsetBackingStore",
    "KafkaStatusBackingStore",
    "storage_topic",
]

# Kafka Connect's worker settings: (topic key, default partitions)
CONFIG_TOPIC = ("config.storage.topic", 1)
OFFSET_TOPIC = ("offset.storage.topic", 25)
STATUS_TOPIC = ("status.storage.topic", 5)
DEFAULT_REPLICATION_FACTOR = 3
# kctl's record of the worker group that owns the config topic (Java workers ignore it)
GROUP_KEY = "kctl-group"
CONFIG_PREFIXES = ("connector-", "task-", "commit-", "target-state-", "session-key",
                   "restart-connector-", GROUP_KEY)


def storage_topic(worker_config: Mapping[str, Any], which: tuple[str, int]) -> LogTopic:
    """The topic a store uses, from `<which>`, `<which>.partitions` and
    `<which>.replication.factor`; the config topic has exactly one partition (its order is
    the order every worker applies changes in)."""
    key, default_partitions = which
    name = worker_config.get(key)
    if not name:
        example = {"config": "configs", "offset": "offsets"}.get(key.split(".")[0], "status")
        raise ConfigError(f"{key} is required for a distributed worker (e.g. connect-"
                          f"{example})", key=key)
    prefix = key.removesuffix(".topic")
    partitions = int(worker_config.get(f"{prefix}.partitions", default_partitions))
    if key == CONFIG_TOPIC[0] and partitions != 1:
        raise ConfigError(f"{prefix}.partitions must be 1: the config topic's single "
                          "partition orders every change", key=f"{prefix}.partitions")
    rf = int(worker_config.get(f"{prefix}.replication.factor", DEFAULT_REPLICATION_FACTOR))
    return LogTopic(str(name), partitions, rf, key)


def _json(value: bytes | None, topic: str, key: str) -> dict[str, Any] | None:
    if value is None:
        return None
    parsed = json.loads(value)
    if not isinstance(parsed, dict):
        raise ValueError(f"{topic}: value of {key} is not a JSON object")
    return parsed


def _dumps(value: Mapping[str, Any] | None) -> bytes | None:
    return None if value is None else json.dumps(value, separators=(",", ":")).encode()


def _sent(futures: list[Future[None]]) -> Callable[[RecordMetadata | None, BaseException | None], None]:
    fut: Future[None] = Future()
    futures.append(fut)

    def done(md: RecordMetadata | None, err: BaseException | None) -> None:
        if err is not None:
            fut.set_exception(err)
        else:
            fut.set_result(None)
    return done


def _wait_all(futures: list[Future[None]], what: str, timeout: float) -> None:
    for fut in futures:
        err = fut.exception(timeout)
        if err is not None:
            raise ConnectError(f"could not write {what}: {err}") from err


class KafkaConfigBackingStore(ConfigBackingStore):
    """Connector configs, task configs and target states in `config.storage.topic`."""

    def __init__(self, transport: Transport, worker_config: Mapping[str, Any],
                 *, timeout: float = 30.0):
        super().__init__()
        self.topic = storage_topic(worker_config, CONFIG_TOPIC)
        self.timeout = timeout
        self._log = TopicBackedLog(transport, self.topic, self._on_record)
        self._foreign: list[str] = []
        self.owner: dict[str, Any] | None = None  # the first group that claimed the topic

    def start(self) -> None:
        self._log.start(self.timeout)
        if self._foreign:
            self._log.stop()
            shown = ", ".join(self._foreign[:3])
            raise ConfigError(
                f"topic {self.topic.name} (config.storage.topic) holds records that are not "
                f"Kafka Connect config records (keys such as {shown}): it belongs to "
                "something else; name another topic", key=CONFIG_TOPIC[0])

    def stop(self) -> None:
        self._log.stop()

    def _on_record(self, record: LogRecord) -> None:
        key = (record.key or b"").decode("utf-8", "replace")
        if not key.startswith(CONFIG_PREFIXES):
            self._foreign.append(key or "<no key>")
            return
        try:
            value = _json(record.value, self.topic.name, key)
        except ValueError:
            log.error("%s: skipping the config record %s at offset %d: its value is not a "
                      "JSON object", self.topic.name, key, record.offset)
            return
        with self._lock:
            if key == GROUP_KEY and value is not None and self.owner is None:
                self.owner = value
            events = self._state.apply(key, value)
            self._state.offset = record.offset + 1
        self._fire(events)

    def claim(self, group_id: str, worker: str, now_ms: int) -> None:
        """Record which worker group owns this config topic, or refuse a worker of another
        group: two groups on one config topic would each run every connector (Kafka
        shares this weakness; an exactly-once sink then holds every line twice)."""
        if self.owner is None:
            self._write([(GROUP_KEY, {"group.id": group_id, "worker": worker,
                                      "timestamp": now_ms})])
        owner = self.owner or {}
        if owner.get("group.id") != group_id:
            when = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                 time.gmtime(int(owner.get("timestamp", 0)) / 1000))
            raise ConfigError(
                f"topic {self.topic.name} (config.storage.topic) belongs to worker group "
                f"{owner.get('group.id')!r} (claimed by worker {owner.get('worker')} at "
                f"{when}), not to this worker's group.id {group_id!r}: workers of two groups "
                "on the same topics would each run every connector. Give this group its own "
                "config, offset and status topics, or join group "
                f"{owner.get('group.id')!r}", key="group.id")

    def _persist(self, records: Sequence[ConfigRecord]) -> None:
        futures: list[Future[None]] = []
        for key, value in records:
            self._log.send(key.encode(), _dumps(value), _sent(futures))
        self._log.flush(self.timeout)
        _wait_all(futures, f"to {self.topic.name}", self.timeout)

    def _write(self, records: Sequence[ConfigRecord]) -> None:
        # Not applied here: the log's reader applies it, as it does other workers' writes.
        self._persist(records)
        self._log.read_to_end(self.timeout)

    def read_to_end(self) -> None:
        """Catch up with every change written so far (a worker behind the leader)."""
        self._log.read_to_end(self.timeout)

    def reset_state(self) -> None:
        """For tests and a worker that restarts its log: forget what was applied."""
        with self._lock:
            self._state = _State()


class KafkaStatusBackingStore(StatusBackingStore):
    """Connector and task states in `status.storage.topic`, last value per key."""

    def __init__(self, transport: Transport, worker_config: Mapping[str, Any],
                 *, timeout: float = 30.0, **kwargs: Any):
        super().__init__(**kwargs)
        self.topic = storage_topic(worker_config, STATUS_TOPIC)
        self.timeout = timeout
        self._log = TopicBackedLog(transport, self.topic, self._on_record)

    def start(self) -> None:
        self._log.start(self.timeout)

    def stop(self) -> None:
        self._log.stop()

    def _on_record(self, record: LogRecord) -> None:
        key = (record.key or b"").decode("utf-8", "replace")
        try:
            value = _json(record.value, self.topic.name, key)
        except ValueError:
            log.error("%s: skipping a status record at offset %d whose value is not JSON",
                      self.topic.name, record.offset)
            return
        with self._lock:
            if value is None:
                self._records.pop(key, None)
            else:
                self._records[key] = value

    def _persist(self, records: dict[str, dict[str, Any]]) -> None:
        futures: list[Future[None]] = []
        for key in self._records.keys() - records.keys():
            self._log.send(key.encode(), None, _sent(futures))
        for key, value in records.items():
            if self._records.get(key) != value:
                self._log.send(key.encode(), _dumps(value), _sent(futures))
        self._log.flush(self.timeout)
        _wait_all(futures, f"to {self.topic.name}", self.timeout)

    def read_to_end(self) -> None:
        self._log.read_to_end(self.timeout)


class KafkaOffsetBackingStore(OffsetBackingStore):
    """Source offsets in `offset.storage.topic`: the bytes Kafka Connect writes there."""

    def __init__(self, transport: Transport, worker_config: Mapping[str, Any],
                 *, timeout: float = 30.0):
        self.topic = storage_topic(worker_config, OFFSET_TOPIC)
        self.timeout = timeout
        self._data: dict[bytes, bytes] = {}
        self._log = TopicBackedLog(transport, self.topic, self._on_record)

    def start(self) -> None:
        self._log.start(self.timeout)

    def stop(self) -> None:
        self._log.stop()

    def _on_record(self, record: LogRecord) -> None:
        if record.key is None:
            return
        if record.value is None:
            self._data.pop(record.key, None)
        else:
            self._data[record.key] = record.value

    def get(self, keys: Collection[bytes]) -> dict[bytes, bytes | None]:
        self._log.read_to_end(self.timeout)
        return {k: self._data.get(k) for k in keys}

    def set(self, values: Mapping[bytes, bytes | None]) -> Future[None]:
        futures: list[Future[None]] = []
        result: Future[None] = Future()
        try:
            for k, v in values.items():
                self._log.send(k, v, _sent(futures))
            self._log.flush(self.timeout)
            _wait_all(futures, f"offsets to {self.topic.name}", self.timeout)
            # Done once acknowledged, as Kafka's KafkaOffsetBackingStore: `get` and `snapshot`
            # read to the end themselves. Reading to the end here too made every commit of
            # every task a read-to-end request on a log all of them write all the time.
        except Exception as e:
            result.set_exception(ConnectError(f"could not store offsets: {e}"))
            return result
        result.set_result(None)
        return result

    def snapshot(self) -> dict[bytes, bytes]:
        self._log.read_to_end(self.timeout)
        return dict(self._data)
