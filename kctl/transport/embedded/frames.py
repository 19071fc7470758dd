"""Frames: how one record is laid out in a segment file (CRC-checked), written row by row or
column-wise from Arrow, read back as records or as columns; Java's murmur2 partitioner.
"""

from __future__ import annotations

import itertools
import os
import struct
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kctl.transport.base import (
    HeaderColumns,
    HeaderList,
    LogRecord,
    RecordColumns,
)

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa



_PRE = struct.Struct(">II")  # length of the body, crc32 of the body


_BODY = struct.Struct(">qqiiH")  # offset, timestamp, key length, value length, header count


_OFFSET = struct.Struct(">q")  # the body's first field


_HK = struct.Struct(">H")


_HV = struct.Struct(">i")


_PRE_SIZE = _PRE.size


_BODY_SIZE = _BODY.size


READ_CHUNK = 1 << 20
_MAX_FRAME = 1 << 30


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
                    headers: HeaderColumns, keys: pa.Array | None = None
                    ) -> tuple[pa.Buffer, np.ndarray] | None:
    """The frames `_encode` writes for rows (keyless, or with `keys`), built column-wise:
    (bytes, where each frame begins), or None when a row needs the per-row encoder (a null
    key, value or header value, or more bytes than one binary array holds)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(values)
    if values.null_count or any(col.null_count or len(col) != n for _, col in headers):
        return None
    if keys is not None and (keys.null_count or len(keys) != n):
        return None
    if n == 0:
        return pa.py_buffer(b""), np.zeros(0, np.int64)
    values = values.cast(pa.binary())
    cols = [(name.encode(), col.cast(pa.binary())) for name, col in headers]
    value_len = _lengths(values)
    head = np.empty(n, np.dtype(_HEAD))
    head["offset"] = np.arange(base, base + n)
    head["timestamp"] = timestamp
    head["value"] = value_len
    head["headers"] = len(cols)
    body_len = _BODY_SIZE + value_len.astype(np.int64)
    if keys is None:
        head["key"] = -1
        parts: list[Any] = [_fixed(head), values]
    else:
        keys = keys.cast(pa.binary())
        key_len = _lengths(keys)
        head["key"] = key_len
        parts = [_fixed(head), keys, values]
        body_len += key_len
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
    keys = _cut(buf, raw, key_at, key_len) if (key_len >= 0).any() else None
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

