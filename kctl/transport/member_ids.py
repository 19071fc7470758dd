"""The member ids a worker's group members last held, kept under `state.dir`.

A worker that starts again (after Ctrl-C, a crash or a machine restart) joins each group with
a member id its previous process held there, when it has one, instead of an empty one: a
coordinator that still knows that member takes the new process for it (no rebalance waits
for the old process's session to expire); one that does not answers UNKNOWN_MEMBER_ID and
the member joins as a new one, one round trip later. Kafka's coordinator handles both.

It matters most after a full stop: a coordinator that keeps a group re-forming under a
leader that has left (the test broker does, see CONTRIBUTING.md) hands the leadership back
when that member id joins again, so the group forms once the workers that held it return.

One file per worker (`group-members.json`: group id -> member ids, the one that last led the
group first). A member takes the first id no other member of this process holds, replaces it when the coordinator gives it another, and
gives it back (still on file) when it closes. The process that uses the file holds a lock
on it (`group-members.lock`): a second worker started with the same `state.dir` keeps no
ids, so two live processes never join as one member.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import threading
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = ["MemberIds"]

FILE_NAME = "group-members.json"
LOCK_NAME = "group-members.lock"


class MemberIds:
    def __init__(self, state_dir: Path):
        self.path = state_dir / FILE_NAME
        self._lock = threading.Lock()
        self._in_use: set[tuple[str, str]] = set()
        self._lock_fd: int | None = None
        self._owned: bool | None = None  # None: not tried yet

    def _own(self) -> bool:
        """Whether this process holds the file's lock (taken on first use, kept until exit)."""
        if self._owned is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path.parent / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                log.info("member ids not kept in %s: %s", self.path, e)
                self._owned = False
                return False
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                log.info("member ids not kept: another process uses %s", self.path.parent)
                self._owned = False
                return False
            self._lock_fd, self._owned = fd, True
        return self._owned

    def _read(self) -> dict[str, list[str]]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(g): [str(m) for m in ids if m] for g, ids in data.items()
                if isinstance(ids, list)}

    def _write(self, data: dict[str, list[str]]) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({g: ids for g, ids in sorted(data.items()) if ids},
                                      indent=1))
            os.replace(tmp, self.path)
        except OSError as e:  # a member id not kept costs a rejoin, nothing more
            log.info("member ids not kept in %s: %s", self.path, e)

    def take(self, group_id: str) -> str:
        """A member id held in `group_id` before that no member of this process holds now
        ('' when there is none)."""
        with self._lock:
            if not self._own():
                return ""
            for member_id in self._read().get(group_id, []):
                if (group_id, member_id) not in self._in_use:
                    self._in_use.add((group_id, member_id))
                    return member_id
            return ""

    def claim(self, group_id: str, member_id: str) -> bool:
        """Take this id if it is on file and no member of this process holds it."""
        with self._lock:
            if not member_id or not self._own() or (group_id, member_id) in self._in_use \
                    or member_id not in self._read().get(group_id, []):
                return False
            self._in_use.add((group_id, member_id))
            return True

    def replace(self, group_id: str, old: str, new: str, *, leads: bool = False) -> None:
        """A member's id changed from `old` to `new` ('' for none); `leads`: it leads the
        group's generation, so it goes first (the next process's first member of this group
        takes it)."""
        with self._lock:
            if not self._own():
                return
            data = self._read()
            ids = [m for m in data.get(group_id, []) if m not in (old, new)]
            self._in_use.discard((group_id, old))
            if new:
                self._in_use.add((group_id, new))
                if leads:
                    ids.insert(0, new)
                else:
                    ids.append(new)
            if ids != data.get(group_id, []):
                data[group_id] = ids
                self._write(data)

    def give_back(self, group_id: str, member_id: str) -> None:
        """The member closed: its id stays on file for the next member of this group."""
        with self._lock, contextlib.suppress(KeyError):
            self._in_use.remove((group_id, member_id))

    def close(self) -> None:
        """Release the file's lock (the process exiting does too)."""
        with self._lock:
            if self._lock_fd is not None:
                os.close(self._lock_fd)
            self._lock_fd, self._owned = None, None
            self._in_use.clear()
