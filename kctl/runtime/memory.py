"""Giving memory back once a pipeline goes idle.

A batch of 100k records passes through a few hundred MB of Arrow buffers and Python
objects. Freed, they stay with the process: pyarrow's allocator keeps its pages for reuse
and glibc's malloc keeps freed arenas, so an idle worker still held 250-380 MB after a
pipeline. A task that has moved records and then found nothing for a while releases both
once; the next batch allocates again, which costs far less than the batch itself.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import sys
from collections.abc import Callable

log = logging.getLogger(__name__)

IDLE_AFTER_S = 5.0  # idle this long after moving records: release

_libc: ctypes.CDLL | bool | None = None


def _malloc_trim() -> None:
    global _libc
    if _libc is None:
        try:
            name = ctypes.util.find_library("c") if sys.platform.startswith("linux") else None
            _libc = ctypes.CDLL(name) if name else False
            if _libc and not hasattr(_libc, "malloc_trim"):
                _libc = False
        except OSError:
            _libc = False
    if _libc:
        _libc.malloc_trim(0)  # type: ignore[union-attr]


def release_unused() -> None:
    """Collect garbage cycles, then hand free memory back to the OS (Arrow's pool, malloc)."""
    gc.collect()
    try:
        if "pyarrow" in sys.modules:
            sys.modules["pyarrow"].default_memory_pool().release_unused()
        _malloc_trim()
    except Exception as e:  # best effort: never a task's failure
        log.debug("releasing unused memory failed: %s", e)


class IdleRelease:
    """Calls `release` once per idle period: after records moved, then `after` seconds
    without any."""

    def __init__(self, clock: Callable[[], float], after: float = IDLE_AFTER_S,
                 release: Callable[[], None] = release_unused):
        self.clock, self.after, self.release = clock, after, release
        self._last_moved: float | None = None

    def tick(self, moved: int) -> None:
        now = self.clock()
        if moved:
            self._last_moved = now
        elif self._last_moved is not None and now - self._last_moved >= self.after:
            self._last_moved = None
            self.release()
