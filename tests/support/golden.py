"""Golden files for rendered output: compare, or rewrite with KCTL_UPDATE_GOLDEN=1."""

from __future__ import annotations

import os
from pathlib import Path


def check_golden(path: Path, text: str) -> None:
    """A missing golden file is written and fails once, so it is reviewed before it counts."""
    update = os.environ.get("KCTL_UPDATE_GOLDEN") == "1"
    if update or not path.exists():
        path.write_text(text, encoding="utf-8")
        if not update:
            raise AssertionError(f"golden {path.name} did not exist; written, review it and rerun")
        return
    assert text == path.read_text(encoding="utf-8"), (
        f"rendering differs from golden {path} (KCTL_UPDATE_GOLDEN=1 to accept)"
    )
