"""Reading what a FileSink has committed while it is still writing."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from kctl.api import TopicPartition
from kctl.connectors.file.sink import committed_files


def output_files(outdir: Path, suffix: str = ".json") -> list[Path]:
    """Committed output files, in path order, while a sink may be writing.

    The sink writes under dot-directories and renames or deletes them while we list, so
    those are pruned (a glob walks into them and fails when one vanishes); os.walk ignores
    directories that vanish under it.
    """
    found: list[Path] = []
    for root, dirs, names in os.walk(outdir):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [Path(root) / n for n in sorted(names)
                  if n.endswith(suffix) and not n.startswith(".")]
    return found


def committed_lines(outdir: Path, suffix: str = ".json") -> list[str]:
    """Lines of committed output files, in path order (a file that disappears between
    listing and reading was a temporary one)."""
    lines: list[str] = []
    for path in output_files(outdir, suffix):
        with contextlib.suppress(FileNotFoundError):
            lines.extend(path.read_text().splitlines())
    return lines


def partition_lines(outdir: Path, tp: TopicPartition) -> list[str]:
    """The lines of a partition's committed files, in offset order (a file that vanished
    between listing and reading was replaced: the next read sees its successor)."""
    lines: list[str] = []
    for _, _, path in committed_files(str(outdir), tp):
        with contextlib.suppress(FileNotFoundError):
            lines.extend(Path(path).read_text().splitlines())
    return lines
