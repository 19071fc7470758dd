"""Issue 15's done-when for passwords, as a user meets it: a worker process with config
providers, connectors applied through the CLI with a password given as `${env:...}`,
`${file:...}` and literally. The connectors get the real password at start, and the
password appears nowhere in REST answers, the config store, the worker's log or the CLI's
output (a literal password is in the config store, as in Kafka Connect, and nowhere else).
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import yaml
from support.secret_connectors import digest
from support.waiting import wait_until
from support.worker import LISTENER, Worker

pytestmark = pytest.mark.slow

PASSWORD = "support.secret_connectors.PasswordSourceConnector"
ENV_SECRET = "env-pr0cess-s3cret-Qa71"
FILE_SECRET = "file-pr0cess-s3cret-Vb62"
LITERAL = "literal-pr0cess-s3cret-Tc53"
ALL = (ENV_SECRET, FILE_SECRET, LITERAL)


def assert_absent(text: str, secrets: tuple[str, ...], where: str) -> None:
    for s in secrets:
        assert s not in text, f"{s} appears in {where}: ...{text[max(0, text.find(s) - 300):][:600]}"


@pytest.fixture
def worker(tmp_path):
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "db.properties").write_text(f"password={FILE_SECRET}\nflush.ms=300\n")
    w = Worker(tmp_path)
    w.env["KCTL_TEST_DB_PASSWORD"] = ENV_SECRET
    (tmp_path / "worker.yaml").write_text(yaml.safe_dump({
        "state.dir": str(tmp_path / "state"), "listeners": LISTENER,
        "config.providers": "file,env,dir",
        "config.providers.file.class": "org.apache.kafka.common.config.provider."
                                       "FileConfigProvider",
        "config.providers.file.param.allowed.paths": str(secrets),
        "config.providers.env.class": "org.apache.kafka.common.config.provider."
                                      "EnvVarConfigProvider",
        "config.providers.dir.class": "org.apache.kafka.common.config.provider."
                                      "DirectoryConfigProvider",
        # the worker's own settings may use providers too
        "offset.flush.interval.ms": f"${{file:{secrets}/db.properties:flush.ms}}",
    }))
    w.start()
    yield w
    w.stop()


def connector_file(tmp_path: Path, name: str, password: str, **extra: str) -> Path:
    f = tmp_path / f"{name}.yaml"
    f.write_text(yaml.safe_dump({
        "name": name, "connector.class": PASSWORD, "tasks.max": 2,
        "connection.password": password, "probe.file": str(tmp_path / "probe.txt"), **extra}))
    return f


def test_a_password_from_env_or_file_works_and_appears_nowhere(worker, tmp_path):
    secrets = tmp_path / "secrets"
    outputs: list[str] = []

    def kctl(*args: str, check: bool = True) -> str:
        r = worker.kctl(*args, check=check)
        outputs.append(r.stdout + r.stderr)
        return r.stdout

    files = {
        "db-env": connector_file(tmp_path, "db-env", "${env:KCTL_TEST_DB_PASSWORD}"),
        "db-file": connector_file(tmp_path, "db-file",
                                  f"${{file:{secrets}/db.properties:password}}"),
        "db-literal": connector_file(tmp_path, "db-literal", LITERAL),
        "db-careless": connector_file(tmp_path, "db-careless", "${env:KCTL_TEST_DB_PASSWORD}",
                                      **{"fail.with.password": "true"}),
    }
    for name, f in files.items():
        kctl("connector", "validate", str(f))
        kctl("connector", "apply", str(f), check=name != "db-careless")  # its tasks fail
    for name in ("db-env", "db-file", "db-literal"):
        wait_until(lambda n=name: worker.status(n)["connector"]["state"] == "RUNNING" and
                   [t["state"] for t in worker.status(n)["tasks"]] == ["RUNNING"] * 2,
                   30, message=f"{name} running", on_timeout=lambda n=name: str(worker.status(n)))
    careless = wait_until(
        lambda: (st := worker.status("db-careless"))["tasks"] and
        all(t["state"] == "FAILED" for t in st["tasks"]) and st, 30, message="careless fails")

    # resolved where it is used: the connector and every task got the real password
    probe = (tmp_path / "probe.txt").read_text().splitlines()
    for name, secret in (("db-env", ENV_SECRET), ("db-file", FILE_SECRET),
                         ("db-literal", LITERAL)):
        assert f"connector {name} {digest(secret)}" in probe
        for i in range(2):
            assert f"task {name}-{i} {digest(secret)} {digest(secret)}" in probe, probe
    assert "login refused for password [hidden]" in careless["tasks"][0]["trace"]

    # the CLI, as a table and as machine output
    for name in files:
        for out in ("table", "json", "yaml"):
            kctl("connector", "get", name, "-o", out)
            kctl("connector", "config", name, "-o", out)
            kctl("connector", "status", name, "-o", out)
    kctl("connector", "list")
    kctl("connector", "list", "-o", "json")
    shown = json.loads(kctl("connector", "config", "db-file", "-o", "json"))
    assert shown["connection.password"] == f"${{file:{secrets}/db.properties:password}}"
    assert json.loads(kctl("connector", "config", "db-literal", "-o", "json"))[
        "connection.password"] == "[hidden]"

    # kcctl's habit: what `config` shows, edited and applied back; the password stays
    back = yaml.safe_load(kctl("connector", "config", "db-literal", "-o", "yaml"))
    (tmp_path / "back.yaml").write_text(yaml.safe_dump({**back, "connection.user": "ops"}))
    kctl("connector", "apply", str(tmp_path / "back.yaml"), "--wait")
    wait_until(lambda: (tmp_path / "probe.txt").read_text().splitlines().count(
        f"connector db-literal {digest(LITERAL)}") == 2, 30, message="restarted with LITERAL")
    assert digest("[hidden]") not in (tmp_path / "probe.txt").read_text()

    for text in outputs:
        assert_absent(text, ALL, "CLI output")
    assert "[hidden]" in "".join(outputs)

    # every REST answer about the connectors
    with httpx.Client(base_url=worker.url, timeout=30) as api:
        answers = [api.get("/connectors", params={"expand": ["info", "status"]}).text]
        for name, f in files.items():
            for path in ("", "/config", "/tasks", "/status", "/tasks/0/status"):
                answers.append(api.get(f"/connectors/{name}{path}").text)
            answers.append(api.put(f"/connector-plugins/{PASSWORD}/config/validate",
                                   json=yaml.safe_load(f.read_text())).text)
    for text in answers:
        assert_absent(text, ALL, "a REST answer")

    # the stores: placeholders only; a literal password only in the config store
    worker.stop()
    state = tmp_path / "state"
    stored = [p for p in state.rglob("*") if p.is_file()]
    assert any(p.name == "configs.json" for p in stored)
    for p in stored:
        data = p.read_bytes().decode("utf-8", "replace")
        assert_absent(data, (ENV_SECRET, FILE_SECRET), str(p))
        if p.name != "configs.json":
            assert_absent(data, (LITERAL,), str(p))
    configs = (state / "configs.json").read_text()
    assert "${env:KCTL_TEST_DB_PASSWORD}" in configs

    # the worker's log: the careless connector's lines are there, with [hidden]
    log = (tmp_path / "worker.log").read_text()
    assert_absent(log, ALL, "the worker's log")
    assert "logs in as kctl with password [hidden]" in log
    assert "logs in as ops with password [hidden]" in log
    assert "login refused for password [hidden]" in log
