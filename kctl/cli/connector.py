"""`kctl connector ...`: a connector's life on a worker (list, get, status, create, apply,
patch, pause/resume/stop/delete, restart, validate) over REST; offsets are `offsets.py`."""

from __future__ import annotations

import time
from typing import Any

import typer
from rich.text import Text

from kctl.cli import render
from kctl.cli.client import ClientError
from kctl.cli.common import (
    ConnectorArg,
    Output,
    OutputOpt,
    client,
    console,
    done,
    err_console,
    fail,
    fmt,
    load_connector,
    run,
)
from kctl.exit_status import ExitStatus
from kctl.runtime.connector_config import CONNECTOR_CLASS_CONFIG

app = typer.Typer(help="Manage connectors on a worker.", no_args_is_help=True)


@app.command("list")
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


@app.command("get")
def connector_get(name: str = ConnectorArg, output: Output | None = OutputOpt) -> None:
    """Show a connector's config and tasks."""
    data = run(lambda: client().get(f"/connectors/{name}"))
    if not render.dump(data, fmt(output), console):
        console.print(render.table(["key", "value"], sorted(data["config"].items()),
                                   title=f"{name} ({data['type']}, {len(data['tasks'])} tasks)"))


@app.command("config")
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


@app.command("status")
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


@app.command("create")
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


@app.command("apply")
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


@app.command("patch")
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


app.command("pause")(_simple("paused", "PUT", "/connectors/{name}/pause",
                                       "Pause a connector and its tasks."))
app.command("resume")(_simple("resumed", "PUT", "/connectors/{name}/resume",
                                        "Resume a paused connector."))
app.command("stop")(_simple("stopped", "PUT", "/connectors/{name}/stop",
                                      "Stop a connector: its tasks end, its config stays."))
app.command("delete")(_simple("deleted", "DELETE", "/connectors/{name}",
                                        "Delete a connector.", before=True))


@app.command("restart")
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


@app.command("validate")
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
