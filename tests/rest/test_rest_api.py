"""The REST API of a live in-process worker, request by request, as a Kafka Connect client sees it.

Each test is a short conversation with the worker over HTTP: create a connector, watch it
run, change it, pause, stop and restart it, move its offsets, delete it; and the answers a
client relies on: paths, JSON shapes, status codes and the `{"error_code", "message"}` body of
every error. The shapes and codes are Kafka Connect's (ConnectorsResource,
ConnectorPluginsResource, RootResource). Pure-Python connectors keep it fast: no Spark starts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import pytest
from support import connectors as sc
from support.waiting import wait_until

from kctl import __version__
from kctl.launch import StandaloneWorker
from kctl.rest.server import RestServer
from kctl.runtime.worker_config import WorkerConfig

SOURCE = "support.connectors.CounterSourceConnector"
SINK = "support.connectors.CollectingSinkConnector"
FILE_SOURCE = "kctl.connectors.file.source.FileSourceConnector"
FILE_SINK = "kctl.connectors.file.sink.FileSinkConnector"
WAIT = 20.0  # seconds; every state change here takes well under one


# -- workers and HTTP clients aimed at them ------------------------------------------------------


@contextlib.contextmanager
def live_worker(state_dir: Path) -> Iterator[StandaloneWorker]:
    w = StandaloneWorker(WorkerConfig({"state.dir": str(state_dir),
                                       "listeners": "http://127.0.0.1:0",
                                       "offset.flush.interval.ms": 100}))
    w.start()
    try:
        yield w
    finally:
        w.stop()


@pytest.fixture
def worker(tmp_path) -> Iterator[StandaloneWorker]:
    """A fresh worker per test (about 0.2 s) for every test that creates connectors."""
    with live_worker(tmp_path / "state") as w:
        yield w


@pytest.fixture
def api(worker) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=worker.rest.url, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def idle(tmp_path_factory) -> Iterator[httpx.Client]:
    """One worker shared by the read-only tests: nothing ever creates a connector on it."""
    with live_worker(tmp_path_factory.mktemp("idle") / "state") as w, \
            httpx.Client(base_url=w.rest.url, timeout=30) as client:
        yield client
    assert w.herder.connectors() == []


@pytest.fixture
def name(request) -> str:
    """A connector name unique in the session: the test connectors keep per-name counters."""
    return "rest-" + request.node.name.removeprefix("test_")[:50]


def source(name: str, **extra: Any) -> dict[str, Any]:
    return {"connector.class": SOURCE, "topic": f"{name}-t", "count": 20, **extra}


def create(api: httpx.Client, name: str, config: dict[str, Any], **body: Any) -> dict:
    r = api.post("/connectors", json={"name": name, "config": config, **body})
    assert r.status_code == 201, r.text
    return r.json()


def status(api: httpx.Client, name: str) -> dict:
    r = api.get(f"/connectors/{name}/status")
    assert r.status_code == 200, r.text
    return r.json()


def wait_for(api: httpx.Client, name: str, state: str, tasks: list[str] | None = None) -> dict:
    """Until the connector is in `state` and its tasks in `tasks` (default: one task, same state)."""
    want_tasks = [state] if tasks is None else tasks

    def reached() -> dict | None:
        st = status(api, name)
        ok = (st["connector"]["state"] == state
              and [t["state"] for t in st["tasks"]] == want_tasks)
        return st if ok else None

    return wait_until(reached, timeout=WAIT, message=f"{name} {state} with tasks {want_tasks}")


def offsets(api: httpx.Client, name: str) -> list[dict]:
    r = api.get(f"/connectors/{name}/offsets")
    assert r.status_code == 200, r.text
    assert set(r.json()) == {"offsets"}
    return r.json()["offsets"]


def wait_offsets(api: httpx.Client, name: str, expected: list[dict]) -> None:
    wait_until(lambda: offsets(api, name) == expected, timeout=WAIT,
               message=f"{name} offsets == {expected}")


def assert_error(r: httpx.Response, code: int, *fragments: str) -> dict:
    """Every error is JSON {"error_code": <the HTTP status>, "message": <text>} (+ extras)."""
    assert r.status_code == code, f"{r.status_code} {r.text}"
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert body["error_code"] == code
    assert isinstance(body["message"], str) and body["message"]
    for f in fragments:
        assert f in body["message"], body["message"]
    return body


# -- the worker itself ----------------------------------------------------------------------------


def test_root_tells_the_version_commit_and_cluster(idle):
    r = idle.get("/")
    assert r.status_code == 200
    info = r.json()
    assert set(info) >= {"version", "commit", "kafka_cluster_id"}
    assert info["version"] == __version__
    assert isinstance(info["kafka_cluster_id"], str) and info["kafka_cluster_id"]


def test_health_is_200_and_healthy_once_started(idle):
    r = idle.get("/health")
    assert r.status_code == 200
    assert r.json()["status"] == "healthy"
    assert isinstance(r.json()["message"], str)


def test_openapi_document_is_served_and_lists_the_status_path(idle):
    r = idle.get("/openapi.json")
    assert r.status_code == 200
    doc = r.json()
    assert "openapi" in doc
    assert "/connectors/{name}/status" in doc["paths"]
    assert "get" in doc["paths"]["/connectors/{name}/status"]
    assert "/connector-plugins/{plugin}/config/validate" in doc["paths"]


def test_the_api_listens_on_loopback_by_default(worker):
    default = WorkerConfig({})
    assert default.get_list("listeners") == ["http://127.0.0.1:8083"]
    assert default.listener() == ("127.0.0.1", 8083)
    assert RestServer.__init__.__defaults__ == ("127.0.0.1", 8083, None)  # None: no TLS
    # the live worker: its URL and the socket it really bound
    assert urlsplit(worker.rest.url).hostname == "127.0.0.1"
    assert worker.rest._sock.getsockname()[0] == "127.0.0.1"
    assert worker.herder.worker_id == f"127.0.0.1:{worker.rest.port}"


# -- creating connectors --------------------------------------------------------------------------


def test_create_answers_201_with_the_connector_info_and_it_runs(api, name):
    r = api.post("/connectors", json={"name": name, "config": source(name, **{"tasks.max": 2})})
    assert r.status_code == 201
    info = r.json()
    assert set(info) == {"name", "config", "tasks", "type"}
    assert info["name"] == name and info["type"] == "source"
    # values come back as strings, and the name is put into the config, as Kafka does
    assert info["config"] == {"connector.class": SOURCE, "topic": f"{name}-t", "count": "20",
                              "tasks.max": "2", "name": name}
    assert info["tasks"] == [{"connector": name, "task": 0}, {"connector": name, "task": 1}]

    wait_for(api, name, "RUNNING", ["RUNNING", "RUNNING"])
    assert api.get("/connectors").json() == [name]
    assert api.get(f"/connectors/{name}").json() == info


def test_create_and_put_that_create_answer_201_with_a_location(api, name):
    r = api.post("/connectors", json={"name": name, "config": source(name)})
    assert r.status_code == 201
    location = r.headers["location"]
    assert location == f"{str(api.base_url).rstrip('/')}/connectors/{name}"  # absolute, as Kafka
    assert api.get(location).json()["name"] == name
    other = f"{name}-put"
    r = api.put(f"/connectors/{other}/config", json=source(other))
    assert r.status_code == 201 and r.headers["location"].endswith(f"/connectors/{other}")
    r = api.put(f"/connectors/{other}/config", json=source(other, count=3))
    assert r.status_code == 200 and "location" not in r.headers  # an update creates nothing


def test_creating_a_taken_name_is_409(api, name):
    create(api, name, source(name))
    r = api.post("/connectors", json={"name": name, "config": source(name, count=5)})
    assert_error(r, 409, name, "already exists")
    assert api.get(f"/connectors/{name}/config").json()["count"] == "20"  # untouched


@pytest.mark.parametrize("body, field", [
    ({"config": {"connector.class": SOURCE, "topic": "t"}}, "name"),
    ({"name": "", "config": {"connector.class": SOURCE, "topic": "t"}}, "name"),
    ({"name": "rest-no-config"}, "config"),
    ({"name": "rest-config-list", "config": ["connector.class", SOURCE]}, "config"),
], ids=["no-name", "empty-name", "no-config", "config-not-an-object"])
def test_create_needs_a_name_and_a_config_object(api, body, field):
    body = assert_error(api.post("/connectors", json=body), 400)
    assert field in body["message"] and field in body["errors"]
    assert api.get("/connectors").json() == []


def test_a_name_with_a_slash_is_rejected(api):
    r = api.post("/connectors", json={"name": "a/b", "config": source("a")})
    assert_error(r, 400, "/")
    assert api.get("/connectors").json() == []


def test_initial_state_paused_creates_a_paused_connector(api, name):
    create(api, name, source(name), initial_state="PAUSED")
    st = wait_for(api, name, "PAUSED")
    assert st["tasks"][0]["id"] == 0
    # resume: it runs and produces
    assert api.put(f"/connectors/{name}/resume").status_code == 202
    wait_for(api, name, "RUNNING")
    wait_offsets(api, name, [{"partition": {"task": 0}, "offset": {"i": 19}}])


def test_initial_state_stopped_creates_a_stopped_connector_without_tasks(api, name):
    info = create(api, name, source(name), initial_state="STOPPED")
    assert info["tasks"] == []
    st = wait_for(api, name, "STOPPED", [])
    assert st["tasks"] == []
    assert api.get(f"/connectors/{name}/tasks").json() == []
    assert sc.TASK_STARTS[name] == 0  # no task ever started


def test_initial_state_running_is_the_default_and_case_does_not_matter(api, name):
    create(api, name, source(name), initial_state="running")
    wait_for(api, name, "RUNNING")


def test_an_unknown_initial_state_is_400_and_nothing_is_created(api, name):
    r = api.post("/connectors", json={"name": name, "config": source(name),
                                      "initial_state": "SLEEPING"})
    body = assert_error(r, 400, "initial_state", "SLEEPING")
    assert "initial_state" in body["errors"]
    assert_error(api.get(f"/connectors/{name}"), 404)


def test_an_invalid_config_is_400_with_an_error_per_field(api, name):
    r = api.post("/connectors", json={"name": name, "config": {
        "connector.class": SOURCE, "count": "many", "tasks.max": 0}})
    body = assert_error(r, 400, "Connector configuration is invalid", "error(s)")
    errors = body["errors"]
    assert set(errors) == {"topic", "count", "tasks.max"}  # topic: required and missing
    assert all(isinstance(msgs, list) and msgs for msgs in errors.values())
    assert any("many" in m for m in errors["count"])
    assert "/connector-plugins/{connectorType}/config/validate" in body["message"]
    assert api.get("/connectors").json() == []  # nothing half-created


def test_an_unknown_connector_class_is_400_and_names_the_known_plugins(api, name):
    r = api.post("/connectors", json={"name": name, "config": {"connector.class": "NoSuchThing"}})
    body = assert_error(r, 400, "NoSuchThing", "FileSource", "FileSink")
    assert "connector.class" in body["errors"]
    assert api.get("/connectors").json() == []


# -- reading connectors ---------------------------------------------------------------------------


def test_list_connectors_plain_and_expanded(api, worker, name):
    src, snk = f"{name}-src", f"{name}-snk"
    create(api, src, source(src))
    create(api, snk, {"connector.class": SINK, "topics": f"{src}-t"})
    wait_for(api, src, "RUNNING")
    wait_for(api, snk, "RUNNING")

    assert sorted(api.get("/connectors").json()) == sorted([src, snk])

    by_status = api.get("/connectors", params={"expand": "status"}).json()
    assert set(by_status) == {src, snk}
    assert all(set(entry) == {"status"} for entry in by_status.values())
    assert by_status[src]["status"] == status(api, src)
    assert by_status[snk]["status"]["type"] == "sink"

    by_info = api.get("/connectors", params={"expand": "info"}).json()
    assert all(set(entry) == {"info"} for entry in by_info.values())
    assert by_info[snk]["info"] == api.get(f"/connectors/{snk}").json()

    both = api.get("/connectors", params=[("expand", "status"), ("expand", "info")]).json()
    assert set(both) == {src, snk}
    for n, entry in both.items():
        assert set(entry) == {"status", "info"}
        assert entry["status"]["name"] == entry["info"]["name"] == n
        assert entry["status"]["connector"]["state"] == "RUNNING"

    # Kafka ignores expansions it does not know
    assert api.get("/connectors", params={"expand": "bogus"}).json() == {src: {}, snk: {}}


def test_list_expanded_with_no_connectors_is_an_empty_object(api):
    assert api.get("/connectors").json() == []
    assert api.get("/connectors", params={"expand": "status"}).json() == {}


def test_status_shape_for_a_running_source(api, worker, name):
    create(api, name, source(name, **{"tasks.max": 2}))
    st = wait_for(api, name, "RUNNING", ["RUNNING", "RUNNING"])
    wid = worker.herder.worker_id
    assert st == {
        "name": name,
        "connector": {"state": "RUNNING", "worker_id": wid},
        "tasks": [{"id": 0, "state": "RUNNING", "worker_id": wid},
                  {"id": 1, "state": "RUNNING", "worker_id": wid}],
        "type": "source",
    }


def test_task_configs_and_task_status(api, worker, name):
    create(api, name, source(name, **{"tasks.max": 2}))
    wait_for(api, name, "RUNNING", ["RUNNING", "RUNNING"])

    tasks = api.get(f"/connectors/{name}/tasks").json()
    assert [t["id"] for t in tasks] == [{"connector": name, "task": 0},
                                        {"connector": name, "task": 1}]
    assert [t["config"]["task.index"] for t in tasks] == ["0", "1"]
    assert all(t["config"]["topic"] == f"{name}-t" for t in tasks)

    r = api.get(f"/connectors/{name}/tasks/1/status")
    assert r.status_code == 200
    assert r.json() == {"id": 1, "state": "RUNNING", "worker_id": worker.herder.worker_id}

    assert_error(api.get(f"/connectors/{name}/tasks/7/status"), 404, f"{name}-7")
    assert_error(api.get("/connectors/rest-nobody/tasks/0/status"), 404, "rest-nobody")


def test_a_failed_task_shows_its_trace(api, name):
    create(api, name, source(name, **{"fail.at": 5}))
    st = wait_for(api, name, "RUNNING", ["FAILED"])
    assert "boom at 5" in st["tasks"][0]["trace"]
    task = api.get(f"/connectors/{name}/tasks/0/status").json()
    assert task["state"] == "FAILED" and "RuntimeError: boom at 5" in task["trace"]


@pytest.mark.parametrize("method, path", [
    ("GET", "/connectors/rest-nobody"),
    ("GET", "/connectors/rest-nobody/config"),
    ("PATCH", "/connectors/rest-nobody/config"),
    ("GET", "/connectors/rest-nobody/status"),
    ("GET", "/connectors/rest-nobody/tasks"),
    ("POST", "/connectors/rest-nobody/restart"),
    ("POST", "/connectors/rest-nobody/tasks/0/restart"),
    ("PUT", "/connectors/rest-nobody/pause"),
    ("PUT", "/connectors/rest-nobody/resume"),
    ("PUT", "/connectors/rest-nobody/stop"),
    ("GET", "/connectors/rest-nobody/offsets"),
    ("PATCH", "/connectors/rest-nobody/offsets"),
    ("DELETE", "/connectors/rest-nobody/offsets"),
    ("GET", "/connectors/rest-nobody/topics"),
    ("PUT", "/connectors/rest-nobody/topics/reset"),
    ("DELETE", "/connectors/rest-nobody"),
])
def test_every_connector_path_is_404_for_an_unknown_connector(idle, method, path):
    body = {"offsets": [{"partition": {"task": 0}, "offset": {"i": 1}}]} \
        if path.endswith("offsets") else {"count": "1"}
    r = idle.request(method, path, json=body if method in ("PATCH", "PUT") else None)
    assert_error(r, 404, "rest-nobody")


# -- changing the config --------------------------------------------------------------------------


def test_put_config_creates_201_then_updates_200(api, name):
    r = api.put(f"/connectors/{name}/config", json=source(name))
    assert r.status_code == 201
    assert r.json()["name"] == name and r.json()["config"]["count"] == "20"
    wait_for(api, name, "RUNNING")

    # the same config again: 200, nothing changes
    r = api.put(f"/connectors/{name}/config", json=source(name))
    assert r.status_code == 200 and r.json()["config"]["count"] == "20"

    r = api.put(f"/connectors/{name}/config", json=source(name, count=30))
    assert r.status_code == 200
    assert r.json()["config"]["count"] == "30"
    assert api.get(f"/connectors/{name}/config").json()["count"] == "30"
    wait_for(api, name, "RUNNING")
    wait_offsets(api, name, [{"partition": {"task": 0}, "offset": {"i": 29}}])


def test_put_config_rejects_a_name_that_differs_from_the_url(api, name):
    r = api.put(f"/connectors/{name}/config", json={**source(name), "name": "other"})
    assert_error(r, 400, "other", name)
    assert_error(api.get(f"/connectors/{name}"), 404)


def test_put_config_with_an_invalid_config_is_400_and_keeps_the_old_one(api, name):
    create(api, name, source(name))
    r = api.put(f"/connectors/{name}/config", json=source(name, count="lots"))
    body = assert_error(r, 400)
    assert "count" in body["errors"]
    assert api.get(f"/connectors/{name}/config").json()["count"] == "20"


def test_get_config_is_the_stored_string_map(api, name):
    create(api, name, source(name, **{"per.poll": 5}))
    assert api.get(f"/connectors/{name}/config").json() == {
        "connector.class": SOURCE, "topic": f"{name}-t", "count": "20", "per.poll": "5",
        "name": name}


def test_patch_config_merges_and_a_null_removes_a_key(api, name):
    create(api, name, source(name, **{"per.poll": 5}))
    r = api.patch(f"/connectors/{name}/config", json={"count": 30, "per.poll": None,
                                                       "poll.sleep.ms": "1"})
    assert r.status_code == 200
    info = r.json()
    assert set(info) == {"name", "config", "tasks", "type"}
    assert info["config"] == {"connector.class": SOURCE, "topic": f"{name}-t", "count": "30",
                              "poll.sleep.ms": "1", "name": name}
    assert api.get(f"/connectors/{name}/config").json() == info["config"]


def test_patch_config_that_breaks_the_config_is_400(api, name):
    create(api, name, source(name))
    body = assert_error(api.patch(f"/connectors/{name}/config", json={"topic": None}), 400)
    assert "topic" in body["errors"]
    assert api.get(f"/connectors/{name}/config").json()["topic"] == f"{name}-t"


# -- lifecycle: restart, pause, resume, stop, delete ----------------------------------------------


def test_plain_restart_is_204_without_a_body(api, name):
    create(api, name, source(name))
    wait_for(api, name, "RUNNING")
    r = api.post(f"/connectors/{name}/restart")
    assert r.status_code == 204 and r.content == b""
    wait_for(api, name, "RUNNING")
    # explicit false flags are the same plain restart
    r = api.post(f"/connectors/{name}/restart",
                 params={"includeTasks": "false", "onlyFailed": "false"})
    assert r.status_code == 204 and r.content == b""


def test_restart_with_include_tasks_is_202_with_the_status(api, name):
    create(api, name, source(name, **{"tasks.max": 2}))
    wait_for(api, name, "RUNNING", ["RUNNING", "RUNNING"])
    starts = sc.TASK_STARTS[name]
    r = api.post(f"/connectors/{name}/restart", params={"includeTasks": "true"})
    assert r.status_code == 202
    body = r.json()
    assert body["name"] == name and body["type"] == "source"
    assert set(body["connector"]) >= {"state", "worker_id"}
    assert [t["id"] for t in body["tasks"]] == [0, 1]
    wait_for(api, name, "RUNNING", ["RUNNING", "RUNNING"])
    wait_until(lambda: sc.TASK_STARTS[name] == starts + 2, timeout=WAIT,
               message="both tasks started again")


def test_restart_with_include_tasks_shows_restarting_in_the_202_body(api, name):
    create(api, name, source(name, **{"tasks.max": 2, "partitions": 2}))
    before = wait_for(api, name, "RUNNING", ["RUNNING", "RUNNING"])
    r = api.post(f"/connectors/{name}/restart", params={"includeTasks": "true"})
    assert r.status_code == 202
    plan = r.json()
    assert plan["connector"] == {"state": "RESTARTING",
                                 "worker_id": before["connector"]["worker_id"]}
    assert [(t["id"], t["state"]) for t in plan["tasks"]] == [(0, "RESTARTING"),
                                                              (1, "RESTARTING")]
    wait_for(api, name, "RUNNING", ["RUNNING", "RUNNING"])


def test_restart_only_failed_marks_just_the_failed_tasks_restarting(api, name):
    # both tasks fail at their first record; the connector itself keeps running
    create(api, name, source(name, **{"tasks.max": 2, "partitions": 2, "fail.at": 0}))
    wait_for(api, name, "RUNNING", ["FAILED", "FAILED"])
    r = api.post(f"/connectors/{name}/restart",
                 params={"includeTasks": "true", "onlyFailed": "true"})
    assert r.status_code == 202
    plan = r.json()
    assert plan["connector"]["state"] == "RUNNING"  # it had not failed: left alone
    assert [t["state"] for t in plan["tasks"]] == ["RESTARTING", "RESTARTING"]
    assert all("trace" not in t for t in plan["tasks"])


def test_restart_only_failed_is_202_with_the_status(api, name):
    # Kafka answers 202 + status whenever includeTasks or onlyFailed is set
    create(api, name, source(name))
    wait_for(api, name, "RUNNING")
    starts = sc.TASK_STARTS[name]
    r = api.post(f"/connectors/{name}/restart", params={"onlyFailed": "true"})
    assert r.status_code == 202
    assert r.json()["name"] == name and r.json()["connector"]["state"] == "RUNNING"
    assert sc.TASK_STARTS[name] == starts  # nothing had failed: the task was left alone


def test_restart_include_tasks_only_failed_restarts_just_the_failed_task(api, name):
    create(api, name, source(name, **{"tasks.max": 2, "fail.at": 5, "partitions": 2}))
    wait_for(api, name, "RUNNING", ["FAILED", "FAILED"])
    starts = sc.TASK_STARTS[name]
    r = api.post(f"/connectors/{name}/restart",
                 params={"includeTasks": "true", "onlyFailed": "true"})
    assert r.status_code == 202
    assert [t["id"] for t in r.json()["tasks"]] == [0, 1]
    # both failed, so both start again, and fail again at the same record
    wait_until(lambda: sc.TASK_STARTS[name] == starts + 2, timeout=WAIT,
               message="failed tasks restarted")
    wait_for(api, name, "RUNNING", ["FAILED", "FAILED"])


def test_restart_one_task_is_204(api, name):
    create(api, name, source(name, **{"tasks.max": 2}))
    wait_for(api, name, "RUNNING", ["RUNNING", "RUNNING"])
    starts = sc.TASK_STARTS[name]
    r = api.post(f"/connectors/{name}/tasks/1/restart")
    assert r.status_code == 204 and r.content == b""
    wait_until(lambda: sc.TASK_STARTS[name] == starts + 1, timeout=WAIT, message="task restart")
    wait_for(api, name, "RUNNING", ["RUNNING", "RUNNING"])
    assert_error(api.post(f"/connectors/{name}/tasks/9/restart"), 404, f"{name}-9")


def test_pause_resume_and_stop(api, name):
    create(api, name, source(name, **{"tasks.max": 2}))
    wait_for(api, name, "RUNNING", ["RUNNING", "RUNNING"])

    r = api.put(f"/connectors/{name}/pause")
    assert r.status_code == 202 and r.content == b""
    wait_for(api, name, "PAUSED", ["PAUSED", "PAUSED"])
    assert api.put(f"/connectors/{name}/pause").status_code == 202  # idempotent

    r = api.put(f"/connectors/{name}/resume")
    assert r.status_code == 202 and r.content == b""
    wait_for(api, name, "RUNNING", ["RUNNING", "RUNNING"])

    # stop: Kafka answers 204 (void), and a stopped connector has no tasks at all
    r = api.put(f"/connectors/{name}/stop")
    assert r.status_code == 204 and r.content == b""
    st = wait_for(api, name, "STOPPED", [])
    assert st["tasks"] == []
    assert api.get(f"/connectors/{name}/tasks").json() == []
    assert api.get(f"/connectors/{name}").json()["tasks"] == []
    assert api.put(f"/connectors/{name}/stop").status_code == 204  # idempotent

    # resume from STOPPED brings the tasks back
    assert api.put(f"/connectors/{name}/resume").status_code == 202
    wait_for(api, name, "RUNNING", ["RUNNING", "RUNNING"])
    assert len(api.get(f"/connectors/{name}/tasks").json()) == 2


def test_delete_is_204_then_the_connector_is_gone(api, name):
    create(api, name, source(name))
    wait_for(api, name, "RUNNING")
    r = api.delete(f"/connectors/{name}")
    assert r.status_code == 204 and r.content == b""
    assert_error(api.get(f"/connectors/{name}"), 404, name)
    assert_error(api.get(f"/connectors/{name}/status"), 404, name)
    assert api.get("/connectors").json() == []
    assert_error(api.delete(f"/connectors/{name}"), 404, name)
    # the name is free again
    create(api, name, source(name))


# -- offsets --------------------------------------------------------------------------------------


def test_source_offsets_get_alter_and_reset(api, name):
    create(api, name, source(name))
    wait_for(api, name, "RUNNING")
    wait_offsets(api, name, [{"partition": {"task": 0}, "offset": {"i": 19}}])

    # a running (or paused) connector's offsets cannot be changed: 400, as Kafka
    new = {"offsets": [{"partition": {"task": 0}, "offset": {"i": 4}}]}
    assert_error(api.patch(f"/connectors/{name}/offsets", json=new), 400,
                 "Connectors must be in the STOPPED state before their offsets can be modified",
                 f"/connectors/{name}/stop")
    assert_error(api.delete(f"/connectors/{name}/offsets"), 400, "STOPPED")
    assert api.put(f"/connectors/{name}/pause").status_code == 202
    wait_for(api, name, "PAUSED")
    assert_error(api.delete(f"/connectors/{name}/offsets"), 400, "STOPPED")

    assert api.put(f"/connectors/{name}/stop").status_code == 204
    wait_for(api, name, "STOPPED", [])

    # malformed alter requests
    assert_error(api.patch(f"/connectors/{name}/offsets", json={}), 400, "offsets")
    assert_error(api.patch(f"/connectors/{name}/offsets", json={"offsets": []}), 400)
    assert_error(api.patch(f"/connectors/{name}/offsets",
                           json={"offsets": [{"offset": {"i": 1}}]}), 400, "partition")

    r = api.patch(f"/connectors/{name}/offsets", json=new)
    assert r.status_code == 200
    assert r.json() == {"message": "The offsets for this connector have been altered successfully"}
    assert offsets(api, name) == new["offsets"]

    # resumed, the task carries on after the altered offset: 5..19 again
    starts = sc.TASK_STARTS[name]
    assert api.put(f"/connectors/{name}/resume").status_code == 202
    wait_until(lambda: sc.TASK_STARTS[name] == starts + 1, timeout=WAIT, message="task restart")
    wait_offsets(api, name, [{"partition": {"task": 0}, "offset": {"i": 19}}])

    assert api.put(f"/connectors/{name}/stop").status_code == 204
    r = api.delete(f"/connectors/{name}/offsets")
    assert r.status_code == 200
    assert r.json() == {"message": "The offsets for this connector have been reset successfully"}
    assert offsets(api, name) == []


def test_sink_offsets_use_kafka_topic_partition_and_offset(api, name):
    src, snk = f"{name}-src", f"{name}-snk"
    topic = f"{src}-t"
    create(api, src, source(src))
    create(api, snk, {"connector.class": SINK, "topics": topic})
    wait_until(lambda: len(sc.SINK_RECEIVED[snk]) >= 20, timeout=WAIT, message="20 records")
    committed = [{"partition": {"kafka_topic": topic, "kafka_partition": 0},
                  "offset": {"kafka_offset": 20}}]
    wait_offsets(api, snk, committed)

    moved = [{"partition": {"kafka_topic": topic, "kafka_partition": 0},
              "offset": {"kafka_offset": 5}}]
    assert_error(api.patch(f"/connectors/{snk}/offsets", json={"offsets": moved}), 400,
                 "STOPPED")

    assert api.put(f"/connectors/{snk}/stop").status_code == 204
    wait_for(api, snk, "STOPPED", [])
    bad = [{"partition": {"kafka_topic": topic}, "offset": {"kafka_offset": 5}}]
    assert_error(api.patch(f"/connectors/{snk}/offsets", json={"offsets": bad}), 400,
                 "kafka_partition")
    r = api.patch(f"/connectors/{snk}/offsets", json={"offsets": moved})
    assert r.status_code == 200 and "altered" in r.json()["message"]
    assert offsets(api, snk) == moved

    r = api.delete(f"/connectors/{snk}/offsets")
    assert r.status_code == 200 and "reset" in r.json()["message"]
    assert offsets(api, snk) == []

    # with no committed offsets the resumed sink reads the topic from the start again
    assert api.put(f"/connectors/{snk}/resume").status_code == 202
    wait_until(lambda: len(sc.SINK_RECEIVED[snk]) >= 40, timeout=WAIT, message="20 more records")
    wait_offsets(api, snk, committed)


# -- topics ---------------------------------------------------------------------------------------


def test_active_topics_and_reset(api, name):
    create(api, name, source(name))
    wait_offsets(api, name, [{"partition": {"task": 0}, "offset": {"i": 19}}])  # all produced
    r = api.get(f"/connectors/{name}/topics")
    assert r.status_code == 200
    assert r.json() == {name: {"topics": [f"{name}-t"]}}

    r = api.put(f"/connectors/{name}/topics/reset")
    assert r.status_code == 202 and r.content == b""  # Kafka: 202 Accepted
    assert api.get(f"/connectors/{name}/topics").json() == {name: {"topics": []}}


def test_topics_of_a_connector_that_has_not_written_are_empty(api, name):
    create(api, name, source(name), initial_state="STOPPED")
    assert api.get(f"/connectors/{name}/topics").json() == {name: {"topics": []}}


# -- connector plugins ----------------------------------------------------------------------------


def test_plugins_list_class_type_and_version(idle):
    r = idle.get("/connector-plugins")
    assert r.status_code == 200
    plugins = r.json()
    assert all(set(p) == {"class", "type", "version"} for p in plugins)
    by_class = {p["class"]: p for p in plugins}
    assert by_class[FILE_SOURCE]["type"] == "source"
    assert by_class[FILE_SINK]["type"] == "sink"
    assert all(p["type"] in ("source", "sink") for p in plugins)
    assert all(isinstance(p["version"], str) and p["version"] for p in plugins)


def test_plugins_connectors_only_false_is_accepted(idle):
    r = idle.get("/connector-plugins", params={"connectorsOnly": "false"})
    assert r.status_code == 200
    assert {FILE_SOURCE, FILE_SINK} <= {p["class"] for p in r.json()}
    assert_error(idle.get("/connector-plugins", params={"connectorsOnly": "maybe"}), 400)


def test_plugins_connectors_only_false_also_lists_transforms_and_converters(idle):
    plugins = idle.get("/connector-plugins", params={"connectorsOnly": "false"}).json()
    types = {p["type"] for p in plugins}
    assert {"transformation", "predicate", "converter", "header_converter"} <= types
    assert all(set(p) == {"class", "type", "version"} and p["version"] for p in plugins)
    listed = {(p["class"], p["type"]) for p in plugins}
    assert {(FILE_SOURCE, "source"), (FILE_SINK, "sink"),
            ("kctl.transforms.fields.CastValue", "transformation"),
            ("kctl.transforms.routing.RegexRouter", "transformation"),
            ("kctl.transforms.predicates.TopicNameMatches", "predicate"),
            ("kctl.runtime.converters.JsonConverter", "converter"),
            ("kctl.runtime.converters.StringConverter", "header_converter")} <= listed
    assert len(listed) == len(plugins)  # each class once per type, aliases folded
    # the default stays connectors only
    assert {p["type"] for p in idle.get("/connector-plugins").json()} == {"source", "sink"}


@pytest.mark.parametrize("plugin, keys", [
    ("Cast$Value", {"spec"}),
    ("org.apache.kafka.connect.transforms.RegexRouter", {"regex", "replacement"}),
    ("kctl.transforms.predicates.TopicNameMatches", {"pattern"}),
    ("JsonConverter", {"schemas.enable"}),
    ("org.apache.kafka.connect.storage.StringConverter", {"converter.encoding"}),
], ids=["transform-alias", "transform-kafka-name", "predicate-class", "converter-alias",
        "converter-kafka-name"])
def test_plugin_config_works_for_transforms_predicates_and_converters(idle, plugin, keys):
    r = idle.get(f"/connector-plugins/{quote(plugin, safe='')}/config")
    assert r.status_code == 200, r.text
    by_name = {k["name"]: k for k in r.json()}
    assert keys <= set(by_name), sorted(by_name)
    assert all(isinstance(k["documentation"], str) for k in by_name.values())


@pytest.mark.parametrize("plugin", ["FileSource", "FileSourceConnector", FILE_SOURCE])
def test_plugin_config_lists_key_definitions_by_alias_or_class(idle, plugin):
    r = idle.get(f"/connector-plugins/{plugin}/config")
    assert r.status_code == 200
    keys = r.json()
    assert isinstance(keys, list) and keys
    for k in keys:
        assert {"name", "type", "required", "default_value", "importance", "documentation",
                "group", "width", "display_name", "dependents"} <= set(k)
    by_name = {k["name"]: k for k in keys}
    assert by_name["path"]["required"] is True and by_name["path"]["type"] == "STRING"
    assert by_name["topic"]["required"] is True


def test_plugin_config_of_a_test_connector_by_dotted_path(idle):
    keys = {k["name"]: k for k in idle.get(f"/connector-plugins/{SOURCE}/config").json()}
    assert set(keys) == {"topic", "count", "per.poll", "poll.sleep.ms", "fail.at", "partitions"}
    assert keys["count"] == {**keys["count"], "type": "INT", "required": False,
                             "default_value": "100", "documentation": "Records per task"}


def test_plugin_config_of_an_unknown_plugin_is_404(idle):
    assert_error(idle.get("/connector-plugins/NoSuchThing/config"), 404, "NoSuchThing")


def test_validate_answers_config_infos(idle):
    r = idle.put(f"/connector-plugins/{SOURCE}/config/validate",
                json={"connector.class": SOURCE, "topic": "t", "count": "many"})
    assert r.status_code == 200
    infos = r.json()
    # Kafka's ConfigInfos, plus kctl's warnings (keys nothing reads; none here)
    assert set(infos) == {"name", "error_count", "groups", "configs", "warnings"}
    assert infos["warnings"] == []
    assert infos["name"] == SOURCE
    assert infos["error_count"] == 1
    assert isinstance(infos["groups"], list) and "Common" in infos["groups"]
    for c in infos["configs"]:
        assert set(c) == {"definition", "value"}
        assert set(c["value"]) == {"name", "value", "recommended_values", "errors", "visible"}
        assert c["definition"]["name"] == c["value"]["name"]
    values = {c["value"]["name"]: c["value"] for c in infos["configs"]}
    assert values["count"]["value"] == "many" and values["count"]["errors"]
    assert values["topic"] == {"name": "topic", "value": "t", "recommended_values": [],
                               "errors": [], "visible": True}
    definitions = {c["definition"]["name"]: c["definition"] for c in infos["configs"]}
    assert definitions["tasks.max"]["group"] == "Common"

    # a valid config: no errors; and connector.class defaults to the plugin in the URL
    ok = idle.put(f"/connector-plugins/{SOURCE}/config/validate", json={"topic": "t"}).json()
    assert ok["error_count"] == 0
    assert idle.get("/connectors").json() == []  # validating creates nothing


def test_validate_with_a_connector_class_naming_another_plugin_is_400(idle):
    # Kafka: "Included connector type ... does not match request type ..." (BadRequest)
    r = idle.put("/connector-plugins/FileSource/config/validate",
                 json={"connector.class": "FileSink", "topics": "t", "path": "/tmp/x"})
    assert_error(r, 400, "FileSink", "does not match", "FileSource")
    r = idle.put(f"/connector-plugins/{SOURCE}/config/validate",
                 json={"connector.class": "NoSuchThing"})
    assert_error(r, 400, "NoSuchThing")


@pytest.mark.parametrize("url_name, body_name", [
    ("FileSource", FILE_SOURCE),
    (FILE_SOURCE, "FileSource"),
    ("FileSourceConnector", "FileSource"),
    ("CounterSource", SOURCE),
], ids=["alias-vs-class", "class-vs-alias", "simple-vs-alias", "unregistered-suffix"])
def test_validate_accepts_any_name_of_the_same_plugin(idle, url_name, body_name):
    r = idle.put(f"/connector-plugins/{url_name}/config/validate",
                 json={"connector.class": body_name, "topic": "t", "path": "/tmp/in"})
    assert r.status_code == 200, r.text
    assert r.json()["name"] in (FILE_SOURCE, SOURCE)


def test_validate_an_unknown_plugin_reports_it_on_connector_class(idle):
    # Kafka answers 500 here; kctl answers the ConfigInfos with the error on connector.class
    r = idle.put("/connector-plugins/NoSuchThing/config/validate", json={})
    assert r.status_code == 200
    infos = r.json()
    assert infos["error_count"] >= 1
    errors = {c["value"]["name"]: c["value"]["errors"] for c in infos["configs"]}
    assert any("NoSuchThing" in e and "FileSource" in e for e in errors["connector.class"])


# -- errors ---------------------------------------------------------------------------------------


def test_an_unknown_path_is_404_in_the_error_shape(idle):
    assert_error(idle.get("/no/such/path"), 404)
    assert_error(idle.get("/connectors/x/y/z"), 404)


def test_a_wrong_method_is_405_in_the_error_shape(idle):
    assert_error(idle.delete("/connector-plugins"), 405)


@pytest.mark.parametrize("method, path", [
    ("POST", "/connectors"),
    ("PUT", "/connectors/rest-malformed/config"),
    ("PATCH", "/connectors/rest-malformed/config"),
    ("PATCH", "/connectors/rest-malformed/offsets"),
    ("PUT", f"/connector-plugins/{SOURCE}/config/validate"),
])
def test_a_malformed_json_body_is_400_in_the_error_shape(idle, method, path):
    r = idle.request(method, path, content=b'{"name": "x", ',
                    headers={"content-type": "application/json"})
    assert_error(r, 400)


def test_a_body_that_is_not_an_object_is_400(idle):
    assert_error(idle.post("/connectors", json=["name", "x"]), 400)
    assert_error(idle.put("/connectors/rest-x/config", json="connector.class"), 400)
    assert_error(idle.post("/connectors"), 400)  # no body at all
