"""`kctl group describe`: who is in the worker group and what each member runs, or a sink
connector's consumer group with its offsets and lag.

Thin: GET /groups/{group} from any worker (kctl's REST extension) and render. The worker
asks the broker (DescribeGroups) and fills what the broker does not say from the workers'
generation records; `sources` in the answer (a column here) names where each field came from.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from kctl.cli import render
from kctl.exit_status import ExitStatus

app = typer.Typer(help="Describe the worker group and sink connectors' consumer groups.",
                  no_args_is_help=True)


def worker_client() -> Any:
    """The REST client every command uses: the worker named by --url / KCTL_URL / --context,
    verified and authenticated as `kctl connector ...` is (--cacert, --insecure, the
    context's or KCTL_USER's credentials, --timeout)."""
    from kctl.cli.common import client

    return client()


@app.callback()
def _group() -> None:
    """Groups on the Kafka cluster: the workers' group and sink connectors' `connect-<name>`."""


@app.command()
def describe(
    group: Annotated[str | None, typer.Argument(
        help="The group: the worker group (default) or connect-<sink connector>.")] = None,
    output: Annotated[str | None, typer.Option("--output", "-o", help="table, json or yaml")]
    = None,
) -> None:
    """Members, generation, leader and protocol of the worker group (each member's URL,
    client id, connectors and tasks), or a sink's consumer group (members, partitions,
    committed offsets, lag)."""
    from kctl.cli.common import fail, run, state

    chosen = output or getattr(state.output, "value", None) or "table"
    if chosen not in ("table", "json", "yaml"):
        raise fail(f"--output {chosen!r}: expected table, json or yaml", ExitStatus.USAGE)
    http = worker_client()
    name = group or run(lambda: http.get("/groups"))["worker_group"]
    answer = run(lambda: http.get(f"/groups/{name}"))
    console = Console()
    if render.dump(answer, chosen, console):
        return
    if answer.get("kind") == "sink":
        _sink(answer, console)
    else:
        _workers(answer, console)


def _sources(sources: dict[str, Any]) -> Text:
    text = Text("sources: ", style="bold")
    text.append(", ".join(f"{k} from {v}" for k, v in sources.items()), style="dim")
    return text


def _workers(doc: dict[str, Any], console: Console) -> None:
    head = Text(f"worker group {doc['group']}", style="bold")
    head.append(f" · {doc.get('state')} · protocol {doc.get('protocol') or '?'} · "
                f"generation {doc.get('generation')} · leader {doc.get('leader') or '?'}")
    console.print(head)
    rows = []
    for m in doc.get("members", ()):
        mark = " *" if m["worker"] == doc.get("leader") else ""
        rows.append([m["worker"] + mark, m.get("url", ""), m.get("client_id", ""),
                     " ".join(m.get("connectors", ())) or "-", _tasks(m.get("tasks", ())),
                     m.get("member_id", "")])
    render.print_rows(console, ["WORKER", "URL", "CLIENT ID", "CONNECTORS", "TASKS",
                                "MEMBER ID"], rows)
    console.print(_sources(doc.get("sources", {})))
    if doc.get("broker_error"):
        console.print(Text(f"the broker did not answer DescribeGroups: {doc['broker_error']}",
                           style="yellow"))


def _tasks(tasks: Any) -> str:
    from kctl.rebalance.explain import compact

    return compact(tasks) or "-"


def _sink(doc: dict[str, Any], console: Console) -> None:
    head = Text(f"consumer group {doc['group']}", style="bold")
    lag = doc.get("lag")
    head.append(f" · sink {doc['connector']} {doc.get('state')} · lag "
                f"{'?' if lag is None else lag}")
    console.print(head)
    render.print_rows(console, ["TASK", "WORKER", "STATE"],
                      [[m["task"], m["worker"], m["state"]] for m in doc.get("members", ())])
    render.print_rows(console, ["TOPIC", "PARTITION", "COMMITTED", "END", "LAG"],
                      [[p["topic"], p["partition"], _n(p["committed"]), _n(p["end"]),
                        "?" if p["lag"] is None else str(p["lag"])]
                       for p in doc.get("partitions", ())])
    console.print(_sources(doc.get("sources", {})))
    if doc.get("error"):
        console.print(Text(f"end offsets unavailable: {doc['error']}", style="yellow"))


def _n(value: Any) -> str:
    return "-" if value is None else str(value)
