"""Reading files' new complete lines: seeking to the tracked position, gzip, CRLF, the
byte and line budgets of a poll, and strict decoding (a line not in file.encoding becomes a
MalformedLine, never altered)."""

from __future__ import annotations

import bisect
import gzip
import itertools
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import BinaryIO

import pyarrow as pa

from kctl.connectors.file.tracking import FINGERPRINT_BYTES, FileState, fingerprint

log = logging.getLogger("kctl.connectors.file.source")  # the logger the task always had

_READ_CHUNK = 8 << 20


@dataclass(slots=True)
class Chunk:
    """Complete lines of one file read in one go, as columns: each line's text, its
    number, and the byte position where the file continues after it."""

    state: FileState
    texts: pa.Array
    lines: list[int]
    ends: list[int]
    bad: MalformedLine | None = None  # a line that could not be decoded: nothing else
    start: int = 0  # where the chunk begins in its file, and the line before it
    start_line: int = 0

    def __len__(self) -> int:
        return len(self.lines)

    def keep(self, mask: pa.Array) -> None:
        self.texts = self.texts.filter(mask)
        flags = mask.to_pylist()
        self.lines = [x for x, k in zip(self.lines, flags, strict=True) if k]
        self.ends = [x for x, k in zip(self.ends, flags, strict=True) if k]


@dataclass(frozen=True, slots=True)
class MalformedLine:
    """A line that gives no record (malformed, undecodable, or conflicting with the
    schema): everything a DLQ or an error message needs."""

    filename: str
    line: int
    position: int
    text: str
    format: str
    end: int = 0  # where the file continues after this line
    partition: Mapping[str, str] | None = None
    fp: str = ""
    fplen: int = 0
    problem: str = ""  # set when the line is not malformed but undecodable
    conflict: str = ""  # set when the line is valid but its types cannot join the schema's

    def describe(self) -> str:
        preview = self.text if len(self.text) <= 200 else self.text[:200] + "..."
        if self.conflict:
            return (f"The {self.format} line {self.line} in {self.filename} conflicts with "
                    f"the schema: {self.conflict}: {preview!r}")
        if self.problem:
            return (f"Malformed {self.format} line {self.line} in {self.filename} "
                    f"({self.problem}): {preview!r}")
        return f"Malformed {self.format} line {self.line} in {self.filename}: {preview!r}"


class LineReading:
    """Lines out of tracked files (a mixin of FileSourceTask, over FileTracking)."""

    format: str
    encoding: str
    utf8: bool
    _clock: Callable[[], float]
    _stop: threading.Event
    _gz: dict[tuple[int, int], bytes]
    # from FileTracking
    _open: Callable[[FileState], BinaryIO | None]
    _truncated: Callable[[FileState, int], None]
    _idle: Callable[[FileState], None]
    _bad_file: Callable[[FileState, str, BaseException], None]

    def _read_chunk(self, st: FileState, budget: int, byte_budget: int) -> Chunk | None:
        """Up to `budget` complete lines after st.position, stopping after the line that
        reaches `byte_budget` bytes; a trailing partial line waits. A file that fails to
        read is that file's problem (reported, retried later), not the task's."""
        try:
            return self._read_open(st, budget, byte_budget)
        except (OSError, ValueError) as e:  # ValueError: its handle was closed by stop()
            st.close()
            if not self._stop.is_set():
                self._bad_file(st, "reading", e)
            return None

    def _read_open(self, st: FileState, budget: int, byte_budget: int) -> Chunk | None:
        if st.retry_at > self._clock():  # failed lately: wait for its backoff
            return None
        fh = self._open(st)
        if fh is None:
            return None
        if st.path.endswith(".gz"):
            return self._read_gz(st, fh, budget, byte_budget)
        size = os.fstat(fh.fileno()).st_size
        if size < st.position or (st.fp_len and size > st.position
                                  and fingerprint(fh, st.fp_len) != st.fp):
            self._truncated(st, size)
        st.seen = max(st.seen, size)
        if size == st.position:
            self._idle(st)
            return None
        st.idle_since = None
        chunk = self._lines(st, fh, budget, byte_budget)
        if chunk is not None and st.fp_len < FINGERPRINT_BYTES and st.position > st.fp_len:
            st.fp_len = min(FINGERPRINT_BYTES, st.position)
            st.fp = fingerprint(fh, st.fp_len)
        return chunk

    def _read_gz(self, st: FileState, fh: BinaryIO, budget: int,
                 byte_budget: int) -> Chunk | None:
        """A compressed (rotated) file is read whole once it decompresses completely; its
        offsets count decompressed bytes."""
        if st.complete:
            self._idle(st)
            return None
        data = self._gz.get(st.ident)
        if data is None:
            try:
                fh.seek(0)
                data = gzip.decompress(fh.read())
            except (EOFError, OSError, gzip.BadGzipFile) as e:  # still being written
                log.debug("Cannot decompress %s yet: %s", st.path, e)
                return None
            self._gz[st.ident] = data
            st.fp_len = min(FINGERPRINT_BYTES, os.fstat(fh.fileno()).st_size)
            st.fp = fingerprint(fh, st.fp_len)
        import io

        chunk = self._lines(st, io.BytesIO(data), budget, byte_budget)  # type: ignore[arg-type]
        if st.position >= len(data) or chunk is None:
            st.complete = True
            self._gz.pop(st.ident, None)
            if st.position < len(data):
                log.warning("%s ends without a newline: its last %d bytes are not a line",
                            st.path, len(data) - st.position)
        return chunk

    def _lines(self, st: FileState, fh: BinaryIO, budget: int,
               byte_budget: int) -> Chunk | None:
        raw: list[bytes] = []
        crlf = False
        fh.seek(st.position)
        tail = b""
        taken = 0
        while len(raw) < budget and taken < byte_budget:
            data = fh.read(min(_READ_CHUNK, max(byte_budget - taken, 1 << 16)))
            if not data:
                break
            crlf = crlf or b"\r" in data
            parts = (tail + data).split(b"\n")
            tail = parts.pop()  # no newline yet: not a complete line
            parts = parts[:budget - len(raw)]
            raw.extend(parts)
            taken += sum(map(len, parts)) + len(parts)
        if not raw:
            return None
        ends = list(itertools.accumulate((len(r) + 1 for r in raw), initial=st.position))[1:]
        if ends[-1] - st.position > byte_budget:  # keep the lines within it (at least one)
            keep = max(1, bisect.bisect_right(ends, st.position + byte_budget))
            raw, ends = raw[:keep], ends[:keep]
        if crlf:
            raw = [r[:-1] if r.endswith(b"\r") else r for r in raw]
        try:
            if not self.utf8:
                raise UnicodeError
            texts = pa.array(raw, pa.binary()).cast(pa.string())
        except (pa.ArrowInvalid, UnicodeError):  # decode line by line, strictly
            decoded: list[str] = []
            for r in raw:
                try:
                    decoded.append(r.decode(self.encoding))
                except UnicodeDecodeError as e:
                    if decoded:  # the lines before it now; it comes next, on its own
                        raw, ends = raw[:len(decoded)], ends[:len(decoded)]
                        break
                    return self._undecodable(st, r, ends[0], e)
            texts = pa.array(decoded, pa.string())
        first = st.line + 1
        start = st.position
        st.position, st.line = ends[-1], st.line + len(raw)
        return Chunk(st, texts, list(range(first, first + len(raw))), ends, None, start,
                      first - 1)

    def _undecodable(self, st: FileState, raw: bytes, end: int,
                     error: UnicodeDecodeError) -> Chunk:
        """A line that is not in file.encoding: a chunk of no lines carrying it as malformed
        (never replaced silently), the file continuing after it."""
        st.line += 1
        start, st.position = st.position, end
        text = raw.decode(self.encoding, errors="backslashreplace")
        bad = MalformedLine(st.path, st.line, start, text, self.format, end, st.partition,
                            st.fp, st.fp_len,
                            problem=f"not valid {self.encoding} ({error.reason} at byte "
                                    f"{error.start} of the line)")
        return Chunk(st, pa.array([], pa.string()), [], [], bad)
