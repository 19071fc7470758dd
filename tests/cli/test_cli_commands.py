"""The CLI against a live worker: what a user types, what they see, and the exit codes.

Each test is a short session at the terminal: create a connector from a file, look at it,
change it, break it, and check both the rendered answer and the worker's real state.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from support import connectors as sc
from support.golden import check_golden
from support.waiting import wait_until

from kctl.runtime.states import State

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


def test_invalid_config_prints_a_table_of_field_errors_and_exits_2(kctl, worker):
    bad = kctl.file("bad.yaml", yaml.safe_dump(
        {"name": "bad", "connector.class": SOURCE, "count": "many", "tasks.max": 0}))
    r = kctl("connector", "create", bad)
    assert r.exit_code == 2
    assert "invalid connector configuration" in r.stderr
    assert re.search(r"count\s+│.*many", r.stderr) or re.search(r"count\s+│", r.stderr), r.stderr
    assert re.search(r"tasks\.max\s+│", r.stderr), r.stderr
    assert re.search(r"topic\s+│", r.stderr), r.stderr  # required and missing
    assert r.stderr.rstrip().splitlines()[-1].startswith("error:")
    assert "Traceback" not in r.output
    assert worker.herder.connectors() == []  # nothing half-created


def test_unknown_connector_class_names_the_known_plugins(kctl):
    f = kctl.file("x.yaml", "name: x\nconnector.class: NoSuchThing\n")
    r = kctl("connector", "create", f)
    assert r.exit_code == 2
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
    assert "-count=20" in out and "+count=30" in out and "connector app updated" in out
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
    assert r.exit_code == 2 and "STOPPED" in r.stderr  # only a stopped connector

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
    assert r.exit_code == 2 and "life" in r.stderr and "Traceback" not in r.output


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
