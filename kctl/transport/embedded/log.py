"""The embedded log itself: topics under one state directory, its lock, committed group
offsets, and the factory of its clients.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import json
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kctl.api.records import TopicPartition
from kctl.durable import atomic_write
from kctl.errors import AlreadyExistsError, ConfigError, NotFoundError, TransportError
from kctl.transport.base import (
    Admin,
    Consumer,
    HeaderColumns,
    HeaderList,
    LogRecord,
    Producer,
    TopicSpec,
    Transport,
)

if TYPE_CHECKING:
    import pyarrow as pa

from kctl.transport.embedded.clients import EmbeddedAdmin, EmbeddedConsumer, EmbeddedProducer
from kctl.transport.embedded.groups import EmbeddedGroups
from kctl.transport.embedded.segments import SEGMENT_BYTES, _Partition, _Topic

log = logging.getLogger(__name__)


OFFSETS_TOPIC = "__consumer_offsets"


LOCK_FILE = "LOCK"


_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


class EmbeddedTransport(Transport):
    """A durable multi-topic log in one directory, owned by one process at a time."""

    name = "embedded"

    def __init__(self, state_dir: str | Path, *, clock: Callable[[], float] = time.time,
                 fsync: bool = False, assignment_strategy: Any = None,
                 segment_bytes: int = SEGMENT_BYTES, min_compact_garbage: int = 1000,
                 auto_create_partitions: int = 1):
        self.state_dir = Path(state_dir)
        self.clock = clock
        self.fsync = fsync
        # partition.assignment.strategy for consumers whose config does not set it
        # (None: Kafka's default, range then cooperative-sticky).
        self.assignment_strategy = assignment_strategy
        self.segment_bytes = segment_bytes
        self.min_compact_garbage = min_compact_garbage
        self.auto_create_partitions = auto_create_partitions
        self.log_dir = self.state_dir / "log"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._lock_fd = self._acquire_lock()
        self._topics_lock = threading.RLock()
        self._topics: dict[str, _Topic] = {}
        self._cond = threading.Condition(threading.Lock())
        self._seq = 0
        self.groups = EmbeddedGroups(self.topics, self.now_ms, self.notify)
        self._sticky_seq = itertools.count()
        self._offsets_lock = threading.Lock()
        self._offsets: dict[tuple[str, str, int], int] = {}
        self._closed = False
        try:
            self.cluster_id = self._load_cluster_id()
            for d in sorted(self.log_dir.iterdir()):
                if d.is_dir() and (d / "topic.json").exists():
                    self._open_topic(d.name)
            if OFFSETS_TOPIC not in self._topics:
                self.create_topic(TopicSpec(OFFSETS_TOPIC, 1, 1, {"cleanup.policy": "compact"}))
            self._load_offsets()
        except BaseException:
            self.close()
            raise

    # -- lock ----------------------------------------------------------------------------
    def _acquire_lock(self) -> int:
        path = self.state_dir / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise TransportError(
                    f"state dir {self.state_dir} is in use by another kctl process "
                    f"(pid {holder}); stop it or choose another state.dir") from None
            raise TransportError(f"cannot lock state dir {self.state_dir}: {e}") from e
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return fd

    def _load_cluster_id(self) -> str:
        path = self.log_dir / "meta.json"
        if path.exists():
            return str(json.loads(path.read_text())["cluster_id"])
        cid = f"embedded-{uuid.uuid4().hex[:16]}"
        atomic_write(path, json.dumps({"cluster_id": cid}).encode(), fsync=self.fsync)
        return cid

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # -- topics ---------------------------------------------------------------------------
    def _open_topic(self, name: str) -> _Topic:
        d = self.log_dir / name
        meta = json.loads((d / "topic.json").read_text())
        config = meta.get("config", {})
        compacted = "compact" in str(config.get("cleanup.policy", "delete"))
        parts = [_Partition(name, i, d / str(i), compacted=compacted, fsync=self.fsync,
                            segment_bytes=self.segment_bytes,
                            min_compact_garbage=self.min_compact_garbage)
                 for i in range(int(meta["partitions"]))]
        topic = _Topic(name, parts, config)
        self._topics[name] = topic
        return topic

    def create_topic(self, spec: TopicSpec, *, exist_ok: bool = True) -> None:
        if not _TOPIC_NAME.match(spec.name) or spec.name in (".", ".."):
            raise ConfigError(f"invalid topic name {spec.name!r}: use 1-249 of [A-Za-z0-9._-]",
                              key="topic")
        if spec.partitions < 1:
            raise ConfigError(f"topic {spec.name} needs at least one partition", key="partitions")
        with self._topics_lock:
            if spec.name in self._topics:
                if exist_ok:
                    return
                raise AlreadyExistsError(f"Topic {spec.name} already exists")
            d = self.log_dir / spec.name
            d.mkdir(parents=True, exist_ok=True)
            meta = {"name": spec.name, "partitions": spec.partitions,
                    "config": {k: str(v) for k, v in spec.config.items()}}
            atomic_write(d / "topic.json", json.dumps(meta, indent=1).encode(), fsync=self.fsync)
            self._open_topic(spec.name)
        self.groups.rebalance_for_topics()

    def describe_topic(self, name: str) -> TopicSpec:
        t = self._topics.get(name)
        if t is None:
            raise NotFoundError(f"Topic {name} does not exist")
        return TopicSpec(name, len(t.partitions), 1, dict(t.config))

    def delete_topic(self, name: str) -> None:
        with self._topics_lock:
            topic = self._topics.pop(name, None)
            if topic is None:
                raise NotFoundError(f"Topic {name} does not exist")
            for p in topic.partitions:
                p.close()
            shutil.rmtree(self.log_dir / name, ignore_errors=True)
        self.groups.rebalance_for_topics()
        self.notify()

    def topics(self) -> dict[str, int]:
        with self._topics_lock:
            return {name: len(t.partitions) for name, t in self._topics.items()}

    def partition_count(self, topic: str, *, create: bool = False) -> int:
        t = self._topics.get(topic)
        if t is None:
            if not create:
                raise NotFoundError(f"Topic {topic} does not exist")
            self.create_topic(TopicSpec(topic, self.auto_create_partitions))
            t = self._topics[topic]
        return len(t.partitions)

    def next_sticky(self, topic: str, partitions: int) -> int:
        return next(self._sticky_seq) % max(partitions, 1)

    def partition(self, tp: TopicPartition) -> _Partition | None:
        t = self._topics.get(tp.topic)
        if t is None or not 0 <= tp.partition < len(t.partitions):
            return None
        return t.partitions[tp.partition]

    def append(self, topic: str, partition: int,
               items: Sequence[tuple[int, bytes | None, bytes | None, HeaderList]]) -> int:
        p = self.partition(TopicPartition(topic, partition))
        if p is None:
            raise TransportError(f"unknown topic partition {topic}-{partition}")
        base = p.append(items)
        self.notify()
        return base

    def append_columns(self, topic: str, partition: int, timestamp: int, values: pa.Array,
                       headers: HeaderColumns = (), keys: pa.Array | None = None) -> int:
        """Append rows given as columns (see `Producer.send_batch`)."""
        p = self.partition(TopicPartition(topic, partition))
        if p is None:
            raise TransportError(f"unknown topic partition {topic}-{partition}")
        base = p.append_columns(timestamp, values, headers, keys)
        self.notify()
        return base

    def end_offset(self, tp: TopicPartition) -> int:
        p = self.partition(tp)
        return 0 if p is None else p.next_offset

    def start_offset(self, tp: TopicPartition) -> int:
        p = self.partition(tp)
        return 0 if p is None else p.start_offset

    def compact(self, topic: str) -> None:
        """Compact every partition of a compacted topic now (tests, tools)."""
        t = self._topics.get(topic)
        if t is None:
            raise NotFoundError(f"Topic {topic} does not exist")
        for p in t.partitions:
            p.compact()
        self.notify()

    def notify(self) -> None:
        with self._cond:
            self._seq += 1
            self._cond.notify_all()

    @property
    def data_seq(self) -> int:
        """Bumped whenever records are appended or groups change: a consumer waits for it
        to move (`wait_for_data`) instead of polling in a loop."""
        return self._seq

    def wait_for_data(self, seq: int, timeout: float) -> None:
        with self._cond:
            if self._seq == seq:
                self._cond.wait(timeout)

    # -- committed offsets ------------------------------------------------------------------
    def _load_offsets(self) -> None:
        part = self._topics[OFFSETS_TOPIC].partitions[0]
        out: list[LogRecord] = []
        offset, hint = 0, None
        while True:
            before = len(out)
            offset, hint = part.read(offset, 100_000, hint, out)
            if len(out) == before:
                break
        for r in out:
            if r.key is None:
                continue
            group, topic, p = json.loads(r.key)
            if r.value is None:
                self._offsets.pop((group, topic, p), None)
            else:
                self._offsets[(group, topic, p)] = int(json.loads(r.value)["offset"])

    def commit_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        now = self.now_ms()
        items = [(now, _offset_key(group, tp), json.dumps({"offset": int(o)}).encode(), ())
                 for tp, o in offsets.items()]
        with self._offsets_lock:
            self.append(OFFSETS_TOPIC, 0, items)
            for tp, o in offsets.items():
                self._offsets[(group, tp.topic, tp.partition)] = int(o)

    def delete_offsets(self, group: str, partitions: Sequence[TopicPartition]) -> None:
        now = self.now_ms()
        with self._offsets_lock:
            present = [tp for tp in partitions if (group, tp.topic, tp.partition) in self._offsets]
            if not present:
                return
            self.append(OFFSETS_TOPIC, 0, [(now, _offset_key(group, tp), None, ()) for tp in present])
            for tp in present:
                self._offsets.pop((group, tp.topic, tp.partition), None)

    def committed_offset(self, group: str, tp: TopicPartition) -> int | None:
        return self._offsets.get((group, tp.topic, tp.partition))

    # -- groups ------------------------------------------------------------------------------
    # -- factory ----------------------------------------------------------------------------
    def producer(self, config: Mapping[str, Any] | None = None) -> Producer:
        self._check_open()
        return EmbeddedProducer(self, config or {})

    def consumer(self, group_id: str | None, config: Mapping[str, Any] | None = None) -> Consumer:
        self._check_open()
        return EmbeddedConsumer(self, group_id, config or {})

    def admin(self, config: Mapping[str, Any] | None = None) -> Admin:
        return EmbeddedAdmin(self)  # the embedded log has no client settings to honour

    def _check_open(self) -> None:
        if self._closed:
            raise TransportError(f"embedded log at {self.state_dir} is closed")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._topics_lock:
            for t in self._topics.values():
                for p in t.partitions:
                    p.close()
            self._topics = {}
        self.notify()
        lock_fd = getattr(self, "_lock_fd", None)
        if lock_fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(lock_fd, fcntl.LOCK_UN)
            os.close(lock_fd)
            self._lock_fd = None

    def __enter__(self) -> EmbeddedTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _offset_key(group: str, tp: TopicPartition) -> bytes:
    return json.dumps([group, tp.topic, tp.partition], separators=(",", ":")).encode()

