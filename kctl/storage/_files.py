"""Atomic whole-file rewrites shared by the file-backed stores."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from kctl.errors import ConfigError


def atomic_write_json(path: Path, data: Any, *, fsync: bool) -> None:
    """Write to a temp file in the same directory, then rename over `path`.

    A reader (or a process restarted after kill -9) sees the old or the new file, never a
    mix; fsync additionally survives power loss.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    payload = json.dumps(data, indent=1, sort_keys=False).encode()
    with open(tmp, "wb") as f:
        f.write(payload)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if fsync:
        with contextlib.suppress(OSError):
            fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def read_json(path: Path, default: Any) -> Any:
    if not path.exists():
        return default
    try:
        return json.loads(path.read_bytes())
    except (ValueError, OSError) as e:
        raise ConfigError(f"cannot read {path}: {e} (restore it or move it away)",
                          source=str(path)) from e
