"""`kctl topic ...`: look inside any topic, the embedded log's included, as `kcat -C` does.

Everything goes through the worker's read-only `/topics` REST extension, so it works the
same against a remote worker and on a log no other tool can read; records come in bounded
pages, and `read` asks for the next page from where the last one ended.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import typer

from kctl.cli import render
from kctl.cli.common import Output, OutputOpt, client, console, fail, fmt, run
from kctl.exit_status import ExitStatus

app = typer.Typer(help="Look inside topics: list, describe, read records.",
                  no_args_is_help=True)

TopicArg = typer.Argument(..., help="The topic's name.")
ConnectorOpt = typer.Option(None, "--connector", "-c",
                            help="Decode with this connector's converters.")
PAGE = 1000  # records asked for per request (the worker's cap)
FOLLOW_WAIT_MS = 5000  # how long one request of --follow waits for new records
PREVIEW_WIDTH = 200  # characters of a key or value a table cell shows


@app.command("list")
def topic_list(output: Output | None = OutputOpt) -> None:
    """Every topic of the worker's log, with its partition count."""
    data = run(lambda: client().get("/topics"))
    if render.dump(data["topics"], fmt(output), console):
        return
    render.print_rows(console, ["topic", "partitions"],
                      ((t["name"], t["partitions"]) for t in data["topics"]))


@app.command("describe")
def topic_describe(topic: str = TopicArg, connector: str = ConnectorOpt,
                   value_converter: str = typer.Option(
                       None, "--value-converter", help="Decode values with this converter."),
                   output: Output | None = OutputOpt) -> None:
    """Partitions with start and end offsets, and the value schemas seen (in the first and
    last records of each partition)."""
    params = {k: v for k, v in (("connector", connector),
                                ("value_converter", value_converter)) if v}
    data = run(lambda: client().get(f"/topics/{topic}", params=params))
    if render.dump(data, fmt(output), console):
        return
    total = sum(p["records"] for p in data["partitions"])
    render.print_rows(console, ["partition", "start offset", "end offset", "records"],
                      ((p["partition"], p["start_offset"], p["end_offset"], p["records"])
                       for p in data["partitions"]),
                      title=f"{topic}: {len(data['partitions'])} partition(s), {total} "
                            "record(s)")
    render.print_rows(console, ["version", "id", "first seen", "records", "fields"],
                      ((s["version"], s["id"] or "(none)",
                        f"{s['first_partition']}@{s['first_offset']}", s["records"],
                        _fields(s["schema"])) for s in data["schemas"]),
                      title=f"value schemas seen in {data['records_scanned']} record(s) "
                            f"scanned, decoded by {data['decoded_by']}")


def _fields(schema: dict[str, Any] | None) -> str:
    """A schema on one line: `id:int64, name:string?` for a struct, else its type."""
    if schema is None:
        return "(no schema)"
    if schema.get("type") != "struct":
        return str(schema.get("name") or schema.get("type"))
    return ", ".join(f"{f['field']}:{f.get('name') or f['type']}"
                     f"{'?' if f.get('optional') else ''}" for f in schema.get("fields", []))


def _text(value: Any) -> str:
    """A decoded key or value for a table cell: text as it is, anything else as JSON."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= PREVIEW_WIDTH else text[: PREVIEW_WIDTH - 1] + "…"


def _start(from_beginning: bool, offset: int | None, last: int | None) -> dict[str, Any]:
    chosen = [n for n, on in (("--from-beginning", from_beginning),
                              ("--offset", offset is not None),
                              ("--last", last is not None)) if on]
    if len(chosen) > 1:
        raise fail(f"choose one of {' and '.join(chosen)}", ExitStatus.USAGE)
    if offset is not None:
        return {"from": "offset", "offset": offset}
    if last is not None:
        return {"from": "last", "last": last}
    return {"from": "beginning"}


@app.command("read")
def topic_read(
    topic: str = TopicArg,
    from_beginning: bool = typer.Option(False, "--from-beginning",
                                        help="Read each partition from its start (the "
                                             "default)."),
    offset: int = typer.Option(None, "--offset", min=0,
                               help="Read each partition from this offset."),
    last: int = typer.Option(None, "--last", min=0,
                             help="Read the last N records of each partition."),
    partition: int = typer.Option(None, "--partition", "-p", min=0,
                                  help="Only this partition."),
    max_records: int = typer.Option(None, "--max", "-n", min=1,
                                    help="Stop after this many records."),
    follow: bool = typer.Option(False, "--follow", "-f",
                                help="Keep reading new records as they come (Ctrl-C stops)."),
    connector: str = ConnectorOpt,
    key_converter: str = typer.Option(None, "--key-converter",
                                      help="Decode keys with this converter."),
    value_converter: str = typer.Option(None, "--value-converter",
                                        help="Decode values with this converter."),
    output: Output | None = OutputOpt,
) -> None:
    """Records with partition, offset, timestamp, headers, key and value, decoded by the
    converters of --connector (or those named, or the worker's defaults). -o json prints
    one JSON object per line (as `kcat -J`), -o yaml a list, both as the records come."""
    base: dict[str, Any] = {**_start(from_beginning, offset, last)}
    for k, v in (("partition", partition), ("connector", connector),
                 ("key_converter", key_converter), ("value_converter", value_converter)):
        if v is not None:
            base[k] = v
    c = client()
    form = fmt(output)
    shown = 0
    positions: str | None = None
    try:
        while max_records is None or shown < max_records:
            params = {**base, "max": min(PAGE, (max_records or PAGE) - shown)}
            if positions:
                params["positions"] = positions
            if follow and positions is not None:
                params["wait_ms"] = FOLLOW_WAIT_MS
            page = run(lambda p=params: c.get(f"/topics/{topic}/records", params=p))
            _emit(page["records"], form, topic if shown == 0 else None)
            shown += len(page["records"])
            positions = ",".join(f"{p}:{o}" for p, o in sorted(page["next"].items(),
                                                                key=lambda kv: int(kv[0])))
            if not page["more"] and not follow:
                break
    except KeyboardInterrupt:  # --follow ends here
        pass
    if shown == 0 and form == "table" and not follow:
        console.print(f"no records in {topic} from there", highlight=False, markup=False)


def _emit(records: list[dict[str, Any]], form: str, title: str | None) -> None:
    out = sys.stdout
    if form == "json":
        for r in records:
            out.write(render._escape_json(json.dumps(r, ensure_ascii=False)) + "\n")
    elif form == "yaml":
        for r in records:
            out.write(render.machine_text([r], "yaml") + "\n")
    elif records:
        render.print_rows(console, ["partition", "offset", "time", "headers", "key", "value"],
                          ((r["partition"], r["offset"], r["time"],
                            ",".join(f"{k}={v}" for k, v in r["headers"]), _text(r["key"]),
                            _text(r["value"])) for r in records), title=title)
    out.flush()
