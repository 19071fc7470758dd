"""`kctl connector offsets ...`: read and change a connector's committed offsets (the
offsets REST API, KIP-875)."""

from __future__ import annotations

import json
from typing import Any

import typer

from kctl.cli import render
from kctl.cli.common import (
    ConnectorArg,
    Output,
    OutputOpt,
    client,
    console,
    done,
    fail,
    fmt,
    parse_input,
    read_input,
    run,
)
from kctl.exit_status import ExitStatus

app = typer.Typer(help="Read and change a connector's offsets.", no_args_is_help=True)

OFFSETS_SHAPE = ('{"offsets": [{"partition": {...}, "offset": {...}}, ...]} '
                 "or a list of such entries")


def load_offsets(file: str) -> dict[str, Any]:
    """The body of PATCH /connectors/{name}/offsets, checked here so a wrong shape is clear."""
    text, source = read_input(file)
    body = parse_input(text, source)
    if isinstance(body, list):
        body = {"offsets": body}
    entries = body.get("offsets") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        raise fail(f"{source}: expected {OFFSETS_SHAPE}, got {type(body).__name__}",
                   ExitStatus.USAGE)
    for i, entry in enumerate(entries):
        if not (isinstance(entry, dict) and isinstance(entry.get("partition"), dict)
                and (entry.get("offset") is None or isinstance(entry["offset"], dict))):
            raise fail(f"{source}: offsets[{i}] must be {{\"partition\": {{...}}, "
                       f"\"offset\": {{...}} or null}}, got {json.dumps(entry)}",
                       ExitStatus.USAGE)
    return body


@app.command("get")
def offsets_get(name: str = ConnectorArg, output: Output | None = OutputOpt) -> None:
    """Committed offsets of a connector."""
    data = run(lambda: client().get(f"/connectors/{name}/offsets"))
    if not render.dump(data, fmt(output), console):
        console.print(render.table(["partition", "offset"],
                                   ((json.dumps(o["partition"], sort_keys=True),
                                     json.dumps(o["offset"], sort_keys=True))
                                    for o in data["offsets"])))


def _stop_first(name: str) -> str:
    return (f"connector {name} must be STOPPED before its offsets change: "
            f"run `kctl connector stop {name}` first")


@app.command("set")
def offsets_set(name: str = ConnectorArg, file: str = typer.Argument(
        ..., help='JSON/YAML {"offsets": [{"partition": ..., "offset": ...}]} or - for stdin'),
        output: Output | None = OutputOpt) -> None:
    """Alter offsets of a STOPPED connector."""
    body = load_offsets(file)
    c = client()
    data = run(lambda: c.patch(f"/connectors/{name}/offsets", json=body),
               hints={"STOPPED state": (_stop_first(name), ExitStatus.CONFLICT)})
    done(data["message"], output, fetch=lambda: c.get(f"/connectors/{name}/offsets"))


@app.command("reset")
def offsets_reset(name: str = ConnectorArg, output: Output | None = OutputOpt) -> None:
    """Forget all offsets of a STOPPED connector."""
    c = client()
    data = run(lambda: c.delete(f"/connectors/{name}/offsets"),
               hints={"STOPPED state": (_stop_first(name), ExitStatus.CONFLICT)})
    done(data["message"], output, fetch=lambda: c.get(f"/connectors/{name}/offsets"))
