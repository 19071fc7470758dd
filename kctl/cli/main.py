"""`kctl`: thin CLI over a worker's REST API (and the rebalance simulator).

The root app, its global options, `main()` and the command groups' registration; each group
is a module of this package (`connector.py`, `dlq.py`, ...) over what `common.py` shares.
Client commands import only typer, rich, httpx and yaml: never pyspark or the runtime,
so `kctl connector status` answers instantly.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from kctl.cli.client import ClientError
from kctl.cli.common import Output, exit_status, print_error, state
from kctl.cli.connector import app as connector_app
from kctl.cli.context import app as context_app
from kctl.cli.dlq import app as dlq_app
from kctl.cli.group import app as group_app
from kctl.cli.logger import app as logger_app
from kctl.cli.offsets import app as offsets_app
from kctl.cli.plugins import app as plugins_app
from kctl.cli.rebalance import app as rebalance_app
from kctl.cli.schema import app as schema_app
from kctl.cli.topic import app as topic_app
from kctl.cli.worker import app as worker_app
from kctl.errors import KctlError, NotFoundError
from kctl.exit_status import ExitStatus
from kctl.exit_status import describe as describe_exit_status


def _flags_take_no_value() -> None:
    """typer 0.29's rich help labels a flag with its Python type (`--wait <bool>`), which
    reads as if the flag took a value: a flag's type column stays empty here."""
    from typer.core import TyperOption

    shown = TyperOption.display_type_rich
    if getattr(shown, "_kctl_flags", False):
        return

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        return None if self.is_flag else shown(self, ctx)

    display_type_rich._kctl_flags = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flags_take_no_value()

app = typer.Typer(help="kctl: Kafka-Connect-style data integration on Spark.",
                  epilog=f"Exit status: {describe_exit_status()}.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
app.add_typer(worker_app, name="worker")
app.add_typer(connector_app, name="connector")
connector_app.add_typer(offsets_app, name="offsets")
app.add_typer(plugins_app, name="plugins")
app.add_typer(dlq_app, name="dlq")
app.add_typer(topic_app, name="topic")
app.add_typer(context_app, name="context")
app.add_typer(logger_app, name="logger")
app.add_typer(rebalance_app, name="rebalance")
app.add_typer(group_app, name="group")
app.add_typer(schema_app, name="schema")

@app.callback()
def _main(
    url: str = typer.Option(None, "--url", envvar="KCTL_URL",
                            help="Worker REST URL [default: the current context's, "
                                 "else http://127.0.0.1:8083]"),
    context: str = typer.Option(None, "--context", help="Use this context's URL."),
    cacert: str = typer.Option(None, "--cacert", envvar="KCTL_CACERT",
                               help="CA certificate(s) (PEM) that signed an https worker's "
                                    "certificate [default: the context's, else the "
                                    "system's]."),
    insecure: bool = typer.Option(False, "--insecure",
                                  help="Do not verify an https worker's certificate."),
    output: Output = typer.Option(None, "--output", "-o",
                                  help="table, json or yaml for every command"),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks on errors."),
    timeout: float = typer.Option(
        60.0, "--timeout", min=0,
        help="Seconds to keep retrying a request a cluster refuses while it rebalances "
             "(409); 0 answers at once."),
) -> None:
    state.url = url
    state.timeout = timeout
    state.context = context
    state.cacert = cacert
    state.insecure = insecure
    state.output = output
    state.debug = debug


GLOBAL_FLAGS = frozenset({"--debug", "--insecure"})
GLOBAL_VALUED = frozenset({"--url", "--context", "--cacert"})


def hoist_global_options(args: list[str]) -> list[str]:
    """Move `--url X` / `--url=X` / `--debug` before the subcommand, as kubectl accepts them.

    Click binds options to the command they follow, so `kctl connector list --url U` would
    be "No such option". Nothing after `--` is touched.
    """
    words = [a for a in args if not a.startswith("-")][:2]
    if words == ["context", "set"]:
        return args  # its --url is the context's, not the worker to call
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            rest.extend(args[i:])
            break
        if a in GLOBAL_FLAGS or (a.split("=", 1)[0] in GLOBAL_VALUED and "=" in a):
            front.append(a)
        elif a in GLOBAL_VALUED and i + 1 < len(args):
            front.extend(args[i:i + 2])
            i += 1
        else:
            rest.append(a)
        i += 1
    return front + rest


def _debug_exit_status(e: BaseException) -> ExitStatus:
    """With --debug errors are raised to show their traceback; the exit status stays."""
    if isinstance(e, ClientError):
        return exit_status(e)
    if isinstance(e, NotFoundError):
        return ExitStatus.NOT_FOUND
    if isinstance(e, KctlError):
        return ExitStatus.USAGE
    return ExitStatus.ERROR


def main() -> None:
    """The `kctl` console script: an unexpected exception is still one line without --debug."""
    try:
        app(args=hoist_global_options(sys.argv[1:]), prog_name="kctl")
    except Exception as e:  # a kctl bug, or an error raised for --debug to show
        if state.debug:
            import traceback

            traceback.print_exc()
            sys.exit(_debug_exit_status(e))
        print_error(f"unexpected {type(e).__name__}: {e} (run with --debug for the traceback)")
        sys.exit(ExitStatus.ERROR)


if __name__ == "__main__":
    main()
