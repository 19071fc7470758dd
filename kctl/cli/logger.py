"""`kctl logger ...`: a worker's log levels at run time (KIP-495's admin/loggers)."""

from __future__ import annotations

import time
from typing import Any

import typer

from kctl.cli import render
from kctl.cli.common import Output, OutputOpt, client, console, done, fmt, run

app = typer.Typer(help="A worker's log levels at run time (KIP-495).", no_args_is_help=True)

LoggerArg = typer.Argument(..., help="A logger name (dotted, e.g. kctl.runtime) or root.")


def _logger_rows(data: dict[str, Any]) -> Any:
    return ((name, entry["level"], "" if entry.get("last_modified") is None else
             time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry["last_modified"] / 1000)))
            for name, entry in data.items())


@app.command("list")
def logger_list(output: Output | None = OutputOpt) -> None:
    """Root and every logger with a level of its own."""
    data = run(lambda: client().get("/admin/loggers"))
    if not render.dump(data, fmt(output), console):
        console.print(render.table(["logger", "level", "last modified"], _logger_rows(data)))


@app.command("get")
def logger_get(name: str = LoggerArg, output: Output | None = OutputOpt) -> None:
    """A logger's effective level."""
    data = run(lambda: client().get(f"/admin/loggers/{name}"))
    if not render.dump(data, fmt(output), console):
        console.print(render.table(["logger", "level", "last modified"],
                                   _logger_rows({name: data})))


@app.command("set")
def logger_set(name: str = LoggerArg, level: str = typer.Argument(
        ..., help="TRACE, DEBUG, INFO, WARN, ERROR, FATAL or OFF"),
        output: Output | None = OutputOpt) -> None:
    """Set a logger's level (and its descendants' that have their own) on the worker."""
    c = client()
    touched = run(lambda: c.put(f"/admin/loggers/{name}", json={"level": level.upper()}))
    done(f"{level.upper()}: {', '.join(touched)}", output, touched)
