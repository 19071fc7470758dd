"""Secrets over REST, on a live in-process worker with config providers.

A password given as `${env:...}`, `${file:...}` or `${dir:...}` reaches the connector and its
tasks resolved, while every REST answer and the config store keep the placeholder; a
literal password reads `[hidden]` and survives a GET-edit-PUT round trip; a placeholder
that cannot be resolved fails its connector with one line and nothing else; a secret in an
exception or a log line is replaced by `[hidden]`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.secret_connectors import digest
from support.waiting import wait_until

from kctl.launch import StandaloneWorker
from kctl.runtime.worker_config import WorkerConfig

PASSWORD = "support.secret_connectors.PasswordSourceConnector"
COUNTER = "support.connectors.CounterSourceConnector"
ENV_SECRET = "env-s3cret-Zq81"
FILE_SECRET = "file-s3cret-Kp27"
DIR_SECRET = "dir-s3cret-Wm55"
LITERAL = "literal-s3cret-Hx40"
SECRETS = (ENV_SECRET, FILE_SECRET, DIR_SECRET, LITERAL)
WAIT = 20.0


@pytest.fixture
def secret_files(tmp_path) -> Path:
    d = tmp_path / "secrets"
    (d / "mounted").mkdir(parents=True)
    (d / "db.properties").write_text(f"password={FILE_SECRET}\ntasks=2\nbad.tasks=x9zq-nan\n")
    (d / "mounted" / "db-password").write_text(DIR_SECRET)
    return d


@pytest.fixture
def worker(tmp_path, secret_files, monkeypatch) -> Iterator[StandaloneWorker]:
    monkeypatch.setenv("KCTL_TEST_DB_PASSWORD", ENV_SECRET)
    w = StandaloneWorker(WorkerConfig({
        "state.dir": str(tmp_path / "state"), "listeners": "http://127.0.0.1:0",
        "offset.flush.interval.ms": 100,
        "config.providers": "file,env,dir",
        "config.providers.file.class": "org.apache.kafka.common.config.provider."
                                       "FileConfigProvider",
        "config.providers.file.param.allowed.paths": str(secret_files),
        "config.providers.env.class": "EnvVarConfigProvider",
        "config.providers.dir.class": "dir",
    }))
    w.start()
    try:
        yield w
    finally:
        w.stop()


@pytest.fixture
def api(worker) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=worker.rest.url, timeout=30) as client:
        yield client


def password_connector(tmp_path: Path, password: str, **extra: Any) -> dict[str, Any]:
    return {"connector.class": PASSWORD, "connection.password": password, "tasks.max": 2,
            "probe.file": str(tmp_path / "probe.txt"), **extra}


def create(api: httpx.Client, name: str, config: dict[str, Any]) -> None:
    r = api.post("/connectors", json={"name": name, "config": config})
    assert r.status_code == 201, r.text


def wait_state(api: httpx.Client, name: str, connector: str, tasks: tuple[str, ...] | None = None
               ) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        st = api.get(f"/connectors/{name}/status").json()
        ok = st["connector"]["state"] == connector and (
            tasks is None or tuple(t["state"] for t in st["tasks"]) == tasks)
        return st if ok else None

    return wait_until(reached, WAIT, message=f"{name} {connector} {tasks}",
                      on_timeout=lambda: api.get(f"/connectors/{name}/status").text)


def probe_lines(tmp_path: Path) -> list[str]:
    p = tmp_path / "probe.txt"
    return p.read_text().splitlines() if p.exists() else []


def every_answer(api: httpx.Client, name: str, config: dict[str, Any]) -> list[str]:
    """The text of every REST answer that shows a connector's config or state."""
    gets = [f"/connectors/{name}", f"/connectors/{name}/config", f"/connectors/{name}/tasks",
            f"/connectors/{name}/status", f"/connectors/{name}/tasks/0/status",
            "/connectors?expand=info&expand=status", f"/connectors/{name}/topics"]
    texts = [api.get(path).text for path in gets]
    texts.append(api.put(f"/connector-plugins/{PASSWORD}/config/validate", json=config).text)
    return texts


def assert_no_secret(texts: list[str]) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text, f"{secret} in {text[:500]}"


def test_placeholders_resolve_at_start_and_every_answer_keeps_them(api, worker, tmp_path,
                                                                   secret_files):
    placeholders = {
        "pw-env": ("${env:KCTL_TEST_DB_PASSWORD}", ENV_SECRET),
        "pw-file": (f"${{file:{secret_files}/db.properties:password}}", FILE_SECRET),
        "pw-dir": (f"${{dir:{secret_files}/mounted:db-password}}", DIR_SECRET),
    }
    for name, (placeholder, _) in placeholders.items():
        create(api, name, password_connector(tmp_path, placeholder))
    for name, (placeholder, secret) in placeholders.items():
        wait_state(api, name, "RUNNING", ("RUNNING", "RUNNING"))
        # the connector and each task were started with the secret, and so was the copy the
        # connector put into the task configs
        lines = probe_lines(tmp_path)
        assert f"connector {name} {digest(secret)}" in lines
        for i in range(2):
            assert f"task {name}-{i} {digest(secret)} {digest(secret)}" in lines, lines
        config = password_connector(tmp_path, placeholder)
        texts = every_answer(api, name, config)
        assert_no_secret(texts)
        assert api.get(f"/connectors/{name}/config").json()["connection.password"] == \
            placeholder
        for task in api.get(f"/connectors/{name}/tasks").json():
            assert task["config"]["connection.password"] == placeholder
            assert task["config"]["copied.secret"] == placeholder  # followed to another key
        validated = {c["value"]["name"]: c["value"] for c in json.loads(texts[-1])["configs"]}
        assert validated["connection.password"]["value"] == placeholder
    stored = (Path(worker.config.state_dir) / "configs.json").read_text()
    assert_no_secret([stored])
    assert "${env:KCTL_TEST_DB_PASSWORD}" in stored  # what is stored is the reference


def test_a_literal_password_reads_hidden_and_survives_a_round_trip(api, worker, tmp_path):
    name = "pw-literal"
    create(api, name, password_connector(tmp_path, LITERAL))
    wait_state(api, name, "RUNNING", ("RUNNING", "RUNNING"))
    assert_no_secret(every_answer(api, name, password_connector(tmp_path, LITERAL)))
    shown = api.get(f"/connectors/{name}/config").json()
    assert shown["connection.password"] == "[hidden]"
    assert api.get(f"/connectors/{name}").json()["config"]["connection.password"] == "[hidden]"
    for task in api.get(f"/connectors/{name}/tasks").json():
        assert task["config"]["connection.password"] == "[hidden]"
        assert task["config"]["copied.secret"] == "[hidden]"  # undeclared, named like one
    validated = api.put(f"/connector-plugins/{PASSWORD}/config/validate",
                        json=password_connector(tmp_path, LITERAL)).json()
    assert {c["value"]["name"]: c["value"]["value"] for c in validated["configs"]}[
        "connection.password"] == "[hidden]"

    # what a client read, sent back with one change: the stored password stays
    r = api.put(f"/connectors/{name}/config", json={**shown, "connection.user": "other"})
    assert r.status_code == 200, r.text
    assert r.json()["config"]["connection.password"] == "[hidden]"
    assert worker.configs.connector_config(name)["connection.password"] == LITERAL
    assert worker.configs.connector_config(name)["connection.user"] == "other"
    wait_until(lambda: probe_lines(tmp_path).count(f"connector {name} {digest(LITERAL)}") == 2,
               WAIT, message="the connector restarted with the real password",
               on_timeout=lambda: "\n".join(probe_lines(tmp_path)))
    assert all(digest("[hidden]") not in line for line in probe_lines(tmp_path))
    r = api.patch(f"/connectors/{name}/config", json={"connection.password": "[hidden]"})
    assert r.status_code == 200, r.text
    assert worker.configs.connector_config(name)["connection.password"] == LITERAL
    # a new password replaces it, and is hidden too
    r = api.patch(f"/connectors/{name}/config", json={"connection.password": LITERAL + "-v2"})
    assert r.status_code == 200 and LITERAL not in r.text
    assert worker.configs.connector_config(name)["connection.password"] == LITERAL + "-v2"


@pytest.mark.parametrize(("placeholder", "why"), [
    ("${vault:secret/db:password}", "names config provider 'vault', which this worker does "
                                    "not have (config.providers: dir, env, file)"),
    ("${file:/etc/hostname:password}", "path /etc/hostname is not in allowed.paths"),
])
def test_a_placeholder_the_worker_refuses_makes_the_config_invalid(
        api, tmp_path, placeholder, why):
    """An unconfigured provider or a file outside allowed.paths can never resolve on this
    worker: refused when the config arrives (Security), not stored to fail later."""
    r = api.post("/connectors", json={"name": "refused",
                                      "config": password_connector(tmp_path, placeholder)})
    assert r.status_code == 400, r.text
    assert why in r.json()["errors"]["connection.password"][0]
    assert api.get("/connectors").json() == []


@pytest.mark.parametrize(("placeholder", "why"), [
    ("${env:KCTL_TEST_NOT_SET}", "no key 'KCTL_TEST_NOT_SET' (config provider 'env')"),
    ("${file:{dir}/db.properties:passwd}", "no key 'passwd' in {dir}/db.properties"),
    ("${file:{dir}/gone.properties:password}", "could not read properties from file "
                                               "{dir}/gone.properties"),
])
def test_a_placeholder_that_cannot_be_resolved_fails_only_its_connector(
        api, tmp_path, secret_files, placeholder, why):
    placeholder, why = (s.replace("{dir}", str(secret_files)) for s in (placeholder, why))
    create(api, "healthy", {"connector.class": COUNTER, "topic": "t", "count": 1})
    create(api, "broken", password_connector(tmp_path, placeholder))
    st = wait_state(api, "broken", "FAILED")
    trace = st["connector"]["trace"]
    assert trace.startswith(f"cannot resolve {placeholder} in connector broken key "
                            f"connection.password: {why}"), trace
    assert "\n" not in trace  # one line: no traceback
    assert st["tasks"] == []  # it never got to make task configs
    assert not any(line.startswith("connector broken") for line in probe_lines(tmp_path))
    # the worker and its other connectors go on
    wait_state(api, "healthy", "RUNNING", ("RUNNING",))
    assert api.get("/").status_code == 200
    assert api.get("/connectors/broken/config").json()["connection.password"] == placeholder


def test_a_task_whose_placeholder_stops_resolving_fails_with_one_line(api, tmp_path,
                                                                      monkeypatch):
    create(api, "rotating", password_connector(tmp_path, "${env:KCTL_TEST_DB_PASSWORD}"))
    wait_state(api, "rotating", "RUNNING", ("RUNNING", "RUNNING"))
    monkeypatch.delenv("KCTL_TEST_DB_PASSWORD")
    assert api.post("/connectors/rotating/tasks/1/restart").status_code == 204
    st = wait_state(api, "rotating", "RUNNING", ("RUNNING", "FAILED"))
    assert st["tasks"][1]["trace"] == (
        "cannot resolve ${env:KCTL_TEST_DB_PASSWORD} in connector rotating key "
        "connection.password: no key 'KCTL_TEST_DB_PASSWORD' (config provider 'env')")
    monkeypatch.setenv("KCTL_TEST_DB_PASSWORD", ENV_SECRET + "-rotated")
    assert api.post("/connectors/rotating/tasks/1/restart").status_code == 204
    wait_state(api, "rotating", "RUNNING", ("RUNNING", "RUNNING"))
    rotated = digest(ENV_SECRET + "-rotated")
    assert f"task rotating-1 {rotated} {rotated}" in probe_lines(tmp_path)


def test_a_secret_in_an_exception_or_a_log_line_reads_hidden(api, tmp_path, caplog):
    with caplog.at_level(logging.INFO):
        create(api, "careless", password_connector(tmp_path, "${env:KCTL_TEST_DB_PASSWORD}",
                                                   **{"fail.with.password": "true"}))
        st = wait_state(api, "careless", "RUNNING", ("FAILED", "FAILED"))
    for task in st["tasks"]:
        assert "RuntimeError: login refused for password [hidden]" in task["trace"]
    assert_no_secret([json.dumps(st), caplog.text])
    assert "logs in as kctl with password [hidden]" in caplog.text
    assert "login refused for password [hidden]" in caplog.text


def test_validate_resolves_placeholders_and_answers_with_them(api, tmp_path, secret_files):
    props = secret_files / "db.properties"
    good = password_connector(tmp_path, "${env:KCTL_TEST_DB_PASSWORD}",
                              **{"tasks.max": f"${{file:{props}:tasks}}"})
    r = api.put(f"/connector-plugins/{PASSWORD}/config/validate", json=good).json()
    assert r["error_count"] == 0, r
    values = {c["value"]["name"]: c["value"] for c in r["configs"]}
    assert values["tasks.max"]["value"] == f"${{file:{props}:tasks}}"
    bad = {**good, "tasks.max": f"${{file:{props}:bad.tasks}}"}
    r = api.put(f"/connector-plugins/{PASSWORD}/config/validate", json=bad).json()
    errors = {c["value"]["name"]: c["value"]["errors"] for c in r["configs"]}
    assert r["error_count"] == 1 and errors["tasks.max"], r
    assert "x9zq-nan" not in json.dumps(r)  # the error names the placeholder, not the value
    assert f"${{file:{props}:bad.tasks}}" in errors["tasks.max"][0]
    # a password with a literal part is a secret, placeholder or not
    partial = {**good, "connection.password": "pre-${env:KCTL_TEST_DB_PASSWORD}"}
    r = api.put(f"/connector-plugins/{PASSWORD}/config/validate", json=partial).json()
    values = {c["value"]["name"]: c["value"] for c in r["configs"]}
    assert values["connection.password"]["value"] == "[hidden]"


def test_any_connector_and_any_setting_takes_placeholders(api, tmp_path, monkeypatch):
    """Not only passwords: a connector that knows nothing of secrets gets its topic from
    the environment, and its records land there."""
    monkeypatch.setenv("KCTL_TEST_TOPIC", "orders-from-env")
    create(api, "counter", {"connector.class": COUNTER, "topic": "${env:KCTL_TEST_TOPIC}",
                            "count": 5})
    wait_state(api, "counter", "RUNNING", ("RUNNING",))
    wait_until(lambda: api.get("/connectors/counter/topics").json() ==
               {"counter": {"topics": ["orders-from-env"]}}, WAIT, message="records on the topic")
    assert api.get("/connectors/counter/config").json()["topic"] == "${env:KCTL_TEST_TOPIC}"
    assert api.get("/connectors/counter/tasks").json()[0]["config"]["topic"] == \
        "${env:KCTL_TEST_TOPIC}"


URL_USER_SECRET, URL_PARAM_SECRET = "url-s3cret-Ab12", "url-s3cret-Cd34"
SECRET_URL = (f"jdbc:postgresql://kctl:{URL_USER_SECRET}@db.example:5432/shop"
              f"?ssl=true&password={URL_PARAM_SECRET}&loglevel=1")
MASKED_URL = "jdbc:postgresql://kctl:[hidden]@db.example:5432/shop?ssl=true&password=[hidden]" \
             "&loglevel=1"


def test_a_password_inside_a_url_is_hidden_in_every_answer_and_log(api, worker, tmp_path,
                                                                     caplog):
    """`connection.url` is not a password key, but a URL can carry one (`user:pw@`,
    `password=`): those parts read `[hidden]` wherever the config is shown, in logs too,
    and a GET-edit-PUT keeps the stored URL."""
    name = "url-secret"
    config = password_connector(tmp_path, "${env:KCTL_TEST_DB_PASSWORD}",
                                **{"connection.url": SECRET_URL})
    create(api, name, config)
    wait_state(api, name, "RUNNING", ("RUNNING", "RUNNING"))
    texts = every_answer(api, name, config)
    for text in texts:
        assert URL_USER_SECRET not in text and URL_PARAM_SECRET not in text, text[:500]
    shown = api.get(f"/connectors/{name}/config").json()
    assert shown["connection.url"] == MASKED_URL
    assert api.get(f"/connectors/{name}").json()["config"]["connection.url"] == MASKED_URL
    validated = api.put(f"/connector-plugins/{PASSWORD}/config/validate", json=config).json()
    assert {c["value"]["name"]: c["value"]["value"] for c in validated["configs"]
            if c["definition"]["name"] == "connection.url"}.get("connection.url",
                                                               MASKED_URL) == MASKED_URL
    with caplog.at_level(logging.INFO):
        logging.getLogger("kctl.test").warning("connecting to %s", SECRET_URL)
    assert URL_USER_SECRET not in caplog.text and URL_PARAM_SECRET not in caplog.text
    assert "kctl:[hidden]@db.example" in caplog.text

    # sent back as shown: the stored URL (with its passwords) stays
    r = api.put(f"/connectors/{name}/config", json={**shown, "connection.user": "other"})
    assert r.status_code == 200, r.text
    assert worker.configs.connector_config(name)["connection.url"] == SECRET_URL
    # edited around the mask (another host): the stored passwords are put back in
    edited = MASKED_URL.replace("db.example", "db3.example")
    r = api.put(f"/connectors/{name}/config", json={**shown, "connection.url": edited})
    assert r.status_code == 200, r.text
    assert worker.configs.connector_config(name)["connection.url"] == \
        SECRET_URL.replace("db.example", "db3.example")
    # a URL that changed is taken as sent
    changed = SECRET_URL.replace("db.example", "db2.example")
    r = api.patch(f"/connectors/{name}/config", json={"connection.url": changed})
    assert r.status_code == 200 and URL_USER_SECRET not in r.text
    assert worker.configs.connector_config(name)["connection.url"] == changed
