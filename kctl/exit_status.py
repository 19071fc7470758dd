"""kctl's process exit codes, in one table (as httpie's ExitStatus).

The CLI and the worker process return these and nothing else, so scripts can tell a
failed operation from a mistake in how kctl was called.
"""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    SUCCESS = 0
    # The operation failed: the worker reported an error or is unreachable, a connector is
    # FAILED, a validation found problems, an unexpected error.
    ERROR = 1
    # The request was wrong: usage, unreadable or invalid input, an unknown connector, a
    # conflicting state (a connector that must be stopped first).
    USAGE = 2
    # Interrupted twice (a second Ctrl-C while the worker stops).
    INTERRUPTED = 130
