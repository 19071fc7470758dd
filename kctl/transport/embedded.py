"""The embedded durable log: Kafka's storage model on local files, for standalone workers.

Layout under ``state_dir/log``::

    <topic>/topic.json                      partitions and topic config
    <topic>/<partition>/<base offset>.log   segments of framed records

A frame is ``length, crc32, offset, timestamp, key_len, value_len, n_headers, key, value,
headers``; the CRC covers everything after it, so a torn tail left by ``kill -9`` is found
and cut off when the log is opened. A record is acknowledged only after ``write()`` handed
its bytes to the OS (and, with ``fsync=True``, after fsync), which is what makes
acknowledged records survive the death of the process.

Committed consumer offsets live in the compacted internal topic ``__consumer_offsets``.
Consumer groups are in-process and run kctl's own consumer protocol half and assignors
(``kctl.group.consumer_coordinator``), chosen per consumer by ``partition.assignment.strategy``
as on a Kafka cluster. A membership change runs the rebalance at once, under the group lock:
each member subscribes with its owned partitions, generation and its assignor's user data, the
leader's assignor computes, every member's assignor gets ``on_assignment``, and a cooperative
revocation is followed by another round, as the simulator behind ``kctl rebalance explain``
does. Consumers apply the result in ``poll_batch``: eager members revoke everything they hold
after each rebalance, cooperative ones only what moved; a partition is handed to its new owner
only once its old owner ran its revoke callback.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import fcntl
import itertools
import json
import logging
import os
import re
import shutil
import struct
import threading
import time
import uuid
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kctl.api.records import RecordMetadata, TopicPartition
from kctl.durable import atomic_write, fsync_dir
from kctl.errors import AlreadyExistsError, ConfigError, NotFoundError, TransportError
from kctl.group.assignors.consumer import ConsumerPartitionAssignor
from kctl.group.assignors.consumer import TopicPartition as GroupTopicPartition
from kctl.group.consumer_coordinator import (
    ASSIGNMENT_STRATEGY_CONFIG,
    ConsumerHandler,
    assignment_strategy,
)
from kctl.group.protocol import JoinMember, select_protocol
from kctl.transport.base import (
    Admin,
    BatchCallback,
    BatchDelivery,
    Consumer,
    DeliveryCallback,
    HeaderColumns,
    HeaderList,
    LogRecord,
    Producer,
    ProducerRecord,
    RebalanceCallback,
    RecordColumns,
    TopicSpec,
    Transport,
    column_rows,
)

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

log = logging.getLogger(__name__)

__all__ = [
    "OFFSETS_TOPIC",
    "EmbeddedTransport",
    "murmur2",
    "partition_for_key",
]

OFFSETS_TOPIC = "__consumer_offsets"
LOCK_FILE = "LOCK"

_PRE = struct.Struct(">II")  # length of the body, crc32 of the body
_BODY = struct.Struct(">qqiiH")  # offset, timestamp, key length, value length, header count
_OFFSET = struct.Struct(">q")  # the body's first field
_HK = struct.Struct(">H")
_HV = struct.Struct(">i")
_PRE_SIZE = _PRE.size
_BODY_SIZE = _BODY.size
_MAX_FRAME = 1 << 30

READ_CHUNK = 1 << 20
COLUMN_READ_CHUNK = 16 << 20  # the most a columnar read takes per partition and poll
INDEX_INTERVAL = 1 << 16  # one sparse index entry per 64 KiB of log
SEGMENT_BYTES = 256 << 20
_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")

# -- partitioning ------------------------------------------------------------------------------

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (Utils.murmur2), as a signed 32-bit int, so keys land where Kafka puts them."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    n4 = length >> 2
    if n4:
        for k in struct.unpack_from(f"<{n4}I", data):
            k = (k * _M) & _MASK
            k ^= k >> 24
            h = ((h * _M) & _MASK) ^ ((k * _M) & _MASK)
    rest = length & 3
    if rest:
        i = n4 << 2
        if rest == 3:
            h ^= data[i + 2] << 16
        if rest >= 2:
            h ^= data[i + 1] << 8
        h ^= data[i]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """Kafka's default partitioner for keyed records: toPositive(murmur2(key)) % partitions."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


# -- frames --------------------------------------------------------------------------------------


def _encode(offset: int, timestamp: int, key: bytes | None, value: bytes | None,
            headers: HeaderList) -> bytes:
    if len(headers) == 1 and key is None and value is not None and headers[0][1] is not None:
        # one header, no key: what an exactly-once source writes; the hot path
        hk, hv = headers[0]
        kb = hk.encode()
        body = b"".join((_BODY.pack(offset, timestamp, -1, len(value), 1), value,
                         _HK.pack(len(kb)), kb, _HV.pack(len(hv)), hv))
        return _PRE.pack(len(body), zlib.crc32(body)) + body
    if not headers:
        body = _BODY.pack(offset, timestamp, -1 if key is None else len(key),
                          -1 if value is None else len(value), 0) + (key or b"") + (value or b"")
        return _PRE.pack(len(body), zlib.crc32(body)) + body
    parts = [_BODY.pack(offset, timestamp, -1 if key is None else len(key),
                        -1 if value is None else len(value), len(headers))]
    if key:
        parts.append(key)
    if value:
        parts.append(value)
    for hk, hv in headers:
        kb = hk.encode()
        parts.append(_HK.pack(len(kb)))
        parts.append(kb)
        parts.append(_HV.pack(-1 if hv is None else len(hv)))
        if hv:
            parts.append(hv)
    body = b"".join(parts)
    return _PRE.pack(len(body), zlib.crc32(body)) + body


def _encode_rows(base: int, items: Iterable[tuple[int, bytes | None, bytes | None, HeaderList]]
                 ) -> tuple[bytes, list[int]]:
    """(timestamp, key, value, headers) rows as frames from offset `base` on: (bytes, where
    each frame begins)."""
    frames = [_encode(base + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(items)]
    return b"".join(frames), list(itertools.accumulate((len(f) for f in frames[:-1]), initial=0))


_HEAD = [("offset", ">i8"), ("timestamp", ">i8"), ("key", ">i4"), ("value", ">i4"),
         ("headers", ">u2")]  # _BODY as a numpy record
_FRAME_PRE = [("length", ">u4"), ("crc", ">u4")]  # _PRE as a numpy record
_MAX_COLUMN_BYTES = 1 << 30  # binary arrays have 32-bit offsets


def _lengths(arr: pa.Array) -> np.ndarray:
    """Each row's byte length of a binary array."""
    import numpy as np

    offsets = np.frombuffer(arr.buffers()[1], np.int32, len(arr) + 1, arr.offset * 4)
    return np.diff(offsets)


def _fixed(rows: np.ndarray) -> pa.Array:
    """A numpy record array as a binary array, one row per record."""
    import numpy as np
    import pyarrow as pa

    width, n = rows.dtype.itemsize, len(rows)
    offsets = np.arange(0, width * (n + 1), width, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(rows.tobytes())])


def _encode_columns(base: int, timestamp: int, values: pa.Array,
                    headers: HeaderColumns) -> tuple[pa.Buffer, np.ndarray] | None:
    """The frames `_encode` writes for keyless rows, built column-wise: (bytes, where each
    frame begins), or None when a row needs the per-row encoder (a null value or header
    value, or more bytes than one binary array holds)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(values)
    if values.null_count or any(col.null_count or len(col) != n for _, col in headers):
        return None
    if n == 0:
        return pa.py_buffer(b""), np.zeros(0, np.int64)
    values = values.cast(pa.binary())
    cols = [(name.encode(), col.cast(pa.binary())) for name, col in headers]
    value_len = _lengths(values)
    head = np.empty(n, np.dtype(_HEAD))
    head["offset"] = np.arange(base, base + n)
    head["timestamp"] = timestamp
    head["key"] = -1
    head["value"] = value_len
    head["headers"] = len(cols)
    parts: list[Any] = [_fixed(head), values]
    body_len = _BODY_SIZE + value_len.astype(np.int64)
    for name, col in cols:
        col_len = _lengths(col)
        parts += [pa.scalar(_HK.pack(len(name)) + name, pa.binary()),
                  _fixed(col_len.astype(">i4")), col]
        body_len += _HK.size + len(name) + _HV.size + col_len
    if int(body_len.sum()) + n * _PRE_SIZE >= _MAX_COLUMN_BYTES:
        return None
    bodies = pc.binary_join_element_wise(*parts, b"")
    ends = np.frombuffer(bodies.buffers()[1], np.int32, n + 1).tolist()
    data, crc32 = memoryview(bodies.buffers()[2]), zlib.crc32
    pre = np.empty(n, np.dtype(_FRAME_PRE))
    pre["length"] = body_len
    pre["crc"] = [crc32(data[a:b]) for a, b in itertools.pairwise(ends)]
    frames = pc.binary_join_element_wise(_fixed(pre), bodies, b"")
    frame_len = body_len + _PRE_SIZE
    starts = np.cumsum(frame_len) - frame_len
    return frames.buffers()[2][:int(starts[-1] + frame_len[-1])], starts


def _decode(buf: bytes, topic: str, partition: int, from_offset: int, max_records: int,
            out: list[LogRecord]) -> tuple[int, int]:
    """Append complete records with offset >= from_offset to `out`.

    Returns (bytes consumed, next offset). Stops at a partial frame or after max_records.
    """
    pos = 0
    n = len(buf)
    taken = 0
    next_offset = from_offset
    unpack_pre = _PRE.unpack_from
    unpack_body = _BODY.unpack_from
    while taken < max_records and pos + _PRE_SIZE <= n:
        length = unpack_pre(buf, pos)[0]
        end = pos + _PRE_SIZE + length
        if end > n:
            break
        offset, ts, kl, vl, nh = unpack_body(buf, pos + _PRE_SIZE)
        if offset >= from_offset:
            p = pos + _PRE_SIZE + _BODY_SIZE
            if kl < 0:
                key = None
            else:
                key = buf[p:p + kl]
                p += kl
            if vl < 0:
                value = None
            else:
                value = buf[p:p + vl]
                p += vl
            out.append(LogRecord(topic, partition, offset, ts, key, value,
                                 _headers_at(buf, p, nh) if nh else ()))
            taken += 1
            next_offset = offset + 1
        pos = end
    return pos, next_offset


def _headers_at(buf: bytes, p: int, count: int) -> HeaderList:
    """The `count` headers of a frame, starting at `p`."""
    hs = []
    for _ in range(count):
        hkl = _HK.unpack_from(buf, p)[0]
        p += 2
        hk = buf[p:p + hkl].decode()
        p += hkl
        hvl = _HV.unpack_from(buf, p)[0]
        p += 4
        if hvl < 0:
            hs.append((hk, None))
        else:
            hs.append((hk, buf[p:p + hvl]))
            p += hvl
    return tuple(hs)


class _FrameHeaders(Sequence[HeaderList]):
    """The headers of frames in one read buffer, decoded when asked for: a columnar reader
    seldom needs them, and decoding them costs more than the rest of a frame."""

    __slots__ = ("_at", "_buf", "_counts")

    def __init__(self, buf: bytes, at: list[int], counts: list[int]):
        self._buf, self._at, self._counts = buf, at, counts

    def __len__(self) -> int:
        return len(self._at)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return _FrameHeaders(self._buf, self._at[i], self._counts[i])
        n = self._counts[i]
        return _headers_at(self._buf, self._at[i], n) if n else ()


def _decode_columns(buf: bytes, topic: str, partition: int, from_offset: int,
                    max_records: int) -> tuple[int, RecordColumns | None]:
    """The complete frames of `buf` with offset >= from_offset (at most max_records) as
    columns: (bytes consumed, the columns or None when there are none).

    Only stepping from frame to frame is done per record; the fixed fields and the values
    are cut out of the buffer with numpy and Arrow, and headers wait until asked for.
    """
    import numpy as np

    pos, n = 0, len(buf)
    unpack_pre, unpack_offset = _PRE.unpack_from, _OFFSET.unpack_from
    while pos + _PRE_SIZE + _BODY_SIZE <= n:  # a read starts at the index entry before it
        end = pos + _PRE_SIZE + unpack_pre(buf, pos)[0]
        if end > n or unpack_offset(buf, pos + _PRE_SIZE)[0] >= from_offset:
            break
        pos = end
    starts: list[int] = []
    append = starts.append
    while len(starts) < max_records and pos + _PRE_SIZE <= n:
        end = pos + _PRE_SIZE + unpack_pre(buf, pos)[0]
        if end > n:
            break
        append(pos)
        pos = end
    if not starts:
        return pos, None
    raw = np.frombuffer(buf, np.uint8)
    body = np.asarray(starts, np.int64) + _PRE_SIZE
    head = raw[body[:, None] + np.arange(_BODY_SIZE)].view(np.dtype(_HEAD)).ravel()
    key_len = head["key"].astype(np.int64)
    value_len = head["value"].astype(np.int64)
    key_at = body + _BODY_SIZE
    value_at = key_at + np.maximum(key_len, 0)
    keys = None
    if (key_len >= 0).any():
        keys = [None if kl < 0 else buf[a:a + kl]
                for a, kl in zip(key_at.tolist(), key_len.tolist(), strict=True)]
    # the headers keep their buffer alive: not one much larger than the frames they are in
    kept = buf if pos * 2 >= n else buf[:pos]
    headers = _FrameHeaders(kept, (value_at + np.maximum(value_len, 0)).tolist(),
                            head["headers"].tolist())
    return pos, RecordColumns(topic, partition, head["offset"].tolist(),
                              head["timestamp"].tolist(), keys,
                              _cut(buf, raw, value_at, value_len), headers)


def _cut(buf: bytes, raw: np.ndarray, at: np.ndarray, length: np.ndarray) -> pa.Array:
    """The byte strings at `at` in `buf` (`length` -1: null) as a binary array, through a
    binary_view array whose views point into `buf`: one copy in C, nothing per value."""
    import numpy as np
    import pyarrow as pa

    k = len(at)
    views = np.zeros((k, 4), "<i4")  # length, prefix, buffer index, offset
    views[:, 0] = np.maximum(length, 0)
    views[:, 3] = at
    data = views.view(np.uint8)
    head = raw[np.minimum(at[:, None] + np.arange(12), len(raw) - 1)]
    data[:, 4:8] = head[:, :4]
    short = length <= 12  # short values live in the view itself, zero-padded
    if short.any():
        data[short, 4:16] = head[short] * (np.arange(12) < length[short, None])
    nulls = int((length < 0).sum())
    validity = pa.py_buffer(np.packbits(length >= 0, bitorder="little")) if nulls else None
    views_arr = pa.Array.from_buffers(pa.binary_view(), k,
                                      [validity, pa.py_buffer(data), pa.py_buffer(buf)],
                                      null_count=nulls)
    return views_arr.cast(pa.binary())


@dataclass(slots=True)
class _Frame:
    """A frame as compaction sees it: where it is and what it says, without its payload."""

    pos: int
    size: int
    offset: int
    key: bytes | None
    tombstone: bool


FrameVisitor = Callable[[int, int, int, bytes | None, bool], None]
"""visit(position, frame size, offset, key, is tombstone)."""


def _scan(fd: int, size: int, *, verify: bool, visit: FrameVisitor, keys: bool) -> int:
    """Walk the frames of a segment, calling `visit` for each; returns the valid byte count.

    Stops at the first frame whose length or CRC is wrong, or that the file cuts short.
    """
    pos = 0
    carry = b""
    base = 0  # file position of carry[0]
    unpack_pre = _PRE.unpack_from
    unpack_body = _BODY.unpack_from
    crc32 = zlib.crc32
    while True:
        at = base + len(carry)
        chunk = os.pread(fd, READ_CHUNK, at) if at < size else b""
        buf = carry + chunk if carry else chunk
        if not buf:
            break
        p = pos - base
        n = len(buf)
        while p + _PRE_SIZE <= n:
            length, crc = unpack_pre(buf, p)
            if length < _BODY_SIZE or length > _MAX_FRAME:
                return pos
            end = p + _PRE_SIZE + length
            if end > n:
                break
            b = p + _PRE_SIZE
            if verify and crc32(memoryview(buf)[b:end]) != crc:
                return pos
            offset, _, kl, vl, _ = unpack_body(buf, b)
            if kl > length or vl > length:
                return pos
            key = bytes(buf[b + _BODY_SIZE:b + _BODY_SIZE + kl]) if keys and kl >= 0 else None
            visit(pos, _PRE_SIZE + length, offset, key, vl < 0)
            pos += _PRE_SIZE + length
            p = end
        if not chunk:
            break  # end of file: whatever is left in carry is a torn frame
        carry = buf[p:]
        base = pos
    return pos


# -- segments and partitions -------------------------------------------------------------------


class _Segment:
    __slots__ = ("base", "fd", "index_offsets", "index_positions", "path", "size")

    def __init__(self, path: Path, base: int, fd: int, size: int):
        self.path = path
        self.base = base
        self.fd = fd
        self.size = size  # bytes readers may see: only complete, acknowledged frames
        self.index_offsets: list[int] = []
        self.index_positions: list[int] = []

    def add_index(self, offset: int, pos: int) -> None:
        if not self.index_positions or pos - self.index_positions[-1] >= INDEX_INTERVAL:
            self.index_offsets.append(offset)
            self.index_positions.append(pos)

    def position_for(self, offset: int) -> int:
        """A position at or before the first frame with offset >= `offset`."""
        i = bisect.bisect_right(self.index_offsets, offset) - 1
        return self.index_positions[i] if i >= 0 else 0


def _segment_name(base: int) -> str:
    return f"{base:020d}.log"


class _Partition:
    """One topic partition: append under a lock, lock-free positional reads up to `size`."""

    def __init__(self, topic: str, index: int, directory: Path, *, compacted: bool,
                 fsync: bool, segment_bytes: int, min_compact_garbage: int):
        self.topic = topic
        self.index = index
        self.dir = directory
        self.compacted = compacted
        self.fsync = fsync
        self.segment_bytes = segment_bytes
        self.min_compact_garbage = min_compact_garbage
        self.lock = threading.Lock()
        self.segments: list[_Segment] = []
        self.next_offset = 0
        self.start_offset = 0
        self.epoch = 0  # bumps when positions change under readers (compaction, deletion)
        self.count = 0  # frames physically present
        self.latest: dict[bytes | None, tuple[int, bool]] = {}  # compacted: key -> (offset, tombstone)
        self._readers = 0
        self._retired: list[_Segment] = []
        self.deleted = False
        directory.mkdir(parents=True, exist_ok=True)
        self._open()

    # -- open / recovery ----------------------------------------------------------------
    def _open(self) -> None:
        self._recover_swap()
        names = sorted(p for p in self.dir.iterdir() if p.suffix == ".log")
        segments: list[_Segment] = []
        for i, path in enumerate(names):
            base = int(path.stem)
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            size = os.fstat(fd).st_size
            seg = _Segment(path, base, fd, size)
            last = [-1]

            def visit(pos: int, fsize: int, offset: int, key: bytes | None, tomb: bool,
                      seg: _Segment = seg, last: list[int] = last) -> None:
                seg.add_index(offset, pos)
                last[0] = offset
                if self.compacted:
                    self.latest[key] = (offset, tomb)
                self.count += 1

            valid = _scan(fd, size, verify=True, visit=visit, keys=self.compacted)
            if valid < size:
                if i != len(names) - 1:
                    os.close(fd)
                    for s in segments:
                        os.close(s.fd)
                    raise TransportError(
                        f"corrupt record at byte {valid} of {path} (not the log's tail); "
                        "move the segment away to recover what follows it")
                log.warning("Truncating torn tail of %s: %d byte(s) after position %d",
                            path, size - valid, valid)
                os.ftruncate(fd, valid)
                seg.size = valid
            self.next_offset = last[0] + 1 if last[0] >= 0 else max(self.next_offset, base)
            segments.append(seg)
        if not segments:
            segments.append(self._new_segment(0))
        self.segments = segments
        self.start_offset = self._first_offset()
        if self.compacted and self.garbage() > max(self.min_compact_garbage, self.live()):
            self._compact_locked()

    def _first_offset(self) -> int:
        for seg in self.segments:
            if seg.size:
                return seg.index_offsets[0] if seg.index_offsets else seg.base
        return self.next_offset

    def _recover_swap(self) -> None:
        """Finish a compaction that died between writing its result and swapping it in."""
        for p in self.dir.glob("*.cleaned"):
            p.unlink()
        swaps = list(self.dir.glob("*.swap"))
        if swaps:
            for p in self.dir.glob("*.log"):
                p.unlink()
            for p in swaps:
                p.rename(p.with_suffix(""))

    def _new_segment(self, base: int) -> _Segment:
        path = self.dir / _segment_name(base)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        if self.fsync:
            fsync_dir(self.dir)
        return _Segment(path, base, fd, os.fstat(fd).st_size)

    # -- append --------------------------------------------------------------------------
    def append(self, items: Sequence[tuple[int, bytes | None, bytes | None, HeaderList]]) -> int:
        """Write records in one buffer; returns the first offset. Raises TransportError."""
        with self.lock:
            self._check_writable()
            if self.compacted and any(k is None for _, k, _, _ in items):
                raise TransportError(
                    f"compacted topic {self.topic} requires a key on every record")
            base = self.next_offset
            self._write_locked(*_encode_rows(base, items))
            if self.compacted:
                for i, (_, k, v, _) in enumerate(items):
                    self.latest[k] = (base + i, v is None)
                if self.garbage() > max(self.min_compact_garbage, self.live()):
                    self._compact_locked()
            return base

    def append_columns(self, timestamp: int, values: pa.Array, headers: HeaderColumns) -> int:
        """Write keyless rows given as columns in one buffer; returns the first offset."""
        with self.lock:
            self._check_writable()
            if self.compacted:
                raise TransportError(
                    f"compacted topic {self.topic} requires a key on every record")
            base = self.next_offset
            encoded = _encode_columns(base, timestamp, values, headers)
            if encoded is None:  # a null somewhere: the per-row encoder
                rows, row_headers = column_rows(values, headers)
                encoded = _encode_rows(base, ((timestamp, None, v, h) for v, h
                                              in zip(rows, row_headers, strict=True)))
            self._write_locked(*encoded)
            return base

    def _check_writable(self) -> None:
        if self.deleted:
            raise TransportError(f"topic {self.topic} was deleted")

    def _write_locked(self, buf: bytes | pa.Buffer, starts: Sequence[int]) -> None:
        """Append encoded frames (`starts`: where each begins in `buf`) to the active
        segment, index them and publish them to readers; on failure the segment is cut
        back to where it was."""
        seg = self.segments[-1]
        if seg.size >= self.segment_bytes:
            seg = self._roll()
        start = seg.size
        view = memoryview(buf)
        try:
            written = 0
            while written < len(view):
                written += os.write(seg.fd, view[written:])
            if self.fsync:
                os.fsync(seg.fd)
        except OSError as e:
            with contextlib.suppress(OSError):
                os.ftruncate(seg.fd, start)
            raise TransportError(
                f"cannot append to {self.topic}-{self.index} in {self.dir}: {e}") from e
        base, n = self.next_offset, len(starts)
        offsets, positions = seg.index_offsets, seg.index_positions
        next_entry = positions[-1] + INDEX_INTERVAL - start if positions else 0
        i = bisect.bisect_left(starts, next_entry)
        while i < n:  # an entry at the first frame at least INDEX_INTERVAL after the last
            pos = int(starts[i])
            offsets.append(base + i)
            positions.append(start + pos)
            i = bisect.bisect_left(starts, pos + INDEX_INTERVAL, i + 1)
        self.next_offset = base + n
        self.count += n
        seg.size = start + len(view)  # publish to readers last

    def _roll(self) -> _Segment:
        seg = self._new_segment(self.next_offset)
        self.segments = [*self.segments, seg]
        return seg

    # -- compaction ------------------------------------------------------------------------
    def live(self) -> int:
        return sum(1 for _, tomb in self.latest.values() if not tomb)

    def garbage(self) -> int:
        return self.count - self.live()

    def compact(self) -> None:
        with self.lock:
            if self.compacted:
                self._compact_locked()

    def _compact_locked(self) -> None:
        """Keep the last value per key and drop tombstones; offsets are kept, gaps appear.

        The newest frame always stays, so the next offset survives a reopen.
        """
        keep: list[tuple[_Segment, _Frame]] = []
        last = self.next_offset - 1
        latest = self.latest
        for seg in self.segments:
            def visit(pos: int, fsize: int, offset: int, key: bytes | None, tomb: bool,
                      seg: _Segment = seg) -> None:
                cur = latest.get(key)
                if offset == last or (cur is not None and cur[0] == offset and not cur[1]):
                    keep.append((seg, _Frame(pos, fsize, offset, key, tomb)))

            _scan(seg.fd, seg.size, verify=False, visit=visit, keys=True)
        base = self.segments[0].base
        cleaned = self.dir / (_segment_name(base) + ".cleaned")
        fd = os.open(cleaned, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        new = _Segment(self.dir / _segment_name(base), base, fd, 0)
        pos = 0
        chunks: list[bytes] = []
        pending = 0
        for seg, f in keep:
            chunks.append(os.pread(seg.fd, f.size, f.pos))
            new.add_index(f.offset, pos)
            pos += f.size
            pending += f.size
            if pending >= READ_CHUNK:
                os.write(fd, b"".join(chunks))
                chunks, pending = [], 0
        if chunks:
            os.write(fd, b"".join(chunks))
        os.fsync(fd)
        swap = self.dir / (_segment_name(base) + ".swap")
        os.rename(cleaned, swap)
        fsync_dir(self.dir)
        old = self.segments
        for seg in old:
            seg.path.unlink(missing_ok=True)
        os.rename(swap, new.path)
        fsync_dir(self.dir)
        new.size = pos
        self.segments = [new]
        self.count = len(keep)
        self.latest = {f.key: (f.offset, f.tombstone) for _, f in keep}
        self.start_offset = keep[0][1].offset if keep else self.next_offset
        self.epoch += 1
        self._retire(old)

    # -- reads ---------------------------------------------------------------------------
    def _retire(self, segments: Iterable[_Segment]) -> None:
        self._retired.extend(segments)
        self._close_retired()

    def _close_retired(self) -> None:
        if self._readers == 0 and self._retired:
            for seg in self._retired:
                with contextlib.suppress(OSError):
                    os.close(seg.fd)
            self._retired = []

    def read(self, offset: int, max_records: int, hint: tuple[int, int, int, int] | None,
             out: list[LogRecord]) -> tuple[int, tuple[int, int, int, int] | None]:
        """Append up to max_records from `offset` to `out`; returns (next offset, hint).

        The hint (epoch, segment base, position, offset) saves an index lookup when the
        next read starts where this one stopped.
        """
        topic, part = self.topic, self.index
        want = len(out) + max_records

        def decode(buf: bytes, off: int, single: bool) -> tuple[int, int]:
            return _decode(buf, topic, part, off, 1 if single else want - len(out), out)

        return self._walk(offset, hint, READ_CHUNK, decode, lambda: len(out) < want)

    def read_columns(self, offset: int, max_records: int,
                     hint: tuple[int, int, int, int] | None
                     ) -> tuple[int, tuple[int, int, int, int] | None, RecordColumns | None]:
        """Up to max_records from `offset` as columns, cut from one read buffer (fewer
        when it holds fewer): (next offset, hint, columns).

        The buffer is sized for max_records frames of the partition's average size, since
        the columns' headers keep it alive for as long as a sink holds the batch.
        """
        topic, part = self.topic, self.index
        found: list[RecordColumns] = []
        average = sum(seg.size for seg in self.segments) // max(self.count, 1)
        chunk = min(COLUMN_READ_CHUNK, max(READ_CHUNK, average * max_records * 5 // 4))

        def decode(buf: bytes, off: int, single: bool) -> tuple[int, int]:
            used, cols = _decode_columns(buf, topic, part, off, 1 if single else max_records)
            if cols is None:
                return used, off
            found.append(cols)
            return used, cols.offsets[-1] + 1

        offset, hint = self._walk(offset, hint, chunk, decode, lambda: not found)
        return offset, hint, found[0] if found else None

    def _walk(self, offset: int, hint: tuple[int, int, int, int] | None, chunk: int,
              decode: Callable[[bytes, int, bool], tuple[int, int]],
              more: Callable[[], bool]) -> tuple[int, tuple[int, int, int, int] | None]:
        """Hand the log from `offset` on to `decode(buf, offset, single)` -> (bytes used,
        next offset) a buffer at a time while more() holds; `single`: the buffer is one
        frame larger than `chunk`."""
        with self.lock:
            if self.deleted:
                return offset, None
            segments = self.segments
            epoch = self.epoch
            end = self.next_offset
            self._readers += 1
        try:
            if offset >= end:
                return offset, hint
            if hint is not None and hint[0] == epoch and hint[3] == offset:
                si, pos = _hint_locate(segments, hint)
            else:
                si, pos = _locate(segments, offset)
            while more():
                seg = segments[si]
                limit = seg.size
                if pos >= limit:
                    if si + 1 < len(segments):  # a rolled segment: its size is final
                        si, pos = si + 1, 0
                        continue
                    break
                buf = os.pread(seg.fd, min(limit - pos, chunk), pos)
                used, offset = decode(buf, offset, False)
                if used == 0:  # a frame larger than one chunk
                    length = _PRE.unpack_from(buf, 0)[0]
                    buf = os.pread(seg.fd, _PRE_SIZE + length, pos)
                    used, offset = decode(buf, offset, True)
                    if used == 0:
                        break
                pos += used
            return offset, (epoch, segments[si].base, pos, offset)
        finally:
            with self.lock:
                self._readers -= 1
                self._close_retired()

    def close(self) -> None:
        with self.lock:
            self.deleted = True
            self._retire(self.segments)
            self.segments = []


def _locate(segments: list[_Segment], offset: int) -> tuple[int, int]:
    bases = [s.base for s in segments]
    si = max(0, bisect.bisect_right(bases, offset) - 1)
    return si, segments[si].position_for(offset)


def _hint_locate(segments: list[_Segment], hint: tuple[int, int, int, int]) -> tuple[int, int]:
    _, base, pos, offset = hint
    for i in range(len(segments) - 1, -1, -1):
        if segments[i].base == base:
            return i, pos
    return _locate(segments, offset)


class _Topic:
    def __init__(self, name: str, partitions: list[_Partition], config: Mapping[str, str]):
        self.name = name
        self.partitions = partitions
        self.config = dict(config)


# -- groups --------------------------------------------------------------------------------------


# A cooperative assignor needs two rounds to move a partition; more than this is a bug in a
# custom assignor that keeps revoking, and the group stops rebalancing rather than spin.
MAX_ROUNDS_PER_REBALANCE = 16


class _Member:
    """One consumer in a group: its protocol half and what the last rebalance gave it."""

    def __init__(self, member_id: str, handler: ConsumerHandler):
        self.id = member_id
        self.handler = handler
        self.assignment: frozenset[GroupTopicPartition] = frozenset()
        self.generation = -1  # the generation of `assignment` (Kafka: -1 before the first)
        # Bumped by every rebalance that makes an eager member give up all it holds;
        # `seen_epoch` is the last one its consumer picked up.
        self.revoke_all_epoch = 0
        self.seen_epoch = 0

    def target(self) -> set[TopicPartition]:
        return {TopicPartition(tp.topic, tp.partition) for tp in self.assignment}


class _Group:
    """In-process group coordinator state; guarded by the transport's group lock."""

    def __init__(self, group_id: str):
        self.id = group_id
        self.generation = 0
        self.protocol: str | None = None  # the assignor the group selected
        self.members: dict[str, _Member] = {}  # join order: the first is the leader
        self.watched: dict[str, int] = {}  # subscribed topics' partitions at the last round
        self.owners: dict[TopicPartition, str] = {}  # who holds a partition (claimed, not revoked)


# -- clients ------------------------------------------------------------------------------------


class EmbeddedProducer(Producer):
    """Buffers `send`s and writes them in one buffer per partition on poll/flush (or when full)."""

    def __init__(self, transport: EmbeddedTransport, config: Mapping[str, Any]):
        self._t = transport
        self._lock = threading.Lock()
        self._buffer: list[tuple[ProducerRecord, DeliveryCallback | None]] = []
        self._done: deque[tuple[DeliveryCallback, RecordMetadata | None, BaseException | None]] = deque()
        self._sticky: dict[str, int] = {}
        self._max_buffer = int(config.get("batch.num.records", 5000))
        self._closed = False

    def send(self, record: ProducerRecord, on_delivery: DeliveryCallback | None = None) -> None:
        if self._closed:
            raise TransportError("producer is closed")
        with self._lock:
            buffer = self._buffer
            buffer.append((record, on_delivery))
            if len(buffer) >= self._max_buffer:
                self._buffer = []
                self._write(buffer)

    def send_many(self, records: Sequence[ProducerRecord],
                  on_delivery: DeliveryCallback | None = None) -> None:
        if self._closed:
            raise TransportError("producer is closed")
        with self._lock:
            batch = [*self._buffer, *((r, on_delivery) for r in records)]
            self._buffer = []
            self._write(batch)

    def send_batch(self, topic: str, values: pa.Array, on_delivery: BatchCallback,
                   *, headers: HeaderColumns = ()) -> None:
        """One append for the whole batch: keyless rows take one (sticky) partition."""
        if self._closed:
            raise TransportError("producer is closed")
        with self._lock:
            if self._buffer:  # what was sent before goes first
                batch, self._buffer = self._buffer, []
                self._write(batch)
            n = len(values)
            try:
                count = self._t.partition_count(topic, create=True)
                p = self._sticky.get(topic)
                if p is None or p >= count:
                    p = self._t.next_sticky(topic, count)
                self._sticky[topic] = (p + 1) % count
                base = self._t.append_columns(topic, p, self._t.now_ms(), values, headers)
                result = BatchDelivery({}, {(topic, p): base + n})
            except Exception as e:
                result = BatchDelivery(dict.fromkeys(range(n), e), {})
            self._done.append((lambda md, err: on_delivery(result), None, None))

    def _write_buffered(self) -> None:
        with self._lock:
            if self._buffer:
                batch, self._buffer = self._buffer, []
                self._write(batch)

    def _write(self, batch: list[tuple[ProducerRecord, DeliveryCallback | None]]) -> None:
        now = self._t.now_ms()
        done = self._done
        counts: dict[str, int] = {}
        groups: dict[tuple[str, int], list[tuple[ProducerRecord, DeliveryCallback | None]]] = {}
        sticky = self._sticky
        for item in batch:
            rec = item[0]
            topic = rec.topic
            n = counts.get(topic)
            if n is None:
                try:
                    n = counts[topic] = self._t.partition_count(topic, create=True)
                except Exception as e:
                    if item[1] is not None:
                        done.append((item[1], None, e))
                    continue
            p = rec.partition
            if p is None:
                if rec.key is not None:
                    p = (murmur2(rec.key) & 0x7FFFFFFF) % n
                else:
                    p = sticky.get(topic)
                    if p is None or p >= n:
                        p = sticky[topic] = self._t.next_sticky(topic, n)
            elif not 0 <= p < n:
                if item[1] is not None:
                    done.append((item[1], None, TransportError(
                        f"partition {p} of {topic} does not exist ({n} partition(s))")))
                continue
            g = groups.get((topic, p))
            if g is None:
                g = groups[(topic, p)] = []
            g.append(item)
        for topic, n in counts.items():  # the next batch of keyless records moves on
            if topic in sticky:
                sticky[topic] = (sticky[topic] + 1) % n
        for (topic, p), recs in groups.items():
            items = [(now if r.timestamp is None else r.timestamp, r.key, r.value, r.headers)
                     for r, _ in recs]
            try:
                base = self._t.append(topic, p, items)
            except Exception as e:
                for _, cb in recs:
                    if cb is not None:
                        done.append((cb, None, e))
                continue
            for i, (_, cb) in enumerate(recs):
                if cb is not None:
                    done.append((cb, RecordMetadata(topic, p, base + i, items[i][0]), None))

    def _fire(self) -> int:
        fired = 0
        while True:
            try:
                cb, md, err = self._done.popleft()
            except IndexError:
                return fired
            cb(md, err)
            fired += 1

    def poll(self, timeout: float = 0.0) -> int:
        self._write_buffered()
        return self._fire()

    def flush(self, timeout: float | None = None) -> int:
        self._write_buffered()
        self._fire()
        return 0

    def close(self) -> None:
        if not self._closed:
            self.flush()
            self._closed = True


class _Fetch:
    __slots__ = ("hint", "offset")

    def __init__(self, offset: int):
        self.offset = offset
        self.hint: Any = None


class EmbeddedConsumer(Consumer):
    def __init__(self, transport: EmbeddedTransport, group_id: str | None,
                 config: Mapping[str, Any]):
        self._t = transport
        self.group_id = group_id
        self._lock = threading.RLock()
        self._fetch: dict[TopicPartition, _Fetch] = {}
        self._paused: set[TopicPartition] = set()
        self._member_id: str | None = None
        self._topics: list[str] = []
        self._on_assign: RebalanceCallback | None = None
        self._on_revoke: RebalanceCallback | None = None
        self._reset = str(config.get("auto.offset.reset", "earliest")).lower()
        if self._reset not in ("earliest", "latest", "none"):
            raise ConfigError(f"auto.offset.reset must be earliest, latest or none, not {self._reset!r}",
                              key="auto.offset.reset")
        # Resolved now so a bad strategy fails the consumer at once, not at its first rebalance.
        self._assignors = assignment_strategy(
            config.get(ASSIGNMENT_STRATEGY_CONFIG, transport.assignment_strategy))
        self._revoke_all_epoch = 0
        self._rr = 0
        self._closed = False

    @property
    def member_id(self) -> str | None:
        return self._member_id

    # -- membership --------------------------------------------------------------------
    def subscribe(self, topics: Sequence[str], *, on_assign: RebalanceCallback | None = None,
                  on_revoke: RebalanceCallback | None = None) -> None:
        with self._lock:
            self._check_open()
            if self._member_id is None and self._fetch:
                raise TransportError("consumer already has a manual assignment")
            if self.group_id is None:
                self.group_id = f"kctl-anonymous-{uuid.uuid4().hex[:12]}"
            self._topics = list(topics)
            self._on_assign, self._on_revoke = on_assign, on_revoke
            if self._member_id is None:
                self._member_id = self._t._join(self.group_id, self._topics, self._assignors)
            else:
                self._t._resubscribe(self.group_id, self._member_id, self._topics)

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        with self._lock:
            self._check_open()
            if self._member_id is not None:
                raise TransportError("consumer is subscribed to a group; cannot assign manually")
            old = self._fetch
            self._fetch = {tp: old.get(tp) or _Fetch(self._initial_position(tp)) for tp in partitions}
            self._paused &= set(self._fetch)

    def assignment(self) -> set[TopicPartition]:
        return set(self._fetch)

    def _initial_position(self, tp: TopicPartition) -> int:
        if self.group_id is not None:
            committed = self._t._committed(self.group_id, tp)
            if committed is not None:
                return committed
        if self._reset == "latest":
            return self._t.end_offset(tp)
        if self._reset == "none":
            raise TransportError(f"no committed offset for {tp} in group {self.group_id} "
                                 "and auto.offset.reset=none")
        return self._t.start_offset(tp)

    def _sync_group(self) -> None:
        """Apply the group's current assignment: revoke first (everything held, after an
        eager rebalance), then claim what is free."""
        if self._member_id is None or self.group_id is None:
            return
        target, epoch = self._t._target(self.group_id, self._member_id)
        current = set(self._fetch)
        if epoch != self._revoke_all_epoch:
            self._revoke_all_epoch = epoch
            revoked = sorted(current)
        else:
            revoked = sorted(current - target)
        if revoked:
            try:
                if self._on_revoke is not None:
                    self._on_revoke(revoked)
            finally:
                for tp in revoked:
                    self._fetch.pop(tp, None)
                    self._paused.discard(tp)
                self._t._release(self.group_id, self._member_id, revoked)
        gained = self._t._claim(self.group_id, self._member_id, target - set(self._fetch))
        if gained:
            for tp in gained:
                self._fetch[tp] = _Fetch(self._initial_position(tp))
            if self._on_assign is not None:
                self._on_assign(gained)

    # -- fetching ----------------------------------------------------------------------
    def poll_batch(self, max_records: int, timeout: float) -> list[LogRecord]:
        return self._poll(lambda: self._read(max_records), timeout)

    def poll_columns(self, max_records: int, timeout: float) -> list[RecordColumns]:
        return self._poll(lambda: self._read_columns(max_records), timeout)

    def _poll(self, read: Callable[[], list[Any]], timeout: float) -> list[Any]:
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._lock:
            self._check_open()
            while True:
                seq = self._t._seq
                self._sync_group()
                out = read()
                if out:
                    return out
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return out
                self._t._wait(seq, remaining)

    def _turn(self) -> list[tuple[TopicPartition, _Partition, _Fetch]]:
        """The fetchable partitions, starting at the next one each poll (round robin)."""
        parts = [tp for tp in self._fetch if tp not in self._paused]
        if not parts:
            return []
        self._rr = (self._rr + 1) % len(parts)
        out = []
        for tp in parts[self._rr:] + parts[:self._rr]:
            partition = self._t._partition(tp)
            if partition is not None:
                out.append((tp, partition, self._fetch[tp]))
        return out

    def _read(self, max_records: int) -> list[LogRecord]:
        out: list[LogRecord] = []
        for _, partition, f in self._turn():
            if len(out) >= max_records:
                break
            f.offset, f.hint = partition.read(f.offset, max_records - len(out), f.hint, out)
        return out

    def _read_columns(self, max_records: int) -> list[RecordColumns]:
        out: list[RecordColumns] = []
        left = max_records
        for _, partition, f in self._turn():
            if left <= 0:
                break
            f.offset, f.hint, cols = partition.read_columns(f.offset, left, f.hint)
            if cols is not None:
                out.append(cols)
                left -= len(cols)
        return out

    def seek(self, tp: TopicPartition, offset: int) -> None:
        with self._lock:
            f = self._fetch.get(tp)
            if f is None:
                raise TransportError(f"cannot seek {tp}: not assigned to this consumer")
            f.offset, f.hint = max(0, offset), None

    def position(self, tp: TopicPartition) -> int:
        with self._lock:
            f = self._fetch.get(tp)
            if f is None:
                raise TransportError(f"no position for {tp}: not assigned to this consumer")
            return f.offset

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        if self.group_id is None:
            return {tp: None for tp in partitions}
        return {tp: self._t._committed(self.group_id, tp) for tp in partitions}

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        if self.group_id is None:
            raise TransportError("cannot commit offsets without a group id")
        if offsets:
            self._t._commit(self.group_id, offsets)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            self._paused |= {tp for tp in partitions if tp in self._fetch}

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            self._paused -= set(partitions)

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self._t.end_offset(tp) for tp in partitions}

    def close(self) -> None:
        """Leave the group without callbacks; the remaining members take over its partitions."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._member_id is not None and self.group_id is not None:
                self._t._leave(self.group_id, self._member_id)
            self._fetch = {}

    def _check_open(self) -> None:
        if self._closed:
            raise TransportError("consumer is closed")


class EmbeddedAdmin(Admin):
    def __init__(self, transport: EmbeddedTransport):
        self._t = transport

    def create_topics(self, specs: Sequence[TopicSpec], *, exist_ok: bool = True) -> None:
        for spec in specs:
            self._t.create_topic(spec, exist_ok=exist_ok)

    def list_topics(self) -> dict[str, int]:
        return {name: n for name, n in self._t.topics().items() if not name.startswith("__")}

    def describe_topic(self, name: str) -> TopicSpec:
        return self._t.describe_topic(name)

    def delete_topics(self, names: Sequence[str]) -> None:
        for name in names:
            self._t.delete_topic(name)

    def describe_groups(self, group_ids: Sequence[str]) -> dict[str, Any]:
        return {g: self._t._describe_group(g) for g in group_ids}

    def delete_group_offsets(self, group_id: str, partitions: Sequence[TopicPartition]) -> None:
        self._t._delete_offsets(group_id, partitions)


# -- the transport ------------------------------------------------------------------------------


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
        self._groups_lock = threading.RLock()
        self._groups: dict[str, _Group] = {}
        self._member_seq = itertools.count()
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
        self._rebalance_groups()

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
        self._rebalance_groups()
        self._notify()

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

    def _partition(self, tp: TopicPartition) -> _Partition | None:
        t = self._topics.get(tp.topic)
        if t is None or not 0 <= tp.partition < len(t.partitions):
            return None
        return t.partitions[tp.partition]

    def append(self, topic: str, partition: int,
               items: Sequence[tuple[int, bytes | None, bytes | None, HeaderList]]) -> int:
        p = self._partition(TopicPartition(topic, partition))
        if p is None:
            raise TransportError(f"unknown topic partition {topic}-{partition}")
        base = p.append(items)
        self._notify()
        return base

    def append_columns(self, topic: str, partition: int, timestamp: int, values: pa.Array,
                       headers: HeaderColumns = ()) -> int:
        """Append keyless rows given as columns (see `Producer.send_batch`)."""
        p = self._partition(TopicPartition(topic, partition))
        if p is None:
            raise TransportError(f"unknown topic partition {topic}-{partition}")
        base = p.append_columns(timestamp, values, headers)
        self._notify()
        return base

    def end_offset(self, tp: TopicPartition) -> int:
        p = self._partition(tp)
        return 0 if p is None else p.next_offset

    def start_offset(self, tp: TopicPartition) -> int:
        p = self._partition(tp)
        return 0 if p is None else p.start_offset

    def compact(self, topic: str) -> None:
        """Compact every partition of a compacted topic now (tests, tools)."""
        t = self._topics.get(topic)
        if t is None:
            raise NotFoundError(f"Topic {topic} does not exist")
        for p in t.partitions:
            p.compact()
        self._notify()

    def _notify(self) -> None:
        with self._cond:
            self._seq += 1
            self._cond.notify_all()

    def _wait(self, seq: int, timeout: float) -> None:
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

    def _commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        now = self.now_ms()
        items = [(now, _offset_key(group, tp), json.dumps({"offset": int(o)}).encode(), ())
                 for tp, o in offsets.items()]
        with self._offsets_lock:
            self.append(OFFSETS_TOPIC, 0, items)
            for tp, o in offsets.items():
                self._offsets[(group, tp.topic, tp.partition)] = int(o)

    def _delete_offsets(self, group: str, partitions: Sequence[TopicPartition]) -> None:
        now = self.now_ms()
        with self._offsets_lock:
            present = [tp for tp in partitions if (group, tp.topic, tp.partition) in self._offsets]
            if not present:
                return
            self.append(OFFSETS_TOPIC, 0, [(now, _offset_key(group, tp), None, ()) for tp in present])
            for tp in present:
                self._offsets.pop((group, tp.topic, tp.partition), None)

    def _committed(self, group: str, tp: TopicPartition) -> int | None:
        return self._offsets.get((group, tp.topic, tp.partition))

    # -- groups ------------------------------------------------------------------------------
    def _join(self, group_id: str, topics: Sequence[str],
              assignors: Sequence[ConsumerPartitionAssignor]) -> str:
        member = f"{group_id}-member-{next(self._member_seq):08d}"
        handler = ConsumerHandler(member, topics, assignors, cluster=self.topics)
        with self._groups_lock:
            g = self._groups.setdefault(group_id, _Group(group_id))
            offered = [m.handler.assignor_names for m in g.members.values()]
            if select_protocol([*offered, handler.assignor_names]) is None:
                if not g.members:
                    del self._groups[group_id]
                raise TransportError(
                    f"INCONSISTENT_GROUP_PROTOCOL: consumer group {group_id!r} uses "
                    f"{g.protocol}; this consumer's {ASSIGNMENT_STRATEGY_CONFIG} offers "
                    f"{', '.join(handler.assignor_names)}")
            g.members[member] = _Member(member, handler)
            self._rebalance(g)
        self._notify()
        return member

    def _resubscribe(self, group_id: str, member: str, topics: Sequence[str]) -> None:
        with self._groups_lock:
            g = self._groups[group_id]
            handler = g.members[member].handler
            if handler.topics == tuple(topics):
                return  # as in Kafka: the same subscription is no reason to rebalance
            handler.topics = tuple(topics)
            self._rebalance(g)
        self._notify()

    def _leave(self, group_id: str, member: str) -> None:
        with self._groups_lock:
            g = self._groups.get(group_id)
            if g is None:
                return
            g.members.pop(member, None)
            for tp in [tp for tp, m in g.owners.items() if m == member]:
                del g.owners[tp]
            if g.members:
                self._rebalance(g)
            else:
                del self._groups[group_id]
        self._notify()

    def _rebalance_groups(self) -> None:
        """Topics changed: rebalance the groups whose subscribed topics' partitions changed
        (the leader's metadata check; an eager rebalance for nothing would stop everyone)."""
        with self._groups_lock:
            for g in self._groups.values():
                if self._watched(g) != g.watched:
                    self._rebalance(g)
        self._notify()

    def _watched(self, g: _Group) -> dict[str, int]:
        subscribed = {t for m in g.members.values() for t in m.handler.topics}
        return {t: n for t, n in self.topics().items() if t in subscribed}

    def _rebalance(self, g: _Group) -> None:
        """Every member rejoins at once: the group runs Kafka's join and sync through each
        member's ConsumerHandler, again while a cooperative member revoked something."""
        for _ in range(MAX_ROUNDS_PER_REBALANCE):
            members = list(g.members.values())
            protocol = select_protocol([m.handler.assignor_names for m in members])
            assert protocol is not None, "checked when the member joined"
            g.generation += 1
            g.protocol = protocol
            g.watched = self._watched(g)
            for m in members:
                if m.handler.is_eager(protocol):  # onJoinPrepare: eager members revoke all
                    m.assignment = frozenset()
                    m.revoke_all_epoch += 1
            joined = [
                JoinMember(m.id, m.id, dict(m.handler.metadata(m.assignment, m.generation))[protocol])
                for m in members]
            leader = members[0]
            assignments = leader.handler.assign(
                leader=leader.id, protocol=protocol, generation=g.generation, members=joined,
                now_ms=self.now_ms(), last_completed_generation=leader.generation)
            rejoin = False
            for m in members:
                outcome = m.handler.on_assignment(
                    protocol=protocol, assignment=assignments.get(m.id), owned=m.assignment,
                    generation=g.generation, now_ms=self.now_ms())
                m.assignment = outcome.owned
                m.generation = g.generation
                rejoin = rejoin or outcome.rejoin
            if not rejoin:
                return
        log.warning("consumer group %s: assignor %s still revokes after %d rounds; "
                    "stopping here", g.id, g.protocol, MAX_ROUNDS_PER_REBALANCE)

    def _target(self, group_id: str, member: str) -> tuple[set[TopicPartition], int]:
        """The member's assignment and its eager revoke-everything epoch."""
        with self._groups_lock:
            g = self._groups.get(group_id)
            m = g.members.get(member) if g else None
            if m is None:
                return set(), 0
            m.seen_epoch = m.revoke_all_epoch
            return m.target(), m.revoke_all_epoch

    def _claim(self, group_id: str, member: str,
               wanted: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Take the partitions no other member still holds (their revoke callbacks ran)."""
        with self._groups_lock:
            g = self._groups.get(group_id)
            if g is None:
                return []
            got = sorted(tp for tp in wanted if g.owners.get(tp, member) == member)
            for tp in got:
                g.owners[tp] = member
            return got

    def _release(self, group_id: str, member: str, partitions: Iterable[TopicPartition]) -> None:
        with self._groups_lock:
            g = self._groups.get(group_id)
            if g is not None:
                for tp in partitions:
                    if g.owners.get(tp) == member:
                        del g.owners[tp]
        self._notify()

    def _describe_group(self, group_id: str) -> dict[str, Any]:
        with self._groups_lock:
            g = self._groups.get(group_id)
            if g is None:
                return {"group_id": group_id, "state": "Empty", "generation": 0, "members": {}}
            members = {}
            for m in g.members.values():
                owned = sorted(tp for tp, o in g.owners.items() if o == m.id)
                members[m.id] = {"subscription": list(m.handler.topics),
                                 "assignment": [str(tp) for tp in sorted(m.assignment)],
                                 "owned": [str(tp) for tp in owned],
                                 "assignors": list(m.handler.assignor_names)}
            stable = all(m.seen_epoch == m.revoke_all_epoch
                         and m.target() == {tp for tp, o in g.owners.items() if o == m.id}
                         for m in g.members.values())
            return {"group_id": group_id, "state": "Stable" if stable else "PreparingRebalance",
                    "generation": g.generation, "protocol": g.protocol, "members": members}

    # -- factory ----------------------------------------------------------------------------
    def producer(self, config: Mapping[str, Any] | None = None) -> Producer:
        self._check_open()
        return EmbeddedProducer(self, config or {})

    def consumer(self, group_id: str | None, config: Mapping[str, Any] | None = None) -> Consumer:
        self._check_open()
        return EmbeddedConsumer(self, group_id, config or {})

    def admin(self) -> Admin:
        return EmbeddedAdmin(self)

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
        self._notify()
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
