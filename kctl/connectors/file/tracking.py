"""Which files the task follows and how far each was read: discovery by identity
(device and inode, so renames and rotations neither repeat nor lose lines), stored
offsets, truncation, copies, deletion, backoff for a file that fails, and the loss counts."""

from __future__ import annotations

import collections
import contextlib
import fnmatch
import hashlib
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO

from kctl.api import Backoff, DataError, SourceRecord, SourceTaskContext, partition_key
from kctl.api.data import STRING_SCHEMA
from kctl.connectors.file._common import list_files, owner_of, watched_dirs

log = logging.getLogger("kctl.connectors.file.source")  # the logger the task always had

FINGERPRINT_BYTES = 1024  # how much of a file's head tells it from another at the same inode
_MAX_BACKOFF_S = 60.0
_MAX_OPEN = 256  # beyond this many files, idle ones are not kept open


@dataclass
class FileState:
    """One file, known by its identity (device and inode): its path may change (rename)
    without it becoming another file, and another file may appear at its path."""

    path: str
    partition: dict[str, str]
    ident: tuple[int, int] = (0, 0)
    position: int = 0
    line: int = 0
    row: int = 0  # parquet: rows already emitted
    complete: bool = False
    header: str | None = None
    fh: BinaryIO | None = None  # kept open: a renamed or deleted file is still readable
    fp: str = ""  # fingerprint of the first fp_len bytes: tells a rewrite from an append
    fp_len: int = 0
    seen: int = 0  # the largest size seen, to say how much a loss cost
    gone: bool = False  # no longer at a path `path` matches (renamed away or deleted)
    idle_since: float | None = None
    failures: int = 0
    retry_at: float = 0.0
    reported: bool = False
    # (fp, fp_len, position, line, bytes unread) before the last truncation: a copy made
    # just before it (copytruncate) continues from there
    before_cut: tuple[str, int, int, int, int] | None = None

    def close(self) -> None:
        fh, self.fh = self.fh, None
        if fh is not None:
            with contextlib.suppress(OSError):
                fh.close()


@dataclass(frozen=True, slots=True)
class FileStats:
    """What the task could not deliver and why, for its status and metrics."""

    truncations: int = 0
    deletions: int = 0
    bytes_lost: int = 0
    unreadable: int = 0
    renames: int = 0


def file_id(st: os.stat_result) -> str:
    return f"{st.st_dev}:{st.st_ino}"


def patterns(value: str) -> list[str]:
    return [p.strip() for p in value.split(",") if p.strip()]


def excluded(path: str, globs: list[str]) -> bool:
    """Whether a file.exclude glob matches the file's name or its full path."""
    name = os.path.basename(path)
    return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(path, p) for p in globs)


def deleted(fh: BinaryIO) -> bool:
    try:
        return os.fstat(fh.fileno()).st_nlink == 0
    except OSError:
        return True


def fingerprint(fh: BinaryIO, n: int) -> str:
    data = os.pread(fh.fileno(), n, 0)
    return hashlib.blake2b(data, digest_size=8).hexdigest() if len(data) == n else ""


class FileTracking:
    """The task's file bookkeeping (a mixin of FileSourceTask, which sets these in start)."""

    context: SourceTaskContext
    path: str
    roots: Any
    format: str
    topic: str
    interval: float
    exclude: list[str]
    close_inactive: float
    tolerance_all: bool
    index: int
    count: int
    _clock: Callable[[], float]
    _stop: threading.Event
    _files: dict[tuple[int, int], FileState]
    _copying: dict[tuple[int, int], int]
    _stats: FileStats
    _file_errors: collections.deque[tuple[SourceRecord, DataError]]
    _next_scan: float
    _round: int
    _parquet: dict[str, Any]
    _skipped: set[str]  # files outside the allowed paths, already warned about

    def _mine(self, ident: str) -> bool:
        # by identity, not name: a renamed file stays with the task that reads it
        return owner_of(ident, self.count) == self.index

    def _excluded(self, path: str) -> bool:
        return excluded(path, self.exclude)

    @property
    def stats(self) -> FileStats:
        """Counts of losses and bad files so far (the log names each one)."""
        return self._stats

    def metrics(self) -> dict[str, int]:
        """The stats as counters for the worker's /metrics (connector-task-metrics)."""
        s = self._stats
        return {"file-truncations-total": s.truncations,
                "file-deleted-unread-total": s.deletions,
                "file-bytes-lost-total": s.bytes_lost,
                "file-unreadable-total": s.unreadable,
                "file-renames-total": s.renames}

    def _count(self, **inc: int) -> None:
        s = self._stats
        self._stats = FileStats(**{k: getattr(s, k) + inc.get(k, 0)
                                   for k in FileStats.__dataclass_fields__})

    def _changes(self) -> tuple[int | None, ...]:
        """A few stats that change when a file appears, goes or grows: the watched
        directories' modification times and the open files' sizes, so an idle task sees
        new lines within QUICK_CHECK_S without listing `path` (poll.interval.ms) each time.
        Modification times move in the kernel's ticks (4-10 ms): a file that appears in the
        tick of the last change waits for the next listing."""
        sig: list[int | None] = []
        for d in watched_dirs(self.path):
            try:
                sig.append(os.stat(d).st_mtime_ns)
            except OSError:
                sig.append(None)
        for st in self._files.values():
            if st.fh is not None:
                try:
                    sig.append(os.fstat(st.fh.fileno()).st_size)
                except (OSError, ValueError):
                    sig.append(None)
        return tuple(sig)

    def _scan(self) -> None:
        """Match the files `path` names to the files already tracked, by identity: a
        known identity at another path was renamed, a known one at no path was renamed
        away or deleted, and a new one resumes from its stored offset (or is a copy)."""
        self._next_scan = self._clock() + self.interval
        listed: dict[tuple[int, int], str] = {}
        sizes: dict[tuple[int, int], int] = {}
        for f in list_files(self.path, self.roots, self._skipped):
            if self._excluded(f):
                continue
            try:
                info = os.stat(f)
            except OSError:  # gone between listing and stat
                continue
            listed[(info.st_dev, info.st_ino)] = f
            sizes[(info.st_dev, info.st_ino)] = info.st_size
        for ident, st in list(self._files.items()):
            f = listed.get(ident)
            if f is not None and st.fh is not None and deleted(st.fh):
                f = None  # the inode was reused by a new file: this one is gone
            if f is None:
                if not st.gone:
                    self._gone(st)
                continue
            if f != st.path:
                log.info("%s was renamed to %s; continuing at byte %d", st.path, f,
                         st.position)
                self._count(renames=1)
                st.path = f
            st.gone = False
            if st.fh is None and not f.endswith(".gz"):  # not open: what it would lose
                st.seen = max(st.seen, sizes[ident])  # (an open one's reads measure it)
        new = [(ident, f) for ident, f in listed.items()
               if ident not in self._files and self._mine(f"{ident[0]}:{ident[1]}")]
        if not new:
            return
        partitions = [{"file": f"{i[0]}:{i[1]}"} for i, _ in new]
        legacy = [{"filename": f} for _, f in new]
        stored = self.context.offset_storage_reader.offsets(partitions + legacy)
        for (ident, f), part, old in zip(new, partitions, legacy, strict=True):
            st = FileState(f, part, ident)
            off = stored.get(partition_key(part))
            if not off and (off := stored.get(partition_key(old))):
                off = {**off, "legacy": True}
            if not self._resume(st, off or {}):
                st.close()  # a copy still being written: look again at the next scan
                continue
            if st.fh is None and not f.endswith(".gz"):
                st.seen = max(st.seen, sizes[ident])
            self._files[ident] = st

    def _resume(self, st: FileState, off: Mapping[str, Any]) -> bool:
        """Continue where the stored offset says, if it is this file's; else from byte 0,
        or where a tracked file left off when this one is its copy (copytruncate)."""
        if self.format == "parquet":
            st.row = int(off.get("row", 0))
            st.complete = bool(off.get("complete", False))
            return True
        if off and self._open(st) is not None and self._matches(st, off):
            st.position = int(off.get("position", 0))
            st.line = int(off.get("line", 0))
            st.fp, st.fp_len = str(off.get("fp", "")), int(off.get("fplen", 0))
            st.seen = st.position
            log.debug("Tracking %s from byte %d (line %d)", st.path, st.position, st.line)
            return True
        if off:
            log.info("%s is a new file at a known place (its first bytes differ from what "
                     "was read there before): reading it from the start", st.path)
        return self._adopt_copy(st)

    def _matches(self, st: FileState, off: Mapping[str, Any]) -> bool:
        assert st.fh is not None
        size = os.fstat(st.fh.fileno()).st_size
        if size < int(off.get("position", 0)) and not st.path.endswith(".gz"):
            return False  # (a .gz file's positions count decompressed bytes)
        n = int(off.get("fplen", 0))
        return off.get("legacy", False) or n == 0 or fingerprint(st.fh, n) == off.get("fp")

    def _adopt_copy(self, st: FileState) -> bool:
        """A new file named after a tracked one (app.log.1 after app.log) that starts with
        the same bytes is a copy of it: continue it where the tracked one is, so a
        copytruncate rotation neither repeats nor loses lines."""
        name = os.path.basename(st.path)
        for other in list(self._files.values()):
            base = os.path.basename(other.path)
            if not name.startswith(base) or name == base or name[len(base)] not in ".-_":
                continue
            for fp, fp_len, position, line, lost in (
                    (other.fp, other.fp_len, other.position, other.line, 0),
                    *([other.before_cut] if other.before_cut else [])):
                if not fp_len or not position or self._open(st) is None:
                    continue
                assert st.fh is not None
                size = os.fstat(st.fh.fileno()).st_size
                if size < position and self._copying.get(st.ident) != size:
                    self._copying[st.ident] = size  # maybe a copy still being written:
                    return False                    # wait while it grows
                if size < position or fingerprint(st.fh, fp_len) != fp:
                    continue
                st.position, st.line, st.seen = position, line, position
                st.fp, st.fp_len = fp, fp_len
                if lost:  # the truncation's loss is what the copy does not have
                    self._count(bytes_lost=-min(lost, size - position))
                    other.before_cut = None
                log.info("%s is a copy of %s: continuing it at byte %d", st.path,
                         other.path, st.position)
                self._copying.pop(st.ident, None)
                return True
        self._copying.pop(st.ident, None)
        return True

    def _open(self, st: FileState) -> BinaryIO | None:
        """The file's handle, opened at its path once (checking it is still this file)."""
        if st.fh is not None:
            return st.fh
        if st.retry_at > self._clock():
            return None
        try:
            fh: BinaryIO = open(st.path, "rb")  # noqa: SIM115 - kept open on purpose
        except OSError as e:
            self._bad_file(st, "reading", e)
            return None
        info = os.fstat(fh.fileno())
        if (info.st_dev, info.st_ino) != st.ident:
            fh.close()  # another file took its path; the next scan sorts it out
            return None
        st.fh = fh
        if st.failures:
            log.info("%s is readable again", st.path)
            st.failures = 0
        return fh

    def _bad_file(self, st: FileState, doing: str, error: BaseException) -> None:
        """One file failing is that file's problem: log it, count it, dead-letter it once
        under errors.tolerance=all, and retry it later with backoff; others keep flowing."""
        st.failures += 1
        delay = Backoff(first=2 * self.interval, cap=_MAX_BACKOFF_S).delay(st.failures)
        st.retry_at = self._clock() + delay
        log.warning("Failed %s %s (attempt %d; retrying in %.1f s): %s", doing, st.path,
                    st.failures, delay, error)
        if st.reported:
            return
        st.reported = True
        self._count(unreadable=1)
        if self.tolerance_all:
            err = DataError(f"Failed {doing} {st.path}: {error}")
            self._file_errors.append((SourceRecord(
                self.topic, None, None, None, STRING_SCHEMA, None,
                source_partition=st.partition,
                source_offset={"path": st.path, "position": st.position, "line": st.line}),
                err))

    def _gone(self, st: FileState) -> None:
        """The file is at no path we read any more: if it is still open, read it to its
        end (a writer may still append to a renamed file); else what was unread is lost."""
        st.gone = True
        st.idle_since = None
        if st.fh is not None:
            what = "deleted" if deleted(st.fh) else "renamed away"
            log.info("%s was %s; reading it to its end through its open handle", st.path, what)
            return
        self._drop(st, "deleted")

    def _drop(self, st: FileState, why: str) -> None:
        lost = max(0, st.seen - st.position) if not st.complete else 0
        if lost and self.format != "parquet":
            log.warning("%s was %s before it was fully read: %d bytes after byte %d were "
                        "never read", st.path, why, lost, st.position)
            self._count(deletions=1, bytes_lost=lost)
        st.close()
        self._files.pop(st.ident, None)
        self._parquet.pop(st.path, None)

    def _idle(self, st: FileState) -> None:
        """Nothing new in a file: forget a deleted one, and a renamed-away one after
        file.close.inactive.ms. With many files, an idle one at its path is closed (and
        opened again, checking its identity, when it is read next)."""
        if not st.gone:
            if len(self._files) > _MAX_OPEN:
                st.close()
            return
        now = self._clock()
        if st.idle_since is None:
            st.idle_since = now
        if st.fh is None or deleted(st.fh) or now - st.idle_since >= self.close_inactive:
            log.info("Done with %s at byte %d", st.path, st.position)
            self._drop(st, "closed")

    def _ordered_files(self) -> list[FileState]:
        """Start at a different file each poll so one big file cannot starve the others."""
        files = list(self._files.values())
        if not files:
            return files
        self._round = (self._round + 1) % len(files)
        return files[self._round:] + files[:self._round]

    def _truncated(self, st: FileState, size: int) -> None:
        """Same file, new content (copytruncate, `: > file`): read it again from byte 0.
        What was in it beyond our position when it was cut is lost, and said so."""
        lost = max(0, st.seen - st.position)
        log.warning("%s was truncated (now %d bytes, read up to byte %d): reading it again "
                    "from the start; %d bytes that were in it were never read (unless a copy "
                    "the rotation made has them)", st.path, size,
                    st.position, lost)
        self._count(truncations=1, bytes_lost=lost)
        st.before_cut = (st.fp, st.fp_len, st.position, st.line, lost)
        st.position = st.line = st.seen = st.fp_len = 0
        st.fp = ""
        st.header = None
