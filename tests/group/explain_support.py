"""Helpers the explain tests share: fixed-width rendering and golden files."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

GOLDEN = Path(__file__).parent / "golden"
WIDTH = 100


def plain_console() -> Console:
    """What goldens are rendered with: fixed width, no colour, no terminal detection."""
    return Console(
        width=WIDTH,
        color_system=None,
        record=True,
        file=io.StringIO(),
        force_terminal=False,
        legacy_windows=False,
        emoji=False,
        highlight=False,
    )


def rendered(draw: Callable[[Console], None]) -> str:
    console = plain_console()
    draw(console)
    text = console.export_text(styles=False)
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def check_golden(name: str, text: str) -> None:
    """Compare with tests/group/golden/<name>; KCTL_UPDATE_GOLDEN=1 rewrites it instead."""
    path = GOLDEN / name
    if os.environ.get("KCTL_UPDATE_GOLDEN") == "1" or not path.exists():
        path.write_text(text, encoding="utf-8")
        if os.environ.get("KCTL_UPDATE_GOLDEN") != "1":
            raise AssertionError(f"golden {name} did not exist; written, review it and rerun")
        return
    expected = path.read_text(encoding="utf-8")
    assert text == expected, (
        f"rendering differs from golden {name} (KCTL_UPDATE_GOLDEN=1 to accept)"
    )


def handmade(name: str) -> dict[str, Any]:
    """A document written by hand to the issue's contract, independent of the simulator."""
    return json.loads((GOLDEN / f"handmade_{name}.json").read_text(encoding="utf-8"))
