"""What every `kctl` command shares: the global options' values, the REST client they
make, output formats, reading input files, and errors -> exit statuses (`exit_status`, `run`:
the only place they are chosen)."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Any

import typer
import yaml
from rich.console import Console
from rich.text import Text

from kctl.cli import render
from kctl.cli.client import Client, ClientError
from kctl.errors import KctlError, NotFoundError
from kctl.exit_status import ExitStatus

console = Console()
err_console = Console(stderr=True)


class Output(str, Enum):  # noqa: UP042 - typer needs a str Enum
    table = "table"
    json = "json"
    yaml = "yaml"


class State:
    url: str | None = None
    context: str | None = None
    cacert: str | None = None
    insecure: bool = False
    warned_insecure: bool = False
    debug: bool = False
    output: Output | None = None
    timeout: float = 60.0


state = State()

OutputOpt = typer.Option(None, "--output", "-o", help="table, json or yaml")
ConnectorArg = typer.Argument(..., help="The connector's name.")


def fmt(output: Output | None) -> str:
    """The output format: the command's -o, else the one given before the subcommand."""
    return (output or state.output or Output.table).value


def worker_url() -> str | None:
    """--url / KCTL_URL, else --context's URL, else the current context's (None: default)."""
    if state.url:
        return state.url
    from kctl.cli.contexts import Contexts

    return run(lambda: Contexts.load().url(state.context))


def client() -> Client:
    """A client for the worker: its URL, how to verify it and the credentials to send
    (KCTL_USER/KCTL_PASSWORD, else the context's when the URL is the context's: another
    URL never gets a context's password)."""
    import os

    from kctl.cli.contexts import Contexts

    ctx: dict[str, str] = {}
    if not state.url:
        ctx = run(lambda: Contexts.load().connection(state.context)) or {}
    verify: bool | str = state.cacert or ctx.get("cacert") or True
    if state.insecure:
        if not state.warned_insecure:  # once per command, however many requests it makes
            state.warned_insecure = True
            err_console.print(Text.assemble(("warning:", "yellow"), " --insecure: the "
                                            "worker's certificate is not verified"),
                              highlight=False)
        verify = False
    user = os.environ.get("KCTL_USER") or ctx.get("user")
    password = os.environ.get("KCTL_PASSWORD") if os.environ.get("KCTL_USER") \
        else ctx.get("password")
    auth = (user, password or "") if user else None
    return run(lambda: Client(worker_url(), verify=verify, auth=auth, retry_for=state.timeout,
                              on_wait=_waiting))


def _waiting(reason: str) -> None:
    err_console.print(Text.assemble(("waiting:", "yellow"), " ", reason,
                                    f" (retrying for up to {state.timeout:.0f} s, --timeout)"),
                      highlight=False, soft_wrap=True)


def print_error(message: str) -> None:
    """`error: <message>` on stderr; the message is literal text, never rich markup."""
    err_console.print(Text.assemble(("error:", "red"), " ", message), highlight=False,
                      soft_wrap=True)


def fail(message: str, code: ExitStatus = ExitStatus.ERROR) -> typer.Exit:
    print_error(message)
    return typer.Exit(code)


def exit_status(e: ClientError) -> ExitStatus:
    """What a failed request means to a script (docs/operating.md's table)."""
    if e.status == 0:
        return ExitStatus.UNREACHABLE
    if e.status == 404:
        return ExitStatus.NOT_FOUND
    if e.status == 409:
        return ExitStatus.CONFLICT
    if e.status == 400 and isinstance(e.body, dict) and e.body.get("errors"):
        return ExitStatus.ERROR  # an invalid config: the operation failed
    if e.status in (400, 405, 422):
        return ExitStatus.USAGE
    return ExitStatus.ERROR


def run(fn: Any, hints: dict[str, tuple[str, ExitStatus]] | None = None) -> Any:
    """Call fn; turn REST and config errors into one line and an exit code.

    hints: when the worker's message contains a key, the line to show instead of its
    REST-worded advice, naming the kctl command that resolves it, and the exit status.
    """
    try:
        return fn()
    except ClientError as e:
        if state.debug:
            raise
        for needle, (hint, code) in (hints or {}).items():
            if e.status in (400, 409) and needle in str(e):
                raise fail(hint, code) from None
        if e.status == 400 and isinstance(e.body, dict) and e.body.get("errors"):
            err_console.print(render.validation_table(e.body["errors"]))
            raise fail(e.args[0].splitlines()[0], exit_status(e)) from None
        raise fail(str(e), exit_status(e)) from None
    except NotFoundError as e:
        if state.debug:
            raise
        raise fail(str(e), ExitStatus.NOT_FOUND) from None
    except KctlError as e:
        if state.debug:
            raise
        raise fail(str(e), ExitStatus.USAGE) from None


def done(message: str, output: Output | None, resource: Any = None,
         fetch: Any = None) -> None:
    """A write's answer: the message, or with -o json|yaml the resulting resource (`fetch`
    gets it when the write's own answer is not the resource)."""
    if fmt(output) == "table":
        console.print(message, highlight=False, markup=False)
        return
    if fetch is not None:
        resource = run(fetch)
    render.dump(resource, fmt(output), console)


def read_input(file: str) -> tuple[str, str]:
    """The text of FILE, or of stdin for `-`, and the name errors call it by.

    A missing, unreadable or binary file is a one-line error (exit 2), never a traceback.
    """
    if file == "-":
        try:
            return sys.stdin.read(), "<stdin>"
        except UnicodeDecodeError:
            raise fail("cannot read <stdin>: not UTF-8 text", ExitStatus.USAGE) from None
    try:
        return Path(file).read_text(encoding="utf-8"), file
    except OSError as e:
        raise fail(f"cannot read {file}: {e.strerror or e}", ExitStatus.USAGE) from None
    except UnicodeDecodeError:
        raise fail(f"cannot read {file}: not UTF-8 text", ExitStatus.USAGE) from None


def parse_input(text: str, source: str) -> Any:
    """YAML (so JSON too), or Java .properties by the file's suffix."""
    from kctl.runtime.worker_config import describe_yaml_error, load_yaml, parse_properties

    if source.endswith(".properties"):
        return parse_properties(text)
    try:
        return load_yaml(text)
    except yaml.YAMLError as e:
        raise fail(f"{source}: not valid YAML or JSON: {describe_yaml_error(e)}", ExitStatus.USAGE) from None


def load_connector(file: str) -> tuple[str, dict[str, str]]:
    """A connector document from FILE or stdin: REST's {name, config} or a flat config."""
    from kctl.runtime.connector_config import parse_connector_document

    text, source = read_input(file)
    data = parse_input(text, source)
    return run(lambda: parse_connector_document(data, source))
