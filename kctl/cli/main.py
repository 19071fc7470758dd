"""`kctl`: thin CLI over a worker's REST API (and the rebalance simulator).

Client commands import only typer, rich, httpx and yaml: never pyspark or the runtime,
so `kctl connector status` answers instantly.
"""

from __future__ import annotations

import difflib
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
from kctl.errors import KctlError
from kctl.exit_status import ExitStatus
from kctl.runtime.connector_config import CONNECTOR_CLASS_CONFIG

app = typer.Typer(help="kctl: Kafka-Connect-style data integration on Spark.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
worker_app = typer.Typer(help="Run a worker.", no_args_is_help=True)
connector_app = typer.Typer(help="Manage connectors on a worker.", no_args_is_help=True)
offsets_app = typer.Typer(help="Read and change a connector's offsets.", no_args_is_help=True)
plugins_app = typer.Typer(help="Connector plugins the worker knows.", no_args_is_help=True)
dlq_app = typer.Typer(help="A connector's dead letter queue.", no_args_is_help=True)
app.add_typer(worker_app, name="worker")
app.add_typer(connector_app, name="connector")
connector_app.add_typer(offsets_app, name="offsets")
app.add_typer(plugins_app, name="plugins")
app.add_typer(dlq_app, name="dlq")
try:
    from kctl.cli.rebalance import app as rebalance_app

    app.add_typer(rebalance_app, name="rebalance")
except ImportError:  # pragma: no cover - only while the simulator is absent
    pass

console = Console()
err_console = Console(stderr=True)


class Output(str, Enum):  # noqa: UP042 - typer needs a str Enum
    table = "table"
    json = "json"
    yaml = "yaml"


class State:
    url: str | None = None
    debug: bool = False


state = State()

OutputOpt = typer.Option(Output.table, "--output", "-o", help="table, json or yaml")


@app.callback()
def _main(
    url: str = typer.Option(None, "--url", envvar="KCTL_URL",
                            help="Worker REST URL [default: http://127.0.0.1:8083]"),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks on errors."),
) -> None:
    state.url = url
    state.debug = debug


def client() -> Client:
    return Client(state.url)


def print_error(message: str) -> None:
    """`error: <message>` on stderr; the message is literal text, never rich markup."""
    err_console.print(Text.assemble(("error:", "red"), " ", message), highlight=False,
                      soft_wrap=True)


def fail(message: str, code: ExitStatus = ExitStatus.ERROR) -> typer.Exit:
    print_error(message)
    return typer.Exit(code)


def run(fn: Any, hints: dict[str, str] | None = None) -> Any:
    """Call fn; turn REST and config errors into one line and an exit code.

    hints: when the worker's message contains a key, the line to show instead of its
    REST-worded advice, naming the kctl command that resolves it.
    """
    try:
        return fn()
    except ClientError as e:
        if state.debug:
            raise
        for needle, hint in (hints or {}).items():
            if e.status in (400, 409) and needle in str(e):
                raise fail(hint, ExitStatus.USAGE) from None
        if e.status == 400 and isinstance(e.body, dict) and e.body.get("errors"):
            err_console.print(render.validation_table(e.body["errors"]))
            raise fail(e.args[0].splitlines()[0], ExitStatus.USAGE) from None
        raise fail(str(e), ExitStatus.USAGE if e.status in (400, 404, 409)
                   else ExitStatus.ERROR) from None
    except KctlError as e:
        if state.debug:
            raise
        raise fail(str(e), ExitStatus.USAGE) from None


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
    """Start a standalone worker in the foreground (embedded defaults without CONFIG)."""
    from kctl.launch import run_worker  # heavy: only for this command

    raise typer.Exit(run_worker(config, list(connectors or []), console, err_console))


# -- connectors ------------------------------------------------------------------------------


@connector_app.command("list")
def connector_list(output: Output = OutputOpt) -> None:
    """List connectors with their states."""
    data = run(lambda: client().get("/connectors", params={"expand": "status"}))
    if render.dump(data, output.value, console):
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
def connector_get(name: str, output: Output = OutputOpt) -> None:
    """Show a connector's config and tasks."""
    data = run(lambda: client().get(f"/connectors/{name}"))
    if not render.dump(data, output.value, console):
        console.print(render.table(["key", "value"], sorted(data["config"].items()),
                                   title=f"{name} ({data['type']}, {len(data['tasks'])} tasks)"))


@connector_app.command("config")
def connector_config(name: str, output: Output = OutputOpt) -> None:
    """Show a connector's config."""
    data = run(lambda: client().get(f"/connectors/{name}/config"))
    if not render.dump(data, output.value, console):
        console.print(render.table(["key", "value"], sorted(data.items())))


@connector_app.command("status")
def connector_status(name: str, output: Output = OutputOpt) -> None:
    """Connector and task states, worker ids and failure traces."""
    data = run(lambda: client().get(f"/connectors/{name}/status"))
    if not render.dump(data, output.value, console):
        console.print(render.status_table(data))


def _wait(name: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = None
    with console.status(f"waiting for {name}...") as spinner:
        while time.monotonic() < deadline:
            st = run(lambda: client().get(f"/connectors/{name}/status"))
            states = [st["connector"]["state"], *(t["state"] for t in st["tasks"])]
            if states != last:
                spinner.update(f"{name}: " + ", ".join(states))
                last = states
            if "FAILED" in states:
                console.print(render.status_table(st))
                raise fail(f"connector {name} FAILED")
            if st["tasks"] and all(s in ("RUNNING", "PAUSED", "STOPPED") for s in states):
                console.print(render.status_table(st))
                return
            if st["connector"]["state"] == "STOPPED":
                console.print(render.status_table(st))
                return
            time.sleep(0.3)
    raise fail(f"timed out waiting for {name} to run")


@connector_app.command("create")
def connector_create(
    file: str = typer.Argument(..., help="Connector file (YAML/JSON/.properties) or - for stdin."),
    wait: bool = typer.Option(False, "--wait", help="Show progress until RUNNING or FAILED."),
    initial_state: str = typer.Option("RUNNING", "--initial-state", help="RUNNING, PAUSED or STOPPED"),
    timeout: float = typer.Option(120, help="Seconds --wait waits."),
) -> None:
    """Create a connector."""
    name, config = load_connector(file)
    run(lambda: client().post("/connectors", json={"name": name, "config": config,
                                                    "initial_state": initial_state.upper()}))
    console.print(f"connector {name} created", highlight=False, markup=False)
    if wait:
        _wait(name, timeout)


@connector_app.command("apply")
def connector_apply(file: str, wait: bool = typer.Option(False, "--wait"),
                    timeout: float = typer.Option(120)) -> None:
    """Create or update a connector, showing the diff."""
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
    if current is not None:
        old = [f"{k}={v}" for k, v in sorted(current.items())]
        new = [f"{k}={v}" for k, v in sorted(config.items())]
        diff = list(difflib.unified_diff(old, new, "current", "applied", lineterm="", n=0))
        if not diff:
            console.print(f"connector {name} unchanged", highlight=False, markup=False)
            return
        for line in diff[2:]:
            style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
            console.print(Text(line, style=style), highlight=False)
    run(lambda: c.put(f"/connectors/{name}/config", json=config))
    console.print(f"connector {name} {'created' if current is None else 'updated'}",
                  highlight=False, markup=False)
    if wait:
        _wait(name, timeout)


@connector_app.command("patch")
def connector_patch(name: str, settings: list[str] = typer.Argument(
        ..., help="KEY=VALUE to set, KEY= to remove")) -> None:
    """Change some keys of a connector's config."""
    patch: dict[str, str | None] = {}
    for s in settings:
        if "=" not in s:
            raise fail(f"expected KEY=VALUE, got {s!r}", ExitStatus.USAGE)
        k, v = s.split("=", 1)
        if not k.strip():
            raise fail(f"expected KEY=VALUE, got {s!r} (the key is empty)", ExitStatus.USAGE)
        patch[k.strip()] = v if v != "" else None
    run(lambda: client().patch(f"/connectors/{name}/config", json=patch))
    console.print(f"connector {name} updated", highlight=False, markup=False)


def _simple(verb: str, method: str, path: str, doc: str) -> Any:
    def command(name: str) -> None:
        run(lambda: client().request(method, path.format(name=name)))
        console.print(f"connector {name} {verb}", highlight=False, markup=False)

    command.__doc__ = doc
    return command


connector_app.command("pause")(_simple("paused", "PUT", "/connectors/{name}/pause",
                                       "Pause a connector and its tasks."))
connector_app.command("resume")(_simple("resumed", "PUT", "/connectors/{name}/resume",
                                        "Resume a paused connector."))
connector_app.command("stop")(_simple("stopped", "PUT", "/connectors/{name}/stop",
                                      "Stop a connector: its tasks end, its config stays."))
connector_app.command("delete")(_simple("deleted", "DELETE", "/connectors/{name}",
                                        "Delete a connector."))


@connector_app.command("restart")
def connector_restart(name: str,
                      include_tasks: bool = typer.Option(False, "--include-tasks"),
                      only_failed: bool = typer.Option(False, "--only-failed"),
                      task: int = typer.Option(None, "--task", help="Restart only this task.")) -> None:
    """Restart a connector (and its tasks), or one task."""
    c = client()
    if task is not None:
        run(lambda: c.post(f"/connectors/{name}/tasks/{task}/restart"))
        console.print(f"task {name}-{task} restarted", highlight=False, markup=False)
        return
    data = run(lambda: c.post(f"/connectors/{name}/restart",
                              params={"includeTasks": str(include_tasks).lower(),
                                      "onlyFailed": str(only_failed).lower()}))
    console.print(f"connector {name} restarted", highlight=False, markup=False)
    if data:
        console.print(render.status_table(data, show_traces=False))


@connector_app.command("validate")
def connector_validate(file: str, output: Output = OutputOpt) -> None:
    """Validate a connector config; per-field errors as a table."""
    name, config = load_connector(file)
    plugin = config.get(CONNECTOR_CLASS_CONFIG, "")
    if not plugin:
        raise fail("the config has no connector.class", ExitStatus.USAGE)
    data = run(lambda: client().put(f"/connector-plugins/{plugin}/config/validate", json=config))
    if render.dump(data, output.value, console):
        raise typer.Exit(ExitStatus.ERROR if data["error_count"] else ExitStatus.SUCCESS)
    errors = {c["value"]["name"]: c["value"]["errors"] for c in data["configs"]
              if c["value"]["errors"]}
    if errors:
        console.print(render.validation_table(errors))
        raise fail(f"{data['error_count']} error(s) in {name}'s config", ExitStatus.ERROR)
    console.print(f"{name}: configuration is valid", highlight=False, markup=False)


# -- offsets ---------------------------------------------------------------------------------


@offsets_app.command("get")
def offsets_get(name: str, output: Output = OutputOpt) -> None:
    """Committed offsets of a connector."""
    data = run(lambda: client().get(f"/connectors/{name}/offsets"))
    if not render.dump(data, output.value, console):
        console.print(render.table(["partition", "offset"],
                                   ((json.dumps(o["partition"], sort_keys=True),
                                     json.dumps(o["offset"], sort_keys=True))
                                    for o in data["offsets"])))


def _stop_first(name: str) -> str:
    return (f"connector {name} must be STOPPED before its offsets change: "
            f"run `kctl connector stop {name}` first")


@offsets_app.command("set")
def offsets_set(name: str, file: str = typer.Argument(
        ..., help='JSON/YAML {"offsets": [{"partition": ..., "offset": ...}]} or - for stdin')) -> None:
    """Alter offsets of a STOPPED connector."""
    body = load_offsets(file)
    data = run(lambda: client().patch(f"/connectors/{name}/offsets", json=body),
               hints={"STOPPED state": _stop_first(name)})
    console.print(data["message"], highlight=False, markup=False)


@offsets_app.command("reset")
def offsets_reset(name: str) -> None:
    """Forget all offsets of a STOPPED connector."""
    data = run(lambda: client().delete(f"/connectors/{name}/offsets"),
               hints={"STOPPED state": _stop_first(name)})
    console.print(data["message"], highlight=False, markup=False)


# -- plugins ---------------------------------------------------------------------------------


@plugins_app.command("list")
def plugins_list(output: Output = OutputOpt) -> None:
    """Connector plugins the worker can run."""
    data = run(lambda: client().get("/connector-plugins"))
    if not render.dump(data, output.value, console):
        console.print(render.table(["class", "type", "version"],
                                   ((p["class"], p["type"], p["version"]) for p in data)))


# -- dlq -------------------------------------------------------------------------------------


@dlq_app.command("show")
def dlq_show(name: str, limit: int = typer.Option(100, help="Most records shown."),
             output: Output = OutputOpt) -> None:
    """Records a connector rejected: when, stage, exception, origin, payload preview."""
    data = run(lambda: client().get(f"/connectors/{name}/dlq", params={"limit": limit}))
    records = data["records"]
    if render.dump(records, output.value, console):
        return

    def origin(r: dict[str, Any]) -> str:
        if r.get("source_partition"):
            return f"{r['source_partition']} @ {r['source_offset']}"
        if r.get("topic"):
            return f"{r['topic']}-{r['partition']}@{r['offset']}"
        return ""

    console.print(render.table(
        ["time", "stage", "exception", "origin", "value"],
        ((r["time"], r["stage"], f"{(r['exception'] or '').rsplit('.', 1)[-1]}: {r['message']}",
          origin(r), r["value"]) for r in records),
        title=f"{name}: {len(records)} rejected record(s)"))


@dlq_app.command("replay")
def dlq_replay(name: str, to: str = typer.Option(None, "--to",
                                                 help="Send to this topic instead of the original.")) -> None:
    """Re-send a connector's rejected records (e.g. after fixing a transform)."""
    params = {"to": to} if to else {}
    data = run(lambda: client().post(f"/connectors/{name}/dlq/replay", params=params))
    console.print(f"{data['replayed']} record(s) replayed", highlight=False, markup=False)


GLOBAL_FLAGS = frozenset({"--debug"})
GLOBAL_VALUED = frozenset({"--url"})


def hoist_global_options(args: list[str]) -> list[str]:
    """Move `--url X` / `--url=X` / `--debug` before the subcommand, as kubectl accepts them.

    Click binds options to the command they follow, so `kctl connector list --url U` would
    be "No such option". Nothing after `--` is touched.
    """
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


def main() -> None:
    """The `kctl` console script: an unexpected exception is still one line without --debug."""
    try:
        app(args=hoist_global_options(sys.argv[1:]), prog_name="kctl")
    except Exception as e:  # a kctl bug, not a user error; --debug shows where
        if state.debug:
            raise
        print_error(f"unexpected {type(e).__name__}: {e} (run with --debug for the traceback)")
        sys.exit(ExitStatus.ERROR)


if __name__ == "__main__":
    main()
