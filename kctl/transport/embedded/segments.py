"""Segments and partitions: append-only segment files with a sparse offset index, reads by
offset, rolling and compaction of compacted topics.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kctl.durable import fsync_dir
from kctl.errors import TransportError
from kctl.transport.base import (
    HeaderColumns,
    HeaderList,
    LogRecord,
    RecordColumns,
    column_rows,
)

if TYPE_CHECKING:
    import pyarrow as pa

from kctl.transport.embedded.frames import (
    _PRE,
    _PRE_SIZE,
    READ_CHUNK,
    _decode,
    _decode_columns,
    _encode_columns,
    _encode_rows,
    _Frame,
    _scan,
)

log = logging.getLogger(__name__)




COLUMN_READ_CHUNK = 16 << 20  # the most a columnar read takes per partition and poll


INDEX_INTERVAL = 1 << 16  # one sparse index entry per 64 KiB of log


SEGMENT_BYTES = 256 << 20


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
    """One topic partition: one writer at a time, lock-free positional reads up to `size`.

    `_writing` serialises writers (appends, compaction, close) for as long as they take;
    `lock` guards only what readers take a snapshot of (the segments, the epoch, the
    readers' count), so a reader never waits for a writer to encode or write a batch.
    """

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
        self._writing = threading.Lock()
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
        with self._writing:
            self._check_writable()
            if self.compacted and any(k is None for _, k, _, _ in items):
                raise TransportError(
                    f"compacted topic {self.topic} requires a key on every record")
            base = self.next_offset
            self._write(*_encode_rows(base, items))
            if self.compacted:
                for i, (_, k, v, _) in enumerate(items):
                    self.latest[k] = (base + i, v is None)
                self._compact_if_due()
            return base

    def append_columns(self, timestamp: int, values: pa.Array, headers: HeaderColumns,
                       keys: pa.Array | None = None) -> int:
        """Write rows given as columns (keyless, or with `keys`) in one buffer; returns the
        first offset."""
        with self._writing:
            self._check_writable()
            if self.compacted and (keys is None or keys.null_count):
                raise TransportError(
                    f"compacted topic {self.topic} requires a key on every record")
            base = self.next_offset
            encoded = _encode_columns(base, timestamp, values, headers, keys)
            row_keys: list[bytes | None] | None = None
            if encoded is None:  # a null somewhere: the per-row encoder
                rows, row_headers = column_rows(values, headers)
                row_keys = keys.to_pylist() if keys is not None else [None] * len(rows)
                encoded = _encode_rows(base, ((timestamp, k, v, h) for k, v, h
                                              in zip(row_keys, rows, row_headers, strict=True)))
            self._write(*encoded)
            if self.compacted and keys is not None:
                row_keys = row_keys if row_keys is not None else keys.to_pylist()
                nulls = values.is_null().to_pylist()
                for i, k in enumerate(row_keys):
                    self.latest[k] = (base + i, nulls[i])
                self._compact_if_due()
            return base

    def _check_writable(self) -> None:
        if self.deleted:
            raise TransportError(f"topic {self.topic} was deleted")

    def _compact_if_due(self) -> None:
        if self.garbage() > max(self.min_compact_garbage, self.live()):
            with self.lock:
                self._compact_locked()

    def _write(self, buf: bytes | pa.Buffer, starts: Sequence[int]) -> None:
        """Append encoded frames (`starts`: where each begins in `buf`) to the active
        segment, index them and publish them to readers; on failure the segment is cut
        back to where it was. Holding `_writing`: readers see nothing past `seg.size`
        until the frames are whole, so only the publishing takes `lock`."""
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
        with self.lock:
            self.next_offset = base + n
            self.count += n
            seg.size = start + len(view)  # publish to readers last

    def _roll(self) -> _Segment:
        seg = self._new_segment(self.next_offset)
        with self.lock:
            self.segments = [*self.segments, seg]
        return seg

    # -- compaction ------------------------------------------------------------------------
    def live(self) -> int:
        return sum(1 for _, tomb in self.latest.values() if not tomb)

    def garbage(self) -> int:
        return self.count - self.live()

    def compact(self) -> None:
        with self._writing, self.lock:
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
        with self._writing, self.lock:
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

