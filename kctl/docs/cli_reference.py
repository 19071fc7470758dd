"""The CLI reference, generated from the typer app: every command, argument and option with
its help text, as `kctl ... --help` shows them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

_MARKUP = re.compile(r"\[/?(?:bold|dim|italic|red|green|yellow|cyan|magenta|blue)\]")


def _text(text: str | None) -> str:
    """Help text as markdown: rich's markup dropped, `<` escaped outside code spans."""
    plain = _MARKUP.sub("", (text or "").strip())
    parts = plain.split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;") for i, p in enumerate(parts))


def _cell(text: str) -> str:
    return " ".join(_text(text).split()).replace("|", "\\|")


def _walk(command: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    yield path, command
    for name in sorted(getattr(command, "commands", {}) or {}):
        sub = command.commands[name]
        if not getattr(sub, "hidden", False):
            yield from _walk(sub, [*path, name])


def _default(param: Any) -> str:
    default = param.default
    if getattr(param, "is_flag", False) or default is None or default == () or callable(default):
        return ""
    return f"`{default}`"


def _usage(path: list[str], command: Any) -> str:
    pieces = [" ".join(path)]
    if any(not p.hidden and not p.required for p in command.params
           if type(p).__name__.endswith("Option")):
        pieces.append("[OPTIONS]")
    for param in command.params:
        if type(param).__name__.endswith("Argument"):
            name = param.name.upper()
            if getattr(param, "nargs", 1) == -1:
                name += "..."
            pieces.append(name if param.required else f"[{name}]")
    if getattr(command, "commands", None):
        pieces.append("COMMAND [ARGS]...")
    return " ".join(pieces)


def _params(command: Any) -> list[str]:
    rows = []
    for param in command.params:
        if getattr(param, "hidden", False) or param.name in ("install_completion",
                                                                 "show_completion"):
            continue
        if type(param).__name__.endswith("Argument"):
            names = f"`{param.name.upper()}`"
        else:
            names = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
        required = "yes" if param.required else ""
        rows.append(f"| {names} | {_cell(getattr(param, 'help', '') or '')} | "
                    f"{_default(param)} | {required} |")
    if not rows:
        return []
    return ["| argument or option | description | default | required |",
            "| --- | --- | --- | --- |", *rows, ""]


def render_cli_reference() -> str:
    import typer

    from kctl.cli.main import app

    root = typer.main.get_command(app)
    out = [
        "# CLI reference\n",
        "Generated from the CLI by `python -m kctl.docs`: do not edit by hand. Every command "
        "prints the same with `--help`. The global options go before or after the "
        "subcommand; exit statuses are in [Operating](../operating.md#exit-statuses).\n",
    ]
    for path, command in _walk(root, ["kctl"]):
        level = "#" * min(len(path) + 1, 4)
        out.append(f"{level} `{' '.join(path)}`\n")
        if command.help:
            out.append(_text(command.help) + "\n")
        out.append(f"```\n{_usage(path, command)}\n```\n")
        params = _params(command)
        if params:
            out.append("\n".join(params))
    return "\n".join(out).rstrip() + "\n"
