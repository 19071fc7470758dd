"""`kctl rebalance`: simulate group rebalances and explain every round.

Thin on purpose: parse the flags or the scenario file, call the simulator through
``kctl.rebalance.explain``, render. Nothing here talks to a worker, so it answers instantly.
"""

from __future__ import annotations

import re
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console

from kctl.errors import ConfigError, KctlError
from kctl.exit_status import ExitStatus

app = typer.Typer(
    help="Simulate Kafka Connect and consumer group rebalances and explain every round.",
    no_args_is_help=True,
)


class Output(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


class Kind(StrEnum):
    connect = "connect"
    consumer = "consumer"


@app.callback()
def _group() -> None:
    """Simulate group rebalances (the same protocol code live workers run)."""


@app.command()
def explain(
    scenario: Annotated[
        Path | None,
        typer.Option("--scenario", "-s", help="Scenario YAML (see docs/rebalance.md)."),
    ] = None,
    kind: Annotated[Kind, typer.Option(help="Group kind for the flags below.")] = Kind.connect,
    protocol: Annotated[
        str | None,
        typer.Option(
            help="connect: eager|compatible|sessioned; consumer: range|roundrobin|sticky|cooperative-sticky."
        ),
    ] = None,
    workers: Annotated[
        str,
        typer.Option(help="Initial members: a count (w1..wN, C0..CN-1) or comma-separated names."),
    ] = "3",
    connectors: Annotated[int, typer.Option(help="connect: number of connectors ct1..ctN.")] = 2,
    tasks: Annotated[int, typer.Option(help="connect: tasks per connector.")] = 4,
    topics: Annotated[int, typer.Option(help="consumer: number of topics T0..TN-1.")] = 2,
    partitions: Annotated[int, typer.Option(help="consumer: partitions per topic.")] = 3,
    join: Annotated[
        list[str] | None, typer.Option(help="A member that joins (repeatable).")
    ] = None,
    leave: Annotated[
        list[str] | None, typer.Option(help="A member that leaves cleanly (repeatable).")
    ] = None,
    crash: Annotated[
        list[str] | None, typer.Option(help="A member that dies without LeaveGroup (repeatable).")
    ] = None,
    advance: Annotated[
        int | None, typer.Option("--advance", help="Simulated ms to let pass after the events.")
    ] = None,
    delay: Annotated[
        int | None, typer.Option("--delay", help="connect: scheduled.rebalance.max.delay.ms.")
    ] = None,
    session_timeout: Annotated[int | None, typer.Option(help="session.timeout.ms.")] = None,
    compare: Annotated[
        bool, typer.Option("--compare", help="Run eager and cooperative side by side.")
    ] = False,
    trace: Annotated[
        bool, typer.Option("--trace", help="Show the message sequence of each round.")
    ] = False,
    output: Annotated[
        Output | None, typer.Option("--output", "-o", help="table, json or yaml.")
    ] = None,
    width: Annotated[
        int | None, typer.Option(help="Render at this width (default: the terminal's).")
    ] = None,
    generation: Annotated[
        int | None,
        typer.Option("--generation", "-g",
                     help="Explain this generation of the live cluster (from its records)."),
    ] = None,
    replay: Annotated[
        bool,
        typer.Option("--replay", help="With --generation: run the recorded inputs through the "
                                      "same assignor; exit 1 where it differs."),
    ] = False,
    html: Annotated[
        Path | None, typer.Option("--html", help="Also write the timeline to this HTML file.")
    ] = None,
) -> None:
    """Simulate a scenario (or, with --generation, a live cluster's round) and explain each
    rebalance round."""
    from kctl.rebalance import explain as ex

    output = _output(output)
    if replay and generation is None:
        _fail("error: --replay needs --generation N (the live round to replay)")
    if generation is not None:
        _explain_live(generation, replay=replay, output=output, width=width, html=html,
                      trace=trace)
        return
    try:
        if scenario is not None:
            document = _read_scenario(scenario)
        else:
            document = ex.scenario_from_flags(
                kind=kind.value,
                protocol=protocol,
                workers=workers,
                connectors=connectors,
                tasks=tasks,
                topics=topics,
                partitions=partitions,
                join=join or (),
                leave=leave or (),
                crash=crash or (),
                advance_ms=advance,
                scheduled_rebalance_max_delay_ms=delay,
                session_timeout_ms=session_timeout,
            )
        if scenario is not None and protocol:
            document = ex.with_protocol(document, protocol)
        if compare:
            eager, cooperative = ex.simulate_compare(document)
        else:
            result = ex.simulate_document(document)
    except ConfigError as exc:
        _fail(f"error: {_where(scenario)}{exc}")
    except KctlError as exc:
        _fail(f"error: {exc}", code=ExitStatus.ERROR)

    if html is not None:
        _write_html(html, [eager, cooperative] if compare else [result],
                    "kctl rebalance explain" + (" --compare" if compare else ""))
    console = Console(width=width, soft_wrap=False) if width else Console()
    if compare:
        if output is Output.table:
            ex.render_compare(eager, cooperative, console)
            return
        doc: Any = ex.compare_document(eager, cooperative)
    else:
        if output is Output.table:
            ex.render(result, console, trace=trace)
            return
        doc = result
    typer.echo(
        ex.to_json(doc) if output is Output.json else ex.to_yaml(doc), nl=output is Output.json
    )


def _output(output: Output | None) -> Output:
    """The command's -o, else the one given before the subcommand (`kctl -o json ...`)."""
    if output is not None:
        return output
    from kctl.cli.common import state

    return Output(state.output.value) if state.output is not None else Output.table


def _read_scenario(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read scenario: {exc.strerror or exc}") from exc
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "cannot parse"
        raise ConfigError(f"not valid YAML{where}: {problem}") from exc
    if not isinstance(loaded, dict):
        raise ConfigError("a scenario is a YAML mapping (kind, protocol, workers, events, ...)")
    loaded.setdefault("name", path.stem)
    return loaded


def _where(path: Path | None) -> str:
    return f"{path}: " if path is not None else ""


def _fail(message: str, code: ExitStatus = ExitStatus.USAGE) -> None:
    """One clear line on stderr; typer.Exit keeps the traceback out of the user's way."""
    print(message.splitlines()[0] if message else "error", file=sys.stderr)
    raise typer.Exit(code)


# --------------------------------------------------------------------------- live cluster


def _console(width: int | None) -> Console:
    return Console(width=width, soft_wrap=False) if width else Console()


def _echo(doc: Any, output: Output) -> None:
    from kctl.rebalance import explain as ex

    typer.echo(ex.to_json(doc) if output is Output.json else ex.to_yaml(doc),
               nl=output is Output.json)


def _write_html(path: Path, docs: list[Any], title: str) -> None:
    from kctl.rebalance.timeline import render_html

    try:
        path.write_text(render_html(docs, title=title), encoding="utf-8")
    except OSError as exc:
        _fail(f"error: cannot write {path}: {exc.strerror or exc}")
    print(f"timeline written to {path}", file=sys.stderr)


def _get(path: str, params: dict[str, Any] | None = None) -> Any:
    """GET from the worker named by --url / KCTL_URL / the context (kctl's main options)."""
    from kctl.cli.common import run
    from kctl.cli.group import worker_client

    return run(lambda: worker_client().get(path, params=params or {}))


def _known_connector(name: str) -> None:
    """No round names it: exit 3 when the cluster has no such connector either (a deleted
    connector's rounds are still found by name)."""
    from kctl.cli.common import client, fail, run

    exists = run(lambda: name in client().get("/connectors"))
    if not exists:
        raise fail(f"Connector {name} not found (no recorded round names it either)",
                   ExitStatus.NOT_FOUND)


def _explain_live(generation: int, *, replay: bool, output: Output, width: int | None,
                  html: Path | None, trace: bool) -> None:
    from kctl.rebalance import explain as ex

    if replay:
        result = _get(f"/rebalances/{generation}/replay")
        if output is not Output.table:
            _echo(result, output)
        else:
            _render_replay(result, _console(width))
        raise typer.Exit(ExitStatus.SUCCESS if result["reproduced"] else ExitStatus.ERROR)
    doc = _get("/rebalances", {"generation": generation})
    if html is not None:
        _write_html(html, [doc], f"kctl rebalance explain --generation {generation}")
    if output is Output.table:
        ex.render(doc, _console(width), trace=trace)
    else:
        _echo(doc, output)


def _render_replay(result: Any, console: Console) -> None:
    from rich.table import Table
    from rich.text import Text

    head = f"generation {result['generation']} · {result['protocol']} · leader {result['leader']}"
    console.print(Text(head, style="bold"))
    if result["reproduced"]:
        console.print(Text("reproduced: the assignor, given the recorded inputs, answers "
                           "exactly what the leader sent", style="green"))
        return
    console.print(Text(f"differs: {len(result['differences'])} difference(s) from the "
                       "recorded assignment", style="bold red"))
    table = Table("member", "field", "recorded", "replayed")
    for d in result["differences"]:
        recorded, replayed = d.get("only_recorded", d["recorded"]), d.get("only_replayed",
                                                                          d["replayed"])
        table.add_row(str(d["member"]), str(d["field"]), str(recorded), str(replayed))
    console.print(table)


def _since(text: str | None) -> str | None:
    """A duration goes to the worker as is; an ISO-8601 time as epoch milliseconds."""
    if text is None:
        return None
    from kctl.rebalance.history import parse_since

    text = text.strip()
    if re.fullmatch(r"\d+ ?(ms|s|m|h|d)?", text):
        return text
    try:
        return str(parse_since(text, 0))
    except ConfigError as exc:
        _fail(f"error: {exc}")
    return None


@app.command()
def history(
    last: Annotated[int | None, typer.Option("--last", "-n", help="Only the last N rounds.")]
    = None,
    connector: Annotated[
        str | None, typer.Option("--connector", "-c", help="Only rounds that moved it.")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(help="Only rounds since: 90s, 15m, 2h, 1d, or an ISO-8601 time."),
    ] = None,
    output: Annotated[
        Output | None, typer.Option("--output", "-o", help="table, json or yaml.")
    ] = None,
    html: Annotated[
        Path | None, typer.Option("--html", help="Also write the timeline to this HTML file.")
    ] = None,
    width: Annotated[
        int | None, typer.Option(help="Render at this width (default: the terminal's).")
    ] = None,
) -> None:
    """The live cluster's recent rebalances, merged from every worker's records: why each
    happened, who led, what moved (the document `explain -o json` writes)."""
    from kctl.rebalance import explain as ex

    output = _output(output)
    if last is not None and last < 0:
        _fail("error: --last must be 0 or more")
    params = {k: v for k, v in (("last", last), ("connector", connector),
                                ("since", _since(since))) if v is not None}
    doc = _get("/rebalances", params)
    if connector is not None and not doc["rounds"]:
        _known_connector(connector)
    if html is not None:
        _write_html(html, [doc], "kctl rebalance history")
    if output is not Output.table:
        _echo(doc, output)
        return
    console = _console(width)
    if not doc["rounds"]:
        console.print("no rebalance recorded" + (" for these filters" if params else ""))
        return
    ex.render(doc, console)
