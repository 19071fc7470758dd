"""The CLI against a live worker: what a user types, what they see, and the exit codes.

Each test is a short session at the terminal: create a connector from a file, look at it,
change it, break it, and check both the rendered answer and the worker's real state.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml
from support import connectors as sc
from support.golden import check_golden
from support.waiting import wait_until

from kctl.api import ConfigDef, SourceConnector, SourceRecord, SourceTask
from kctl.exit_status import ExitStatus
from kctl.states import State

SOURCE = "support.connectors.CounterSourceConnector"
SINK = "support.connectors.CollectingSinkConnector"
GOLDEN = Path(__file__).parent / "golden"


def source_file(kctl, name: str, **extra: object) -> str:
    doc = {"name": name, "connector.class": SOURCE, "topic": f"{name}-t", "count": 20, **extra}
    return kctl.file(f"{name}.yaml", yaml.safe_dump(doc))


def running(worker, name: str, tasks: int = 1) -> None:
    def ok() -> bool:
        st = worker.herder.connector_status(name)
        return st.state is State.RUNNING and [t.state for t in st.tasks] == [State.RUNNING] * tasks
    wait_until(ok, message=f"{name} RUNNING")


def test_create_list_get_config_in_every_output_format(kctl, worker):
    out = kctl.ok("connector", "create", source_file(kctl, "counter", **{"tasks.max": 2}))
    assert out.strip() == "connector counter created"
    running(worker, "counter", tasks=2)

    table = kctl.ok("connector", "list")
    row = next(line for line in table.splitlines() if "counter" in line)
    assert "source" in row and "RUNNING" in row and "2/2" in row

    as_json = json.loads(kctl.ok("connector", "list", "-o", "json"))
    assert as_json["counter"]["status"]["connector"]["state"] == "RUNNING"
    as_yaml = yaml.safe_load(kctl.ok("connector", "list", "-o", "yaml"))
    assert as_yaml == as_json

    info = json.loads(kctl.ok("connector", "get", "counter", "-o", "json"))
    assert info["type"] == "source" and [t["task"] for t in info["tasks"]] == [0, 1]
    assert "counter (source, 2 tasks)" in kctl.ok("connector", "get", "counter")
    config = yaml.safe_load(kctl.ok("connector", "config", "counter", "-o", "yaml"))
    assert config["connector.class"] == SOURCE and config["tasks.max"] == "2"
    assert re.search(r"topic\s+│\s+counter-t", kctl.ok("connector", "config", "counter"))


def test_create_from_stdin_as_json_and_wait_until_running(kctl, worker):
    doc = json.dumps({"name": "piped", "config": {"connector.class": SOURCE, "topic": "p"}})
    out = kctl.ok("connector", "create", "-", "--wait", input=doc)
    assert "connector piped created" in out
    assert re.search(r"task\s+│\s+0\s+│\s+RUNNING", out), out
    assert worker.herder.connector_status("piped").state is State.RUNNING


def test_status_table_matches_the_golden_file(kctl, worker):
    kctl.ok("connector", "create", source_file(kctl, "golden-src", **{"tasks.max": 3}))
    running(worker, "golden-src", tasks=3)
    out = kctl.ok("connector", "status", "golden-src")
    worker_id = worker.herder.worker_id
    normalised = out.replace(worker_id, "WORKER".ljust(len(worker_id)))
    check_golden(GOLDEN / "status.txt", normalised)


def test_failed_task_shows_its_trace_in_status(kctl, worker):
    kctl.ok("connector", "create", source_file(kctl, "breaks", **{"fail.at": 5}))
    wait_until(lambda: [t.state for t in worker.herder.connector_status("breaks").tasks]
               == [State.FAILED], message="task FAILED")
    out = kctl.ok("connector", "status", "breaks")
    assert "FAILED" in out and "boom at 5" in out
    st = json.loads(kctl.ok("connector", "status", "breaks", "-o", "json"))
    assert "RuntimeError: boom at 5" in st["tasks"][0]["trace"]
    # restart only the failed task: it fails again at the same place, deterministically
    out = kctl.ok("connector", "restart", "breaks", "--include-tasks", "--only-failed")
    assert "connector breaks restarted" in out


def test_invalid_config_prints_a_table_of_field_errors_and_exits_1(kctl, worker):
    bad = kctl.file("bad.yaml", yaml.safe_dump(
        {"name": "bad", "connector.class": SOURCE, "count": "many", "tasks.max": 0}))
    r = kctl("connector", "create", bad)
    assert r.exit_code == ExitStatus.ERROR  # the operation failed; kctl was called right
    assert "invalid connector configuration" in r.stderr
    assert re.search(r"count\s+│ Invalid value 'many' for configuration count", r.stderr), \
        r.stderr
    assert re.search(r"tasks\.max\s+│", r.stderr), r.stderr
    assert re.search(r"topic\s+│", r.stderr), r.stderr  # required and missing
    assert r.stderr.rstrip().splitlines()[-1].startswith("error:")
    assert "Traceback" not in r.output
    assert worker.herder.connectors() == []  # nothing half-created


def test_unknown_connector_class_names_the_known_plugins(kctl):
    f = kctl.file("x.yaml", "name: x\nconnector.class: NoSuchThing\n")
    r = kctl("connector", "create", f)
    assert r.exit_code == ExitStatus.ERROR
    assert "NoSuchThing" in r.stderr and "FileSource" in r.stderr and "FileSink" in r.stderr


def test_validate_command_lists_errors_without_creating(kctl, worker):
    bad = kctl.file("v.yaml", yaml.safe_dump({"name": "v", "connector.class": SOURCE,
                                               "count": "lots"}))
    r = kctl("connector", "validate", bad)
    assert r.exit_code == 1
    assert re.search(r"count\s+│", r.stdout) and "error(s) in v's config" in r.stderr
    good = source_file(kctl, "v")
    assert "v: configuration is valid" in kctl.ok("connector", "validate", good)
    assert json.loads(kctl.ok("connector", "validate", good, "-o", "json"))["error_count"] == 0
    assert worker.herder.connectors() == []


def test_apply_shows_the_diff_then_patch_and_unchanged(kctl, worker):
    f = source_file(kctl, "app")
    assert "connector app created" in kctl.ok("connector", "apply", f)
    assert "connector app unchanged" in kctl.ok("connector", "apply", f)
    f2 = source_file(kctl, "app", count=30)
    out = kctl.ok("connector", "apply", f2)
    assert re.search(r"count\s+│\s+changed\s+│\s+20\s+│\s+30\s+│", out), out
    assert "app: 1 key(s) changed" in out and "connector app updated" in out
    assert worker.herder.connector_config("app")["count"] == "30"
    kctl.ok("connector", "patch", "app", "per.poll=5", "count=")
    cfg = worker.herder.connector_config("app")
    assert cfg["per.poll"] == "5" and "count" not in cfg
    r = kctl("connector", "patch", "app", "nonsense")
    assert r.exit_code == 2 and "expected KEY=VALUE" in r.stderr


def test_pause_resume_stop_offsets_and_delete(kctl, worker):
    kctl.ok("connector", "create", source_file(kctl, "life", count=50))
    running(worker, "life")
    wait_until(lambda: worker.herder.connector_offsets("life"), message="offsets committed")

    assert "connector life paused" in kctl.ok("connector", "pause", "life")
    wait_until(lambda: worker.herder.connector_status("life").state is State.PAUSED)
    kctl.ok("connector", "resume", "life")
    running(worker, "life")

    r = kctl("connector", "offsets", "reset", "life")
    assert r.exit_code == ExitStatus.CONFLICT and "STOPPED" in r.stderr  # only when stopped
    assert "`kctl connector stop life`" in r.stderr and "'PUT' request" not in r.stderr

    kctl.ok("connector", "stop", "life")
    wait_until(lambda: worker.herder.connector_status("life").state is State.STOPPED)
    got = json.loads(kctl.ok("connector", "offsets", "get", "life", "-o", "json"))
    assert got["offsets"] == [{"partition": {"task": 0}, "offset": {"i": 49}}]
    assert '{"task": 0}' in kctl.ok("connector", "offsets", "get", "life")

    new = kctl.file("off.json", json.dumps([{"partition": {"task": 0}, "offset": {"i": 9}}]))
    kctl.ok("connector", "offsets", "set", "life", new)
    assert worker.herder.connector_offsets("life") == [
        {"partition": {"task": 0}, "offset": {"i": 9}}]
    kctl.ok("connector", "offsets", "reset", "life")
    assert worker.herder.connector_offsets("life") == []

    assert "connector life deleted" in kctl.ok("connector", "delete", "life")
    r = kctl("connector", "status", "life")
    assert r.exit_code == ExitStatus.NOT_FOUND and "life" in r.stderr
    assert "Traceback" not in r.output


def test_plugins_list_shows_builtins_and_test_plugins(kctl):
    table = kctl.ok("plugins", "list")
    assert "FileSource" in table or "kctl.connectors.file" in table
    plugins = json.loads(kctl.ok("plugins", "list", "-o", "json"))
    types = {p["class"].rsplit(".", 1)[-1]: p["type"] for p in plugins}
    assert types["FileSourceConnector"] == "source" and types["FileSinkConnector"] == "sink"


def test_source_to_sink_through_the_cli(kctl, worker):
    kctl.ok("connector", "create", source_file(kctl, "feed", count=40))
    sink = kctl.file("sink.yaml", yaml.safe_dump(
        {"name": "collect", "connector.class": SINK, "topics": "feed-t"}))
    kctl.ok("connector", "create", sink, "--wait")
    wait_until(lambda: len(sc.SINK_RECEIVED["collect"]) >= 40, message="40 records collected")
    assert sorted(v for *_, v in sc.SINK_RECEIVED["collect"]) == list(range(40))


def test_unreadable_and_malformed_files_are_one_line_errors(kctl, tmp_path):
    r = kctl("connector", "create", str(tmp_path / "missing.yaml"))
    assert r.exit_code == 2 and "cannot read" in r.stderr and "missing.yaml" in r.stderr
    f = kctl.file("broken.yaml", "name: [unclosed\n")
    r = kctl("connector", "create", f)
    assert r.exit_code == 2 and "broken.yaml" in r.stderr and "not valid YAML" in r.stderr
    assert "Traceback" not in r.output


# -- files and stdin the user gets wrong --------------------------------------------------------

# every command that reads a document, with what a wrong shape of document is told
READERS = {
    "create": (("connector", "create"), "expected a mapping with name and config"),
    "apply": (("connector", "apply"), "expected a mapping with name and config"),
    "validate": (("connector", "validate"), "expected a mapping with name and config"),
    "offsets-set": (("connector", "offsets", "set", "any"), "expected {\"offsets\": ["),
}
BROKEN = {
    "missing": (None, "cannot read"),
    "not-yaml": (b"name: [unclosed\nconfig: {\n", "not valid YAML or JSON: "),
    "cut-json": (b'{"name": "x", "config": {"topic": ', "not valid YAML or JSON: "),
    "binary": (b"\xff\xfe\x00\x01 not text", "not UTF-8"),
    "a-list": (b"- name: x\n- connector.class: FileSource\n", None),  # None: the shape message
    "a-scalar": (b"just words\n", None),
}


def assert_one_line_error(r, *fragments: str) -> None:
    assert r.exit_code == 2, f"exit {r.exit_code}\n{r.output}"
    assert "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for f in fragments:
        assert f in lines[0], lines[0]
    assert r.stdout == ""


@pytest.mark.parametrize("broken", BROKEN, ids=list(BROKEN))
@pytest.mark.parametrize("reader", READERS, ids=list(READERS))
def test_a_missing_unreadable_or_misshapen_file_is_one_line_and_exit_2(kctl, worker, tmp_path,
                                                                       reader, broken):
    args, shape = READERS[reader]
    content, fragment = BROKEN[broken]
    if (reader, broken) == ("offsets-set", "a-list"):  # a list is fine; its entries are not
        shape = 'offsets[0] must be {"partition": {...}'
    path = tmp_path / f"{broken}.yaml"
    if content is not None:
        path.write_bytes(content)
    r = kctl(*args, str(path))
    assert_one_line_error(r, str(path), fragment or shape)
    assert worker.herder.connectors() == []


@pytest.mark.parametrize("reader", READERS, ids=list(READERS))
def test_stdin_gets_the_same_one_line_errors(kctl, reader):
    args, shape = READERS[reader]
    assert_one_line_error(kctl(*args, "-", input="name: [unclosed\n"), "<stdin>",
                          "not valid YAML or JSON: ", "line 2")
    assert_one_line_error(kctl(*args, "-", input="just words\n"), "<stdin>", shape)


@pytest.mark.parametrize("body, fragment", [
    ({"offsets": {"partition": {"task": 0}, "offset": {"i": 1}}}, "got dict"),
    ({"offset": [{"partition": {"task": 0}, "offset": {"i": 1}}]}, "got dict"),
    (["task-0"], 'offsets[0] must be {"partition": {...}'),
    ([{"offset": {"i": 1}}], "offsets[0]"),
    ([{"partition": {"task": 0}, "offset": {"i": 1}}, {"partition": 0, "offset": None}],
     "offsets[1]"),
    ([{"partition": {"task": 0}, "offset": 7}], "offsets[0]"),
], ids=["not-a-list", "misspelt-key", "strings", "no-partition", "partition-not-object",
        "offset-not-object"])
def test_offsets_set_checks_the_shape_before_asking_the_worker(kctl, worker, body, fragment):
    kctl.ok("connector", "create", source_file(kctl, "shaped", count=5), "--initial-state",
            "STOPPED")
    f = kctl.file("offsets.json", json.dumps(body))
    assert_one_line_error(kctl("connector", "offsets", "set", "shaped", f), fragment)
    assert worker.herder.connector_offsets("shaped") == []  # nothing was written


def test_offsets_set_accepts_a_null_offset_and_the_rest_api_shape(kctl, worker):
    kctl.ok("connector", "create", source_file(kctl, "nulls", count=5), "--initial-state",
            "STOPPED")
    body = {"offsets": [{"partition": {"task": 0}, "offset": {"i": 3}},
                        {"partition": {"task": 1}, "offset": None}]}
    out = kctl.ok("connector", "offsets", "set", "nulls", "-", input=yaml.safe_dump(body))
    assert "altered successfully" in out
    assert worker.herder.connector_offsets("nulls") == [
        {"partition": {"task": 0}, "offset": {"i": 3}}]


def test_patch_with_an_empty_key_is_refused(kctl, worker):
    kctl.ok("connector", "create", source_file(kctl, "keyless"))
    assert_one_line_error(kctl("connector", "patch", "keyless", "=5"), "the key is empty")
    assert "" not in worker.herder.connector_config("keyless")


def test_worker_values_are_shown_literally_not_as_markup(kctl, worker):
    # rich would swallow "[a-z]" as a style tag and crash on "[/x]"
    f = source_file(kctl, "lit", note="see [/x]")
    kctl.ok("connector", "create", f)
    assert "see [/x]" in kctl.ok("connector", "config", "lit")
    kctl.ok("connector", "patch", "lit", "note=orders-[a-z]+")
    assert "orders-[a-z]+" in kctl.ok("connector", "config", "lit")
    diff = kctl.ok("connector", "apply", f)
    assert re.search(r"note\s+│\s+changed\s+│\s+orders-\[a-z\]\+\s+│\s+see \[/x\]", diff), diff


def test_help_texts_say_what_the_commands_do():
    from typer.testing import CliRunner

    from kctl.cli.main import app

    out = CliRunner().invoke(app, ["connector", "--help"], env={"COLUMNS": "200"}).stdout
    assert "Pause a connector" in out and "Paused a connector" not in out
    assert "Resume a paused connector" in out and "Delete a connector" in out


# -- --wait on a connector that fails ----------------------------------------------------------


class BrokenStartTask(SourceTask):
    """Fails in start(), so its task goes UNASSIGNED -> FAILED without ever RUNNING."""

    def start(self, props: Mapping[str, str]) -> None:
        raise PermissionError("no access")  # short: the table is 80 columns wide

    def poll(self) -> list[SourceRecord] | None:
        return None

    def stop(self) -> None:
        pass


class BrokenStartConnector(SourceConnector):
    def config(self) -> ConfigDef:
        return ConfigDef()

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[SourceTask]:
        return BrokenStartTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass


def test_create_wait_on_a_connector_whose_task_fails_exits_1_with_the_trace(kctl, worker):
    f = kctl.file("doomed.yaml", yaml.safe_dump(
        {"name": "doomed", "connector.class": f"{__name__}.BrokenStartConnector"}))
    r = kctl("connector", "create", f, "--wait", "--timeout", "30")
    assert r.exit_code == 1, r.output
    assert "connector doomed created" in r.stdout
    assert re.search(r"task\s+│\s+0\s+│\s+FAILED", r.stdout), r.stdout
    assert "PermissionError: no access" in r.stdout  # the trace, in the status table
    assert r.stderr.strip() == "error: connector doomed FAILED"
    assert worker.herder.connector_status("doomed").tasks[0].state is State.FAILED


def test_machine_output_is_never_wrapped_and_keeps_trace_indentation(kctl, worker):
    long_path = "/data/" + "x" * 184
    kctl.ok("connector", "create", source_file(kctl, "longpath", path=long_path))
    text = kctl.ok("connector", "config", "longpath", "-o", "yaml")
    assert yaml.safe_load(text)["path"] == long_path
    assert json.loads(kctl.ok("connector", "config", "longpath", "-o", "json"))["path"] == long_path
    assert "\x1b[" not in text

    from kctl.cli.render import machine_text
    trace = "Traceback:\n  File 'x', line 1\n    boom()\nValueError: boom"
    assert yaml.safe_load(machine_text({"trace": trace}, "yaml")) == {"trace": trace}


def test_duplicate_key_in_a_connector_file_is_an_error_naming_key_and_line(kctl, tmp_path):
    text = f"name: dup\nconnector.class: {SOURCE}\ntopic: a\ncount: 3\ntopic: b\n"
    r = kctl("connector", "create", kctl.file("dup.yaml", text))
    assert r.exit_code != 0
    assert "duplicate key 'topic'" in r.output and "line 5" in r.output and "line 3" in r.output

    from kctl.errors import ConfigError
    from kctl.runtime.connector_config import load_connector_file
    with pytest.raises(ConfigError, match=r"duplicate key 'topic' \(first given at line 3\)"):
        load_connector_file(str(tmp_path / "dup.yaml"))


def test_table_cells_escape_control_characters():
    from rich.console import Console

    from kctl.cli import render
    console = Console(record=True, width=200, force_terminal=False)
    console.print(render.table(["value"], [["a\x1b[2Jb\x00c\x9bd"]]))
    text = console.export_text()
    assert "a\\x1b[2Jb\\x00c\\x9bd" in text
    assert not any(ch in text for ch in "\x1b\x00\x9b")
    assert render.escape_control("tab\tand\nnewline stay") == "tab\tand\nnewline stay"


def test_machine_output_escapes_control_characters():
    from kctl.cli.render import machine_text
    data = {"value": "a\x1b[2Jb\x00c\x9bd\x7f", "é": "ü"}
    for fmt in ("json", "yaml"):
        text = machine_text(data, fmt)
        assert not any(ch in text for ch in "\x1b\x00\x9b\x7f"), (fmt, text)
        assert (json.loads(text) if fmt == "json" else yaml.safe_load(text)) == data
