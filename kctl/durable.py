"""Durable whole-file rewrites, shared by the embedded log and the file-backed stores."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kctl.errors import ConfigError


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in `path` survive power loss (best effort: some
    filesystems refuse to open or fsync a directory)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, fsync: bool) -> None:
    """Write to a temp file in the same directory, then rename over `path`.

    A reader (or a process restarted after kill -9) sees the old or the new file, never a
    mix; fsync additionally survives power loss.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if fsync:
        fsync_dir(path.parent)


def atomic_write_json(path: Path, data: Any, *, fsync: bool) -> None:
    atomic_write(path, json.dumps(data, indent=1, sort_keys=False).encode(), fsync=fsync)


def read_json(path: Path, default: Any) -> Any:
    if not path.exists():
        return default
    try:
        return json.loads(path.read_bytes())
    except (ValueError, OSError) as e:
        raise ConfigError(f"cannot read {path}: {e} (restore it or move it away)",
                          source=str(path)) from e
