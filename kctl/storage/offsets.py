"""Source offsets: the OffsetBackingStore contract of Kafka Connect and its reader/writer.

Keys and values are the bytes Kafka Connect writes to its offsets topic: the key is the
JSON array ``["<connector>", {partition}]`` and the value the JSON offset object (``None``
is a tombstone), so the same bytes can later go to a Kafka offsets topic unchanged.
"""

from __future__ import annotations

import json
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from kctl.api.connector import partition_key
from kctl.durable import atomic_write_json, read_json
from kctl.errors import ConnectError, DataError

log = logging.getLogger(__name__)

__all__ = [
    "FileOffsetBackingStore",
    "MemoryOffsetBackingStore",
    "OffsetBackingStore",
    "OffsetStorageReaderImpl",
    "OffsetStorageWriter",
    "delete_connector_offsets",
    "deserialize_key",
    "list_connector_offsets",
    "serialize_key",
    "serialize_value",
]


# -- serialization (Kafka Connect's JsonConverter with schemas.enable=false) ------------------


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, allow_nan=False).encode()


def serialize_key(connector: str, partition: Mapping[str, Any]) -> bytes:
    return _dumps([connector, dict(partition)])


def serialize_value(offset: Mapping[str, Any] | None) -> bytes | None:
    return None if offset is None else _dumps(dict(offset))


def deserialize_key(key: bytes) -> tuple[str, dict[str, Any]] | None:
    """(connector, partition), or None for a key kctl did not write."""
    try:
        parsed = json.loads(key)
    except ValueError:
        return None
    if (isinstance(parsed, list) and len(parsed) == 2 and isinstance(parsed[0], str)
            and isinstance(parsed[1], dict)):
        return parsed[0], parsed[1]
    return None


def _validate(what: str, data: Mapping[str, Any] | None) -> None:
    """Kafka Connect accepts only string keys and primitive values in partitions and offsets."""
    if data is None:
        return
    if not isinstance(data, Mapping):
        raise DataError(f"source {what} must be a map, not {type(data).__name__}")
    for k, v in data.items():
        if not isinstance(k, str):
            raise DataError(f"source {what} keys must be strings, found {k!r}")
        if v is not None and not isinstance(v, str | int | float | bool):
            raise DataError(f"source {what} value for {k!r} must be a primitive "
                            f"(str, int, float, bool or null), found {type(v).__name__}")


# -- the store contract ------------------------------------------------------------------------


class OffsetBackingStore(ABC):
    """Kafka Connect's OffsetBackingStore: start, stop, batched get/set of opaque key/value
    bytes, so memory, file and Kafka-backed stores are interchangeable."""

    def configure(self, config: Mapping[str, Any]) -> None:
        """Receive the worker config (nothing to read for the memory and file stores)."""

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    @abstractmethod
    def get(self, keys: Collection[bytes]) -> dict[bytes, bytes | None]:
        """Values of the given keys (None when absent), read in one batch."""

    @abstractmethod
    def set(self, values: Mapping[bytes, bytes | None]) -> Future[None]:
        """Write all values (None deletes); the future completes when they are durable."""

    @abstractmethod
    def snapshot(self) -> dict[bytes, bytes]:
        """Every live key and value (for listing a connector's partitions)."""

    def connector_partitions(self, connector: str) -> list[dict[str, Any]]:
        """Partitions with a stored offset for `connector` (Kafka's connectorPartitions)."""
        out = []
        for key in self.snapshot():
            parsed = deserialize_key(key)
            if parsed is not None and parsed[0] == connector:
                out.append(parsed[1])
        return out


def _done(result: Any = None, error: BaseException | None = None) -> Future[Any]:
    f: Future[Any] = Future()
    if error is None:
        f.set_result(result)
    else:
        f.set_exception(error)
    return f


class MemoryOffsetBackingStore(OffsetBackingStore):
    """Offsets in a dict; lost on exit (tests, and the base of the file store)."""

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._lock = threading.Lock()
        self._running = False

    def start(self) -> None:
        self._running = True

    def stop(self) -> None:
        self._running = False

    def get(self, keys: Collection[bytes]) -> dict[bytes, bytes | None]:
        with self._lock:
            return {k: self._data.get(k) for k in keys}

    def set(self, values: Mapping[bytes, bytes | None]) -> Future[None]:
        try:
            with self._lock:
                previous = {k: self._data.get(k) for k in values}
                for k, v in values.items():
                    if v is None:
                        self._data.pop(k, None)
                    else:
                        self._data[k] = v
                try:
                    self._save()
                except BaseException:
                    for k, v in previous.items():  # not durable: not applied either
                        if v is None:
                            self._data.pop(k, None)
                        else:
                            self._data[k] = v
                    raise
        except Exception as e:
            return _done(error=ConnectError(f"could not store offsets: {e}"))
        return _done()

    def _save(self) -> None:
        """Make the current data durable (nothing to do in memory)."""

    def snapshot(self) -> dict[bytes, bytes]:
        with self._lock:
            return dict(self._data)


class FileOffsetBackingStore(MemoryOffsetBackingStore):
    """Offsets in one JSON file, rewritten atomically (temp file + rename) on every set.

    The rename makes every acknowledged set survive kill -9; `fsync=True` also survives
    power loss. The file holds ``{"offsets": [[key, value], ...]}`` with the key and value
    bytes as text, the same bytes a Kafka offsets topic would hold.
    """

    def __init__(self, path: str | Path, *, fsync: bool = False):
        super().__init__()
        self.path = Path(path)
        self.fsync = fsync

    def configure(self, config: Mapping[str, Any]) -> None:
        if config.get("offset.storage.file.filename"):
            self.path = Path(str(config["offset.storage.file.filename"]))

    def start(self) -> None:
        raw = read_json(self.path, {"offsets": []})
        data: dict[bytes, bytes] = {}
        for k, v in raw.get("offsets", []):
            if v is not None:
                data[k.encode("utf-8", "surrogateescape")] = v.encode("utf-8", "surrogateescape")
        with self._lock:
            self._data = data
        super().start()

    def _save(self) -> None:
        entries = [[k.decode("utf-8", "surrogateescape"), v.decode("utf-8", "surrogateescape")]
                   for k, v in self._data.items()]
        atomic_write_json(self.path, {"version": 1, "offsets": entries}, fsync=self.fsync)


# -- what tasks and the runtime use ------------------------------------------------------------


class OffsetStorageReaderImpl:
    """A connector's view of its committed offsets (kctl.api.OffsetStorageReader)."""

    def __init__(self, store: OffsetBackingStore, connector: str):
        self._store = store
        self._connector = connector

    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        return self.offsets([partition]).get(partition_key(partition))

    def offsets(self, partitions: Sequence[Mapping[str, Any]]
                ) -> dict[tuple[tuple[str, Any], ...], dict[str, Any] | None]:
        keys: dict[bytes, tuple[tuple[str, Any], ...]] = {}
        result: dict[tuple[tuple[str, Any], ...], dict[str, Any] | None] = {}
        for p in partitions:
            _validate("partition", p)
            pk = partition_key(p)
            keys[serialize_key(self._connector, p)] = pk
            result[pk] = None
        try:
            raw = self._store.get(list(keys))
        except Exception as e:
            raise ConnectError(f"failed to read offsets of {self._connector}: {e}") from e
        for k, v in raw.items():
            if v is None or k not in keys:
                continue
            try:
                value = json.loads(v)
            except ValueError as e:
                log.error("Ignoring unreadable offset of %s for %s: %s", self._connector, k, e)
                continue
            if isinstance(value, dict):
                result[keys[k]] = value
        return result

    def close(self) -> None:
        """Nothing is outstanding: reads are synchronous."""


class OffsetStorageWriter:
    """Kafka's OffsetStorageWriter: offsets accumulate, then flush as one snapshot.

    `begin_flush` moves what accumulated into a snapshot (only one flush at a time);
    `do_flush` writes it; on failure `cancel_flush` puts it back, under anything newer.
    """

    def __init__(self, store: OffsetBackingStore, connector: str):
        self._store = store
        self._connector = connector
        self._lock = threading.Lock()
        self._data: dict[tuple[tuple[str, Any], ...], tuple[dict[str, Any], dict[str, Any] | None]] = {}
        self._to_flush: dict[tuple[tuple[str, Any], ...],
                             tuple[dict[str, Any], dict[str, Any] | None]] | None = None
        self._flush_id = 0

    def offset(self, partition: Mapping[str, Any], offset: Mapping[str, Any] | None) -> None:
        """Record the latest offset of a partition (None resets it when flushed)."""
        _validate("partition", partition)
        _validate("offset", offset)
        with self._lock:
            self._data[partition_key(partition)] = (
                dict(partition), None if offset is None else dict(offset))

    def begin_flush(self) -> bool:
        """Snapshot the pending offsets; False when there is nothing to write."""
        with self._lock:
            if self._to_flush is not None:
                raise ConnectError("OffsetStorageWriter is already flushing")
            if not self._data:
                return False
            self._to_flush, self._data = self._data, {}
            return True

    def do_flush(self) -> Future[None]:
        with self._lock:
            if self._to_flush is None:
                return _done()
            flush_id = self._flush_id
            try:
                values = {serialize_key(self._connector, p): serialize_value(o)
                          for p, o in self._to_flush.values()}
            except (TypeError, ValueError) as e:
                self._cancel_locked()
                return _done(error=DataError(f"cannot serialize offsets of {self._connector}: {e}"))
        future = self._store.set(values)

        def finished(f: Future[None]) -> None:
            with self._lock:
                if flush_id != self._flush_id:
                    return  # this flush was cancelled or timed out already
                if f.exception() is not None:
                    self._cancel_locked()
                else:
                    self._flush_id += 1
                    self._to_flush = None

        future.add_done_callback(finished)
        return future

    def cancel_flush(self) -> None:
        with self._lock:
            self._cancel_locked()

    def _cancel_locked(self) -> None:
        if self._to_flush is not None:
            self._to_flush.update(self._data)  # newer offsets win over the failed snapshot
            self._data, self._to_flush = self._to_flush, None
            self._flush_id += 1

    @property
    def flushing(self) -> bool:
        return self._to_flush is not None


def list_connector_offsets(store: OffsetBackingStore, connector: str
                           ) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Every (partition, offset) a connector has stored, for GET /connectors/{n}/offsets."""
    out: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    for k, v in store.snapshot().items():
        parsed = deserialize_key(k)
        if parsed is None or parsed[0] != connector:
            continue
        try:
            value = json.loads(v) if v is not None else None
        except ValueError:
            continue
        out.append((parsed[1], value if isinstance(value, dict) else None))
    out.sort(key=lambda pv: json.dumps(pv[0], sort_keys=True, default=str))
    return out


def delete_connector_offsets(store: OffsetBackingStore, connector: str) -> Future[None]:
    """Tombstone every offset of a connector (DELETE /connectors/{n}/offsets)."""
    keys = [k for k in store.snapshot() if (p := deserialize_key(k)) and p[0] == connector]
    return store.set(dict.fromkeys(keys)) if keys else _done()
