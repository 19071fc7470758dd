"""Paths on the worker's host a connector may touch (the worker's
`file.connector.allowed.paths`), so a connector config sent over REST cannot read or write
anywhere the worker's user can.

A connector names the config keys that are local paths (`Connector.local_paths`); the worker
refuses a config whose paths resolve (`..` and symlinks followed) outside the allowed
directories, and hands the directories to the tasks under `ALLOWED_PATHS_PROP`, so a task
that finds files later (a glob, a directory) skips those a symlink leads out of.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Mapping
from typing import Any

ALLOWED_PATHS_PROP = "kctl.file.allowed.paths"


def allowed_roots(props: Mapping[str, Any]) -> list[str]:
    """The allowed directories a task was given (empty: no restriction)."""
    return [p for p in str(props.get(ALLOWED_PATHS_PROP) or "").split(",") if p]


def within(path: str, roots: Iterable[str]) -> bool:
    """Whether `path`, with `..` and every symlink resolved, lies under one of `roots`."""
    real = os.path.realpath(os.path.expanduser(path))
    for root in roots:
        base = os.path.realpath(os.path.expanduser(root))
        if real == base or real.startswith(base.rstrip(os.sep) + os.sep):
            return True
    return False


def path_problem(path: str, roots: Iterable[str]) -> str | None:
    """Why `path` (a file, a directory or a glob) is not allowed, or None when it is.
    For a glob, the directory before its first wildcard must be allowed."""
    roots = list(roots)
    if not roots:
        return None
    expanded = os.path.expanduser(path)
    if not os.path.isabs(expanded):
        return f"path {path} must be absolute (file.connector.allowed.paths is set)"
    fixed = expanded
    if glob.has_magic(expanded):
        parts = expanded.split(os.sep)
        first = next(i for i, p in enumerate(parts) if glob.has_magic(p))
        fixed = os.sep.join(parts[:first]) or os.sep
    if within(fixed, roots):
        return None
    real = os.path.realpath(fixed)
    how = f" (it resolves to {real})" if real != fixed.rstrip(os.sep) else ""
    return (f"path {path} is outside the directories this worker allows connectors to use"
            f"{how}; file.connector.allowed.paths: {', '.join(roots)}")
