"""`kctl worker start`: the one command that runs a worker, so (with `prepare`, which starts
Spark once) the only one that imports the runtime (inside the command: every other command
stays free of Spark)."""

from __future__ import annotations

import typer

from kctl.cli.common import console, err_console

app = typer.Typer(help="Run a worker.", no_args_is_help=True)


@app.command("start")
def worker_start(
    config: str = typer.Argument(None, help="Worker config (YAML or .properties)."),
    connectors: list[str] = typer.Argument(None, help="Connector files to create at start."),
) -> None:
    """Start a worker in the foreground: standalone (embedded defaults without CONFIG), or a
    member of a distributed cluster when CONFIG sets group.id."""
    from kctl.launch import guard_exit, run_worker  # heavy: only for this command

    code = run_worker(config, list(connectors or []), console, err_console)
    guard_exit(code)
    raise typer.Exit(code)


@app.command("prepare")
def worker_prepare(
    config: str = typer.Argument(None, help="Worker config (YAML or .properties)."),
) -> None:
    """Record Spark's class data so this machine's workers start their JVM in about half the
    time (a worker's first JVM does it when it stops; run this in a container image's build)."""
    from kctl.launch import prepare_spark  # heavy: only for this command

    raise typer.Exit(prepare_spark(config, console, err_console))
