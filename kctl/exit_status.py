"""kctl's process exit codes, in one table (as httpie's ExitStatus).

The CLI and the worker process return these and nothing else, so scripts can tell a
failed operation from a mistake in how kctl was called, a missing connector from a
conflicting state, and a worker that is down from one that said no.
"""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    SUCCESS = 0
    # The operation failed: the worker reported an error, a connector is FAILED, a
    # config is invalid (validation found problems), nothing could be replayed, an
    # unexpected error.
    ERROR = 1
    # kctl was called wrongly: an unknown option, unreadable or malformed input.
    USAGE = 2
    # The connector, task, plugin or context named does not exist.
    NOT_FOUND = 3
    # The request conflicts with the current state: a connector that must be stopped
    # first, a name already taken, a rebalance in progress.
    CONFLICT = 4
    # No worker answered at the URL (down, wrong --url / KCTL_URL / context, timeout).
    UNREACHABLE = 5
    # Interrupted twice (a second Ctrl-C while the worker stops).
    INTERRUPTED = 130


def describe() -> str:
    """The table as `--help` shows it."""
    return "  ".join(f"{int(s)} {s.name.lower().replace('_', ' ')}" for s in ExitStatus)
