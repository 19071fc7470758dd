"""`kctl worker start`: the one command that runs a worker, so the only one that imports
the runtime (inside the command: every other command stays free of Spark)."""

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
