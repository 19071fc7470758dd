"""`kctl dlq ...`: show, replay and purge a connector's dead letter queue."""

from __future__ import annotations

import sys
from typing import Any

import typer
from rich.text import Text

from kctl.cli import render
from kctl.cli.common import (
    ConnectorArg,
    Output,
    OutputOpt,
    client,
    console,
    done,
    err_console,
    fail,
    fmt,
    run,
)
from kctl.exit_status import ExitStatus

app = typer.Typer(help="A connector's dead letter queue.", no_args_is_help=True)

PREVIEW_WIDTH = 120  # characters of a rejected payload a `dlq show` table cell shows


CONTEXT_HEADERS_NOTE = (
    "{n} of these record(s) carry no error context (stage, exception, origin): set "
    "errors.deadletterqueue.context.headers.enable=true on {name} to record it")


def _origin(r: dict[str, Any]) -> str:
    if r.get("source_partition"):
        return f"{r['source_partition']} @ {r['source_offset']}"
    if r.get("topic"):
        return f"{r['topic']}-{r['partition']}@{r['offset']}"
    return ""


@app.command("show")
def dlq_show(name: str = ConnectorArg, limit: int = typer.Option(100, help="Most records shown."),
             output: Output | None = OutputOpt) -> None:
    """Records a connector rejected: when, stage, exception, origin, payload preview."""
    data = run(lambda: client().get(f"/connectors/{name}/dlq", params={"limit": limit}))
    records = data["records"]
    bare = sum(1 for r in records if not r.get("stage"))
    if bare:
        err_console.print(Text(CONTEXT_HEADERS_NOTE.format(n=bare, name=name), style="yellow"),
                          highlight=False, soft_wrap=True)
    if fmt(output) != "table":
        render.stream(records, fmt(output), sys.stdout)
        return
    rows = ((r["time"], r["stage"] or "",
             f"{(r['exception'] or '').rsplit('.', 1)[-1]}: {r['message']}" if r["exception"]
             else "", _origin(r), _preview(r)) for r in records)
    render.print_rows(console, ["time", "stage", "exception", "origin", "payload"], rows,
                      title=f"{name}: {len(records)} rejected record(s)")


def _preview(record: dict[str, Any], width: int = PREVIEW_WIDTH) -> str:
    """What was rejected, for a table cell: the payload of a JsonConverter envelope (its
    schema comes first and would fill the cell), else the value as it is; cut to `width`
    (-o json and yaml show everything)."""
    text = record.get("value_payload") or record.get("value") or ""
    return text if len(text) <= width else text[: width - 1] + "…"


@app.command("replay")
def dlq_replay(name: str = ConnectorArg,
               to: str = typer.Option(None, "--to",
                                      help="Send to this topic instead of the original."),
               output: Output | None = OutputOpt) -> None:
    """Re-send a connector's rejected records (e.g. after fixing a transform); exits 1 when
    there were records and none could be replayed."""
    params = {"to": to} if to else {}
    data = run(lambda: client().post(f"/connectors/{name}/dlq/replay", params=params))
    if fmt(output) != "table":
        render.dump(data, fmt(output), console)
    else:
        console.print(f"{data['replayed']} replayed, {data['skipped']} skipped, "
                      f"{data['failed']} failed (of {data['total']} record(s) in {name}'s DLQ)",
                      highlight=False, markup=False)
        for entry in data["skipped_reasons"]:
            console.print(f"  skipped {entry['count']}: {entry['reason']}", highlight=False,
                          markup=False)
        for entry in data["errors"]:
            console.print(f"  failed {entry['count']}: {entry['error']}", highlight=False,
                          markup=False)
    if data["total"] and not data["replayed"]:
        raise fail(f"nothing in {name}'s DLQ could be replayed", ExitStatus.ERROR)


@app.command("purge")
def dlq_purge(name: str = ConnectorArg,
              yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
              output: Output | None = OutputOpt) -> None:
    """Clear a connector's DLQ (e.g. after a replay): later shows and replays start after
    what it holds now."""
    c = client()
    if not yes:
        if not sys.stdin.isatty():
            raise fail(f"purging {name}'s DLQ needs confirmation: add --yes", ExitStatus.USAGE)
        if not typer.confirm(f"Purge every record in {name}'s DLQ?"):
            raise fail("not purged", ExitStatus.ERROR)
    data = run(lambda: c.delete(f"/connectors/{name}/dlq"))
    done(f"{data['purged']} record(s) purged from {name}'s DLQ", output, data)
