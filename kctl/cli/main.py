"""`kctl`: thin CLI over a worker's REST API (and the rebalance simulator).

Client commands import only typer, rich, httpx and yaml: never pyspark or the runtime,
so `kctl connector status` answers instantly.
"""

from __future__ import annotations

import json
import sys
import time
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
from kctl.exit_status import describe as describe_exit_status
from kctl.runtime.connector_config import CONNECTOR_CLASS_CONFIG


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
worker_app = typer.Typer(help="Run a worker.", no_args_is_help=True)
connector_app = typer.Typer(help="Manage connectors on a worker.", no_args_is_help=True)
offsets_app = typer.Typer(help="Read and change a connector's offsets.", no_args_is_help=True)
plugins_app = typer.Typer(help="Connector plugins the worker knows.", no_args_is_help=True)
dlq_app = typer.Typer(help="A connector's dead letter queue.", no_args_is_help=True)
context_app = typer.Typer(help="Named worker URLs (kcctl's contexts).", no_args_is_help=True)
logger_app = typer.Typer(help="A worker's log levels at run time (KIP-495).",
                         no_args_is_help=True)
app.add_typer(worker_app, name="worker")
app.add_typer(connector_app, name="connector")
connector_app.add_typer(offsets_app, name="offsets")
app.add_typer(plugins_app, name="plugins")
app.add_typer(dlq_app, name="dlq")
app.add_typer(context_app, name="context")
app.add_typer(logger_app, name="logger")
try:
    from kctl.cli.rebalance import app as rebalance_app

    app.add_typer(rebalance_app, name="rebalance")
except ImportError:  # pragma: no cover - only while the simulator is absent
    pass
from kctl.cli.group import app as group_app  # noqa: E402

app.add_typer(group_app, name="group")

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
PREVIEW_WIDTH = 120  # characters of a rejected payload a `dlq show` table cell shows
ConnectorArg = typer.Argument(..., help="The connector's name.")
ContextArg = typer.Argument(..., help="The context's name.")
LoggerArg = typer.Argument(..., help="A logger name (dotted, e.g. kctl.runtime) or root.")


def fmt(output: Output | None) -> str:
    """The output format: the command's -o, else the one given before the subcommand."""
    return (output or state.output or Output.table).value


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
    """What a failed request means to a script (the README's table)."""
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


OFFSETS_SHAPE = ('{"offsets": [{"partition": {...}, "offset": {...}}, ...]} '
                 "or a list of such entries")


def load_offsets(file: str) -> dict[str, Any]:
    """The body of PATCH /connectors/{name}/offsets, checked here so a wrong shape is clear."""
    text, source = read_input(file)
    body = parse_input(text, source)
    if isinstance(body, list):
        body = {"offsets": body}
    entries = body.get("offsets") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        raise fail(f"{source}: expected {OFFSETS_SHAPE}, got {type(body).__name__}",
                   ExitStatus.USAGE)
    for i, entry in enumerate(entries):
        if not (isinstance(entry, dict) and isinstance(entry.get("partition"), dict)
                and (entry.get("offset") is None or isinstance(entry["offset"], dict))):
            raise fail(f"{source}: offsets[{i}] must be {{\"partition\": {{...}}, "
                       f"\"offset\": {{...}} or null}}, got {json.dumps(entry)}",
                       ExitStatus.USAGE)
    return body


# -- worker ----------------------------------------------------------------------------------


@worker_app.command("start")
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


# -- connectors ------------------------------------------------------------------------------


@connector_app.command("list")
def connector_list(output: Output | None = OutputOpt) -> None:
    """List connectors with their states."""
    data = run(lambda: client().get("/connectors", params={"expand": "status"}))
    if render.dump(data, fmt(output), console):
        return
    rows = []
    for name, entry in sorted(data.items()):
        st = entry["status"]
        tasks = st.get("tasks", [])
        running = sum(1 for t in tasks if t["state"] == "RUNNING")
        rows.append((name, st.get("type", ""), render.state(st["connector"]["state"]),
                     f"{running}/{len(tasks)}"))
    console.print(render.table(["name", "type", "state", "tasks running"], rows))


@connector_app.command("get")
def connector_get(name: str = ConnectorArg, output: Output | None = OutputOpt) -> None:
    """Show a connector's config and tasks."""
    data = run(lambda: client().get(f"/connectors/{name}"))
    if not render.dump(data, fmt(output), console):
        console.print(render.table(["key", "value"], sorted(data["config"].items()),
                                   title=f"{name} ({data['type']}, {len(data['tasks'])} tasks)"))


@connector_app.command("config")
def connector_config(name: str = ConnectorArg, output: Output | None = OutputOpt) -> None:
    """Show a connector's config."""
    data = run(lambda: client().get(f"/connectors/{name}/config"))
    if not render.dump(data, fmt(output), console):
        console.print(render.table(["key", "value"], sorted(data.items())))


# What `connector status --metrics` shows per task: column -> Kafka Connect metric.
TASK_METRICS = {
    "polled": "source_task_metrics_source_record_poll",
    "written": "source_task_metrics_source_record_write",
    "read": "sink_task_metrics_sink_record_read",
    "put": "sink_task_metrics_sink_record_send",
    "skipped": "task_error_metrics_total_records_skipped",
    "dlq": "task_error_metrics_deadletterqueue_produce_requests",
    # what a FileSource task could not deliver (its own counters): losses stay visible
    "truncations": "connector_task_metrics_file_truncations",
    "deleted unread": "connector_task_metrics_file_deleted_unread",
    "bytes lost": "connector_task_metrics_file_bytes_lost",
    "unreadable": "connector_task_metrics_file_unreadable",
}


def _task_counters(text: str, name: str) -> dict[str, dict[str, float]]:
    """task id -> column -> total, from a /metrics answer."""
    from prometheus_client.parser import text_string_to_metric_families

    wanted = {f"kafka_connect_{m}_total": col for col, m in TASK_METRICS.items()}
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            col = wanted.get(sample.name)
            if col and sample.labels.get("connector") == name:
                out.setdefault(sample.labels["task"], {})[col] = sample.value
    return out


def _task_rates(name: str, seconds: float) -> dict[str, dict[str, Any]]:
    """Totals now and per-second rates over `seconds`, per task (two scrapes)."""
    c = client()
    first = _task_counters(run(lambda: c.request_text("/metrics")), name)
    time.sleep(seconds)
    second = _task_counters(run(lambda: c.request_text("/metrics")), name)
    return {task: {col: {"total": v, "rate": (v - first.get(task, {}).get(col, v)) / seconds}
                   for col, v in cols.items()} for task, cols in sorted(second.items())}


@connector_app.command("status")
def connector_status(name: str = ConnectorArg, output: Output | None = OutputOpt,
                     metrics: bool = typer.Option(
                         False, "--metrics",
                         help="Also record counts and rates per task (two scrapes of "
                              "/metrics, --interval apart)."),
                     interval: float = typer.Option(1.0, help="Seconds between the scrapes.")
                     ) -> None:
    """Connector and task states, worker ids and failure traces."""
    data = run(lambda: client().get(f"/connectors/{name}/status"))
    rates = _task_rates(name, max(interval, 0.1)) if metrics else None
    if rates is not None and fmt(output) != "table":
        data = {**data, "metrics": rates}
    if not render.dump(data, fmt(output), console):
        console.print(render.status_table(data))
        if rates:
            cols = [c for c in TASK_METRICS if any(c in r for r in rates.values())]
            console.print(render.table(
                ["task", *cols],
                ((task, *(f"{r[c]['total']:,.0f} ({r[c]['rate']:,.0f}/s)" if c in r else ""
                          for c in cols)) for task, r in rates.items()),
                title=f"{name}: records per task (total, rate over {interval:g} s)"))


def _wait(name: str, timeout: float, *, quiet: bool = False) -> None:
    """Until every part runs (or is paused/stopped); FAILED fails. `quiet`: no spinner or
    table on stdout (machine output follows)."""
    deadline = time.monotonic() + timeout
    last = None
    show = err_console if quiet else console
    with show.status(f"waiting for {name}...") as spinner:
        while time.monotonic() < deadline:
            st = run(lambda: client().get(f"/connectors/{name}/status"))
            states = [st["connector"]["state"], *(t["state"] for t in st["tasks"])]
            if states != last:
                spinner.update(f"{name}: " + ", ".join(states))
                last = states
            if "FAILED" in states:
                show.print(render.status_table(st))
                raise fail(f"connector {name} FAILED")
            if st["tasks"] and all(s in ("RUNNING", "PAUSED", "STOPPED") for s in states):
                if not quiet:
                    console.print(render.status_table(st))
                return
            if st["connector"]["state"] == "STOPPED":
                if not quiet:
                    console.print(render.status_table(st))
                return
            if st["connector"]["state"] == "RUNNING" and not st["tasks"] and \
                    st["connector"].get("trace"):
                # running, but it says why it has no task (e.g. no table matches): waiting
                # longer would only time out
                if not quiet:
                    console.print(render.status_table(st))
                err_console.print(Text.assemble(("warning:", "yellow"), " ",
                                                st["connector"]["trace"]),
                                  highlight=False, soft_wrap=True)
                return
            time.sleep(0.3)
    raise fail(f"timed out waiting for {name} to run")


@connector_app.command("create")
def connector_create(
    file: str = typer.Argument(..., help="Connector file (YAML/JSON/.properties) or - for stdin."),
    wait: bool = typer.Option(False, "--wait", help="Show progress until RUNNING or FAILED."),
    initial_state: str = typer.Option("RUNNING", "--initial-state", help="RUNNING, PAUSED or STOPPED"),
    timeout: float = typer.Option(120, help="Seconds --wait waits."),
    output: Output | None = OutputOpt,
) -> None:
    """Create a connector."""
    name, config = load_connector(file)
    _validate_config(config)  # warnings only: the worker refuses what is invalid
    info = run(lambda: client().post("/connectors", json={
        "name": name, "config": config, "initial_state": initial_state.upper()}))
    machine = fmt(output) != "table"
    if not machine:
        done(f"connector {name} created", output, info)
    if wait:
        _wait(name, timeout, quiet=machine)
    if machine:
        done("", output, fetch=lambda: client().get(f"/connectors/{name}"))


SECRET_KEY = ("password", "secret", "credentials")
MASK = "******"


def _shown(key: str, value: str | None) -> str | None:
    if value is None:
        return None
    from kctl.runtime.secrets import mask_url

    return MASK if any(word in key.lower() for word in SECRET_KEY) else mask_url(value)


def config_changes(old: dict[str, str] | None, new: dict[str, str]) -> list[dict[str, Any]]:
    """Per key: added, removed or changed, with secrets masked (values never shown)."""
    old = old or {}
    rows = []
    for key in sorted(old.keys() | new.keys()):
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        change = "added" if before is None else "removed" if after is None else "changed"
        rows.append({"key": key, "change": change, "old": _shown(key, before),
                     "new": _shown(key, after)})
    return rows


def _show_changes(name: str, rows: list[dict[str, Any]], title: str) -> None:
    style = {"added": "green", "removed": "red", "changed": "yellow"}
    console.print(render.table(
        ["key", "change", "old", "new"],
        ((r["key"], Text(r["change"], style=style[r["change"]]),
          "" if r["old"] is None else r["old"], "" if r["new"] is None else r["new"])
         for r in rows), title=title))


def _validate_config(config: dict[str, str]) -> dict[str, list[str]]:
    """The worker's per-field errors for a config (what a write would refuse); unknown keys
    are printed as warnings with a did-you-mean."""
    plugin = config.get(CONNECTOR_CLASS_CONFIG, "")
    if not plugin:
        raise fail("the config has no connector.class", ExitStatus.USAGE)

    def validate() -> Any:
        try:
            return client().put(f"/connector-plugins/{plugin}/config/validate", json=config)
        except ClientError as e:
            if e.status == 0:
                raise
            return None  # the write itself says what is wrong (e.g. an unknown plugin)

    data = run(validate)
    if data is None:
        return {}
    _print_warnings(_warnings(config, data))
    return {c["value"]["name"]: c["value"]["errors"] for c in data["configs"]
            if c["value"]["errors"]}


def _warnings(config: dict[str, str], data: dict[str, Any]) -> list[str]:
    """The validate answer's warnings (unknown keys with a did-you-mean); a worker that
    does not send them (an older kctl, Kafka Connect) gets the same check here."""
    if "warnings" in data:
        return [w["message"] for w in data["warnings"]]
    from kctl.runtime.connector_config import known_keys, unknown_keys

    return unknown_keys(config, known_keys(data))


def _print_warnings(warnings: list[str]) -> None:
    for warning in warnings:
        err_console.print(Text.assemble(("warning:", "yellow"), " ", warning), highlight=False,
                          soft_wrap=True)


def _write_config(name: str, current: dict[str, str] | None, config: dict[str, str],
                  write: Any, *, dry_run: bool, output: Output | None,
                  wait: bool = False, timeout: float = 120) -> None:
    """apply and patch: show what changes, then write it (or, with --dry-run, validate it)."""
    rows = config_changes(current, config)
    result = "unchanged" if not rows else "created" if current is None else "updated"
    machine = fmt(output) != "table"
    if dry_run:
        errors = _validate_config(config)
        if machine:
            render.dump({"name": name, "result": result, "dry_run": True, "changes": rows,
                         "errors": errors}, fmt(output), console)
        else:
            if rows:
                _show_changes(name, rows, f"{name}: would be {result} (dry run)")
            else:
                console.print(f"connector {name} unchanged (dry run)", highlight=False)
        if errors:
            if not machine:
                err_console.print(render.validation_table(errors))
            raise fail(f"{sum(map(len, errors.values()))} error(s) in {name}'s config",
                       ExitStatus.ERROR)
        return
    if not rows:
        done(f"connector {name} unchanged", output,
             fetch=lambda: client().get(f"/connectors/{name}"))
        return
    _validate_config(config)  # warnings only: the worker refuses what is invalid
    if not machine:
        _show_changes(name, rows, f"{name}: {len(rows)} key(s) {result.replace('updated', 'changed')}")
    info = run(write)
    if not machine:
        done(f"connector {name} {result}", output, info)
    if wait:
        _wait(name, timeout, quiet=machine)
    if machine:
        done("", output, fetch=lambda: client().get(f"/connectors/{name}"))


@connector_app.command("apply")
def connector_apply(
    file: str = typer.Argument(..., help="Connector file (YAML/JSON/.properties) or - for stdin."),
    dry_run: bool = typer.Option(False, "--dry-run",
                                 help="Show the changes and validate; write nothing."),
    wait: bool = typer.Option(False, "--wait", help="Show progress until RUNNING or FAILED."),
    timeout: float = typer.Option(120, help="Seconds --wait waits."),
    output: Output | None = OutputOpt,
) -> None:
    """Create or update a connector, showing the changed keys."""
    name, config = load_connector(file)
    c = client()

    def fetch_current() -> dict[str, str] | None:
        try:
            return c.get(f"/connectors/{name}/config")
        except ClientError as e:
            if e.status == 404:
                return None
            raise

    current = run(fetch_current)
    _write_config(name, current, config, lambda: c.put(f"/connectors/{name}/config", json=config),
                  dry_run=dry_run, output=output, wait=wait, timeout=timeout)


@connector_app.command("patch")
def connector_patch(
    name: str = ConnectorArg,
    settings: list[str] = typer.Argument(..., help="KEY=VALUE to set, KEY= to remove"),
    dry_run: bool = typer.Option(False, "--dry-run",
                                 help="Show the changes and validate; write nothing."),
    output: Output | None = OutputOpt,
) -> None:
    """Change some keys of a connector's config, showing the changed keys."""
    patch: dict[str, str | None] = {}
    for s in settings:
        if "=" not in s:
            raise fail(f"expected KEY=VALUE, got {s!r}", ExitStatus.USAGE)
        k, v = s.split("=", 1)
        if not k.strip():
            raise fail(f"expected KEY=VALUE, got {s!r} (the key is empty)", ExitStatus.USAGE)
        patch[k.strip()] = v if v != "" else None
    c = client()
    current = run(lambda: c.get(f"/connectors/{name}/config"))
    config = {k: v for k, v in {**current, **patch}.items() if v is not None}
    _write_config(name, current, config, lambda: c.patch(f"/connectors/{name}/config", json=patch),
                  dry_run=dry_run, output=output)


def _simple(verb: str, method: str, path: str, doc: str, *, before: bool = False) -> Any:
    """pause, resume, stop, delete: -o shows the connector's status after the write (for
    delete, the connector as it was)."""
    def command(name: str = ConnectorArg, output: Output | None = OutputOpt) -> None:
        c = client()
        info = run(lambda: c.get(f"/connectors/{name}")) if before and fmt(output) != "table" \
            else None
        run(lambda: c.request(method, path.format(name=name)))
        if info is not None:
            done("", output, info)
        else:
            done(f"connector {name} {verb}", output,
                 fetch=lambda: c.get(f"/connectors/{name}/status"))

    command.__doc__ = doc
    return command


connector_app.command("pause")(_simple("paused", "PUT", "/connectors/{name}/pause",
                                       "Pause a connector and its tasks."))
connector_app.command("resume")(_simple("resumed", "PUT", "/connectors/{name}/resume",
                                        "Resume a paused connector."))
connector_app.command("stop")(_simple("stopped", "PUT", "/connectors/{name}/stop",
                                      "Stop a connector: its tasks end, its config stays."))
connector_app.command("delete")(_simple("deleted", "DELETE", "/connectors/{name}",
                                        "Delete a connector.", before=True))


@connector_app.command("restart")
def connector_restart(name: str = ConnectorArg,
                      include_tasks: bool = typer.Option(
                          False, "--include-tasks", help="Restart its tasks too."),
                      only_failed: bool = typer.Option(
                          False, "--only-failed",
                          help="Only what is FAILED (with --include-tasks: only failed tasks)."),
                      task: int = typer.Option(None, "--task", help="Restart only this task."),
                      output: Output | None = OutputOpt) -> None:
    """Restart a connector (and its tasks), or one task."""
    c = client()
    if task is not None:
        run(lambda: c.post(f"/connectors/{name}/tasks/{task}/restart"))
        done(f"task {name}-{task} restarted", output,
             fetch=lambda: c.get(f"/connectors/{name}/tasks/{task}/status"))
        return
    data = run(lambda: c.post(f"/connectors/{name}/restart",
                              params={"includeTasks": str(include_tasks).lower(),
                                      "onlyFailed": str(only_failed).lower()}))
    if fmt(output) != "table":
        done("", output, data, fetch=None if data else lambda: c.get(f"/connectors/{name}/status"))
        return
    console.print(f"connector {name} restarted", highlight=False, markup=False)
    if data:
        console.print(render.status_table(data, show_traces=False))


@connector_app.command("validate")
def connector_validate(file: str = typer.Argument(
        ..., help="Connector file (YAML/JSON/.properties) or - for stdin."), output: Output | None = OutputOpt) -> None:
    """Validate a connector config; per-field errors as a table."""
    name, config = load_connector(file)
    plugin = config.get(CONNECTOR_CLASS_CONFIG, "")
    if not plugin:
        raise fail("the config has no connector.class", ExitStatus.USAGE)
    data = run(lambda: client().put(f"/connector-plugins/{plugin}/config/validate", json=config))
    warnings = _warnings(config, data)
    if render.dump(data, fmt(output), console):
        raise typer.Exit(ExitStatus.ERROR if data["error_count"] else ExitStatus.SUCCESS)
    _print_warnings(warnings)  # warnings never make a config invalid (nor the exit status 1)
    errors = {c["value"]["name"]: c["value"]["errors"] for c in data["configs"]
              if c["value"]["errors"]}
    if errors:
        console.print(render.validation_table(errors))
        raise fail(f"{data['error_count']} error(s) in {name}'s config", ExitStatus.ERROR)
    note = f" ({len(warnings)} warning(s) on stderr)" if warnings else ""
    console.print(f"{name}: configuration is valid{note}", highlight=False, markup=False)


# -- offsets ---------------------------------------------------------------------------------


@offsets_app.command("get")
def offsets_get(name: str = ConnectorArg, output: Output | None = OutputOpt) -> None:
    """Committed offsets of a connector."""
    data = run(lambda: client().get(f"/connectors/{name}/offsets"))
    if not render.dump(data, fmt(output), console):
        console.print(render.table(["partition", "offset"],
                                   ((json.dumps(o["partition"], sort_keys=True),
                                     json.dumps(o["offset"], sort_keys=True))
                                    for o in data["offsets"])))


def _stop_first(name: str) -> str:
    return (f"connector {name} must be STOPPED before its offsets change: "
            f"run `kctl connector stop {name}` first")


@offsets_app.command("set")
def offsets_set(name: str = ConnectorArg, file: str = typer.Argument(
        ..., help='JSON/YAML {"offsets": [{"partition": ..., "offset": ...}]} or - for stdin'),
        output: Output | None = OutputOpt) -> None:
    """Alter offsets of a STOPPED connector."""
    body = load_offsets(file)
    c = client()
    data = run(lambda: c.patch(f"/connectors/{name}/offsets", json=body),
               hints={"STOPPED state": (_stop_first(name), ExitStatus.CONFLICT)})
    done(data["message"], output, fetch=lambda: c.get(f"/connectors/{name}/offsets"))


@offsets_app.command("reset")
def offsets_reset(name: str = ConnectorArg, output: Output | None = OutputOpt) -> None:
    """Forget all offsets of a STOPPED connector."""
    c = client()
    data = run(lambda: c.delete(f"/connectors/{name}/offsets"),
               hints={"STOPPED state": (_stop_first(name), ExitStatus.CONFLICT)})
    done(data["message"], output, fetch=lambda: c.get(f"/connectors/{name}/offsets"))


# -- plugins ---------------------------------------------------------------------------------


@plugins_app.command("list")
def plugins_list(output: Output | None = OutputOpt) -> None:
    """Connector plugins the worker can run."""
    data = run(lambda: client().get("/connector-plugins"))
    if not render.dump(data, fmt(output), console):
        console.print(render.table(["class", "type", "version"],
                                   ((p["class"], p["type"], p["version"]) for p in data)))


# -- dlq -------------------------------------------------------------------------------------


CONTEXT_HEADERS_NOTE = (
    "{n} of these record(s) carry no error context (stage, exception, origin): set "
    "errors.deadletterqueue.context.headers.enable=true on {name} to record it")


def _origin(r: dict[str, Any]) -> str:
    if r.get("source_partition"):
        return f"{r['source_partition']} @ {r['source_offset']}"
    if r.get("topic"):
        return f"{r['topic']}-{r['partition']}@{r['offset']}"
    return ""


@dlq_app.command("show")
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


@dlq_app.command("replay")
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


@dlq_app.command("purge")
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


# -- loggers ---------------------------------------------------------------------------------


def _logger_rows(data: dict[str, Any]) -> Any:
    return ((name, entry["level"], "" if entry.get("last_modified") is None else
             time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry["last_modified"] / 1000)))
            for name, entry in data.items())


@logger_app.command("list")
def logger_list(output: Output | None = OutputOpt) -> None:
    """Root and every logger with a level of its own."""
    data = run(lambda: client().get("/admin/loggers"))
    if not render.dump(data, fmt(output), console):
        console.print(render.table(["logger", "level", "last modified"], _logger_rows(data)))


@logger_app.command("get")
def logger_get(name: str = LoggerArg, output: Output | None = OutputOpt) -> None:
    """A logger's effective level."""
    data = run(lambda: client().get(f"/admin/loggers/{name}"))
    if not render.dump(data, fmt(output), console):
        console.print(render.table(["logger", "level", "last modified"],
                                   _logger_rows({name: data})))


@logger_app.command("set")
def logger_set(name: str = LoggerArg, level: str = typer.Argument(
        ..., help="TRACE, DEBUG, INFO, WARN, ERROR, FATAL or OFF"),
        output: Output | None = OutputOpt) -> None:
    """Set a logger's level (and its descendants' that have their own) on the worker."""
    c = client()
    touched = run(lambda: c.put(f"/admin/loggers/{name}", json={"level": level.upper()}))
    done(f"{level.upper()}: {', '.join(touched)}", output, touched)


# -- contexts --------------------------------------------------------------------------------


def _contexts() -> Any:
    from kctl.cli.contexts import Contexts

    return run(Contexts.load)


@context_app.command("set")
def context_set(name: str = ContextArg, url: str = typer.Option(..., "--url", help="The worker's REST URL."),
                use: bool = typer.Option(False, "--use", help="Make it the current context."),
                cacert: str = typer.Option(None, "--cacert",
                                           help="CA certificate(s) (PEM) to verify an https "
                                                "worker with."),
                user: str = typer.Option(None, "--user",
                                         help="User for the worker's Basic auth; the password "
                                              "comes from --password-stdin, KCTL_PASSWORD or "
                                              "a prompt, never from the command line."),
                password_stdin: bool = typer.Option(False, "--password-stdin",
                                                    help="Read the password from stdin."),
                output: Output | None = OutputOpt) -> None:
    """Add or change a context (the first one becomes current). The file is private
    (mode 0600): it may hold a password."""
    import os

    password = None
    if user:
        if password_stdin:
            password = sys.stdin.readline().rstrip("\r\n")
        elif os.environ.get("KCTL_PASSWORD") is not None:
            password = os.environ["KCTL_PASSWORD"]
        elif sys.stdin.isatty():
            password = typer.prompt(f"password for {user}", hide_input=True)
        else:
            raise fail("--user needs a password: --password-stdin, KCTL_PASSWORD or a "
                       "terminal to prompt on", ExitStatus.USAGE)
    ctx = _contexts()
    run(lambda: ctx.set(name, url, cacert=cacert, user=user, password=password))
    if use:
        ctx.use(name)
    run(ctx.save)
    done(f"context {name} set to {ctx.contexts[name]['url']}"
         + (" (current)" if ctx.current == name else ""), output, _context_json(ctx, name))


def _context_json(ctx: Any, name: str) -> dict[str, Any]:
    c = ctx.contexts[name]
    extra = {k: c[k] for k in ("cacert", "user") if c.get(k)}  # never the password
    return {"name": name, "url": c["url"], **extra, "current": ctx.current == name}


@context_app.command("use")
def context_use(name: str = ContextArg, output: Output | None = OutputOpt) -> None:
    """Make a context the current one."""
    ctx = _contexts()
    run(lambda: ctx.use(name))
    run(ctx.save)
    done(f"now using context {name} ({ctx.contexts[name]['url']})", output,
         _context_json(ctx, name))


@context_app.command("list")
def context_list(output: Output | None = OutputOpt) -> None:
    """Contexts, the current one marked."""
    ctx = _contexts()
    data = [{"name": n, "url": c["url"], "current": n == ctx.current}
            for n, c in sorted(ctx.contexts.items())]
    if not render.dump(data, fmt(output), console):
        console.print(render.table(["", "name", "url"], (
            ("*" if d["current"] else "", d["name"], d["url"]) for d in data)))


@context_app.command("current")
def context_current(output: Output | None = OutputOpt) -> None:
    """The current context and the URL commands use (after --url and KCTL_URL)."""
    ctx = _contexts()
    url = worker_url() or "http://127.0.0.1:8083"
    name = state.context or ctx.current
    source = ("--url / KCTL_URL" if state.url else f"context {name}" if name else "default")
    if not render.dump({"name": name, "url": url, "from": source}, fmt(output), console):
        console.print(f"{name or '(none)'}  {url}  (from {source})", highlight=False,
                      markup=False)


@context_app.command("delete")
def context_delete(name: str = ContextArg, output: Output | None = OutputOpt) -> None:
    """Forget a context."""
    ctx = _contexts()
    gone = run(lambda: _context_json(ctx, name) if name in ctx.contexts else ctx.get(name))
    run(lambda: ctx.delete(name))
    run(ctx.save)
    done(f"context {name} deleted", output, gone)


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
