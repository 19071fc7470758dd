"""Rendering REST answers as tables, JSON or YAML.

Values from the worker are shown literally: a config value such as `orders-[a-z]+` or a
trace containing `[/...]` is text, never rich markup (which would hide or choke on it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

STATE_STYLE = {"RUNNING": "green", "FAILED": "bold red", "PAUSED": "yellow",
               "STOPPED": "yellow", "UNASSIGNED": "dim", "RESTARTING": "cyan"}


class _YamlDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Multi-line strings (stack traces) as literal blocks, so their indentation reads as is.
    libyaml's emitter when PyYAML has it: about four times faster on a large DLQ."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_YamlDumper.add_representer(str, _represent_str)


NO_WRAP = 2**31 - 1  # libyaml takes an int width; nothing is that long


def machine_text(data: Any, fmt: str) -> str:
    """JSON or YAML exactly as a program reads it: never wrapped at a width, never coloured."""
    if fmt == "json":
        # json escapes C0 controls itself; DEL and C1 (0x9b is a CSI) only with ensure_ascii
        return _escape_json(json.dumps(data, indent=2, ensure_ascii=False))
    return yaml.dump(data, Dumper=_YamlDumper, sort_keys=False, allow_unicode=True,
                     width=NO_WRAP).rstrip()


def dump(data: Any, fmt: str, console: Console) -> bool:
    """Print json/yaml; returns False when the caller should render a table.

    The text goes to the console's file directly: rich would wrap it at the terminal width
    (80 columns when piped), which breaks a long YAML value into lines that do not parse.
    """
    if fmt in ("json", "yaml"):
        out = console.file
        out.write(machine_text(data, fmt) + "\n")
        out.flush()
        return True
    return False


_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F) if c not in (0x09, 0x0A)}
_CONTROL.update({c: f"\\x{c:02x}" for c in range(0x80, 0xA0)})


_JSON_CONTROL = {c: f"\\u{c:04x}" for c in (0x7F, *range(0x80, 0xA0))}


_JSON_UNSAFE = re.compile("[\x7f-\x9f]")


def _escape_json(text: str) -> str:
    """DEL and C1 controls as \\uXXXX; a search first, since almost no text has any."""
    return text.translate(_JSON_CONTROL) if _JSON_UNSAFE.search(text) else text


def escape_control(text: str) -> str:
    """Control bytes (ESC, NUL, ...) as `\\xNN`: a payload must not drive the user's terminal."""
    return text.translate(_CONTROL)


def cell(value: Any) -> Text:
    """A table cell: styled Text as given, anything else as literal text, controls escaped."""
    if isinstance(value, Text):
        return value
    return Text("" if value is None else escape_control(str(value)))


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None) -> Table:
    t = Table(title=Text(title) if title else None, show_lines=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*(cell(v) for v in r))
    return t


def stream(items: Sequence[Any], fmt: str, out: TextIO) -> None:
    """A JSON array or YAML list written item by item, so a large answer is never held
    twice as one string."""
    if fmt == "json":
        # one item per line: json's C encoder (an indent would take the Python one, 10x slower)
        out.write("[")
        for i, item in enumerate(items):
            line = _escape_json(json.dumps(item, ensure_ascii=False))
            out.write(("," if i else "") + "\n  " + line)
        out.write("\n]\n" if items else "]\n")
    else:
        for item in items:
            out.write(machine_text([item], "yaml") + "\n")
        if not items:
            out.write("[]\n")
    out.flush()


# Above this many rows a table is written as aligned plain text: rich measures every cell
# (7 s for 10k rows of a DLQ here), plain text takes milliseconds.
RICH_TABLE_ROWS = 500


def print_rows(console: Console, columns: Sequence[str], rows: Iterable[Sequence[Any]],
               title: str | None = None) -> None:
    """A table: rich's for a screenful, aligned plain text (as kubectl's) for many rows."""
    rows = [tuple(escape_control("" if v is None else str(v)) for v in r) for r in rows]
    if len(rows) <= RICH_TABLE_ROWS:
        console.print(table(columns, rows, title))
        return
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    out = console.file
    if title:
        out.write(title + "\n")
    out.write("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()
              + "\n")
    for r in rows:
        out.write("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() + "\n")
    out.flush()


def state(s: str) -> Text:
    return Text(s, style=STATE_STYLE.get(s, ""))


def status_table(status: dict[str, Any], show_traces: bool = True) -> Table:
    t = Table(title=Text(f"{status['name']} ({status.get('type', 'unknown')})"))
    t.add_column("kind")
    t.add_column("id")
    t.add_column("state")
    t.add_column("worker")
    t.add_column("trace", overflow="fold")
    c = status["connector"]

    def short(trace: str | None) -> Text:
        if not trace:
            return Text("")
        lines = [ln for ln in trace.strip().splitlines() if ln.strip()]
        return Text(lines[-1] if not show_traces else "\n".join(lines[-6:]))

    t.add_row("connector", cell(status["name"]), state(c["state"]), cell(c.get("worker_id")),
              short(c.get("trace")))
    for task in status.get("tasks", []):
        t.add_row("task", str(task["id"]), state(task["state"]), cell(task.get("worker_id")),
                  short(task.get("trace")))
    return t


def validation_table(errors: dict[str, list[str]]) -> Table:
    return table(["field", "error"], ((k, m) for k, ms in sorted(errors.items()) for m in ms),
                 title="invalid connector configuration")
