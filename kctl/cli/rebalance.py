"""`kctl rebalance`: simulate group rebalances and explain every round.

Thin on purpose: parse the flags or the scenario file, call the simulator through
``kctl.rebalance.explain``, render. Nothing here talks to a worker, so it answers instantly.
"""

from __future__ import annotations

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
        Output, typer.Option("--output", "-o", help="table, json or yaml.")
    ] = Output.table,
    width: Annotated[
        int | None, typer.Option(help="Render at this width (default: the terminal's).")
    ] = None,
) -> None:
    """Simulate a scenario and explain each rebalance round."""
    from kctl.rebalance import explain as ex

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
