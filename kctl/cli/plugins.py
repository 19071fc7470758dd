"""`kctl plugins`: the connector plugins a worker can run, and a new one's skeleton."""

from __future__ import annotations

from pathlib import Path

import typer

from kctl.cli import render
from kctl.cli.common import Output, OutputOpt, client, console, fail, fmt, run

app = typer.Typer(help="Connector plugins the worker knows.", no_args_is_help=True)


@app.command("list")
def plugins_list(
    output: Output | None = OutputOpt,
    local: bool = typer.Option(False, "--local", help=(
        "The plugins this Python finds (entry points, --plugin-path), without a worker; "
        "plugins that fail to load are listed with their error.")),
    plugin_path: list[str] = typer.Option([], "--plugin-path",
                                          help="A plugin.path directory (with --local)."),
) -> None:
    """Connector plugins the worker can run."""
    if local:
        _list_local(output, plugin_path)
        return
    data = run(lambda: client().get("/connector-plugins"))
    if not render.dump(data, fmt(output), console):
        console.print(render.table(["class", "type", "version"],
                                   ((p["class"], p["type"], p["version"]) for p in data)))


def _list_local(output: Output | None, plugin_path: list[str]) -> None:
    # loading plugins means importing them (and kctl.api): only when asked for
    from kctl.runtime.plugins import Plugins

    plugins = Plugins(plugin_path)
    data = [{**p.info().to_json(), "aliases": list(p.aliases)} for p in plugins.connectors()]
    broken = [{"plugin": b.where, "error": b.error} for b in plugins.broken]
    ambiguous = [{"name": n, "claimed_by": c} for n, c in sorted(plugins.ambiguous.items())]
    if render.dump({"plugins": data, "broken": broken, "ambiguous": ambiguous}, fmt(output),
                   console):
        return
    console.print(render.table(["class", "type", "version", "aliases"],
                               ((p["class"], p["type"], p["version"], ", ".join(p["aliases"]))
                                for p in data)))
    if broken:
        console.print(render.table(["broken plugin", "error"],
                                   ((b["plugin"], b["error"]) for b in broken)))
    if ambiguous:
        console.print(render.table(["ambiguous name", "claimed by"],
                                   ((a["name"], " and ".join(a["claimed_by"])) for a in ambiguous)))


@app.command("new")
def plugins_new(
    name: str = typer.Argument(..., help="The connector's name, e.g. weather-station."),
    source: bool = typer.Option(False, "--source", help="A source connector (the default)."),
    sink: bool = typer.Option(False, "--sink", help="A sink connector."),
    directory: Path = typer.Option(Path("."), "--dir", help="Where the project's directory goes."),
) -> None:
    """Write a pip-installable connector project: pyproject with the kctl.connectors entry
    point, a connector and task with their ConfigDef, a README and a test on kctl.testing."""
    from kctl.cli.plugins_template import files, names

    if source and sink:
        raise fail("choose one of --source and --sink")
    try:
        n = names(name, "sink" if sink else "source")
    except ValueError as e:
        raise fail(str(e)) from None
    root = directory / n.dist
    if root.exists() and any(root.iterdir()):
        raise fail(f"{root} exists and is not empty")
    for rel, text in files(n).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    console.print(f"wrote {root}: {n.alias} ({n.pkg}.{n.camel}{n.kind.capitalize()}Connector)",
                  markup=False, highlight=False, soft_wrap=True)
    console.print(f"next: cd {root} && pip install -e '.[test]' && pytest", markup=False,
                  highlight=False, soft_wrap=True)
