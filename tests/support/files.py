"""Reading what a FileSink has committed while it is still writing."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def committed_lines(outdir: Path, suffix: str = ".json") -> list[str]:
    """Lines of committed output files, in path order.

    The sink writes under dot-directories and renames or deletes them while we read, so
    those are pruned; os.walk ignores directories that vanish under it, and a file that
    disappears between listing and reading was a temporary one.
    """
    lines: list[str] = []
    for root, dirs, names in os.walk(outdir):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if name.endswith(suffix) and not name.startswith("."):
                with contextlib.suppress(FileNotFoundError):
                    lines.extend((Path(root) / name).read_text().splitlines())
    return lines
