"""`kctl plugins list`: the connector plugins a worker can run."""

from __future__ import annotations

import typer

from kctl.cli import render
from kctl.cli.common import Output, OutputOpt, client, console, fmt, run

app = typer.Typer(help="Connector plugins the worker knows.", no_args_is_help=True)


@app.command("list")
def plugins_list(output: Output | None = OutputOpt) -> None:
    """Connector plugins the worker can run."""
    data = run(lambda: client().get("/connector-plugins"))
    if not render.dump(data, fmt(output), console):
        console.print(render.table(["class", "type", "version"],
                                   ((p["class"], p["type"], p["version"]) for p in data)))
