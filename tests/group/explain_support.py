"""Helpers the explain tests share: fixed-width rendering and golden files."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from support import golden

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
    golden.check_golden(GOLDEN / name, text)


def handmade(name: str) -> dict[str, Any]:
    """A document written by hand to the issue's contract, independent of the simulator."""
    return json.loads((GOLDEN / f"handmade_{name}.json").read_text(encoding="utf-8"))
