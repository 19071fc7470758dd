"""What a connector config sent over REST may reach on the worker's host: FileSource and
FileSink paths under the worker's file.connector.allowed.paths, `${file:...}` placeholders
under the provider's allowed.paths (KIP-993), providers the worker has, and client
overrides its policy allows. Each refusal names the key and why, and nothing is created."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kctl.connectors.file._common import list_files
from kctl.launch import StandaloneWorker
from kctl.runtime.worker_config import WorkerConfig

SOURCE = "kctl.connectors.file.source.FileSourceConnector"
SINK = "kctl.connectors.file.sink.FileSinkConnector"


@pytest.fixture
def host(tmp_path) -> dict[str, Path]:
    """/allowed (with data), /outside (a secret), and symlinks from inside to outside."""
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    (allowed / "in").mkdir(parents=True)
    outside.mkdir()
    (allowed / "in" / "a.txt").write_text("fine\n")
    (outside / "secret.txt").write_text("do not read\n")
    (outside / "db.properties").write_text("password=hunter22\n")
    (allowed / "in" / "leak.txt").symlink_to(outside / "secret.txt")
    (allowed / "link-out").symlink_to(outside, target_is_directory=True)
    (allowed / "secrets.properties").write_text("password=inside-ok\n")
    return {"allowed": allowed, "outside": outside}


@contextlib.contextmanager
def worker(tmp_path: Path, host: dict[str, Path], **extra) -> Iterator[httpx.Client]:
    w = StandaloneWorker(WorkerConfig({
        "state.dir": str(tmp_path / "state"), "listeners": "http://127.0.0.1:0",
        "file.connector.allowed.paths": str(host["allowed"]),
        "config.providers": "file", "config.providers.file.class": "file",
        "config.providers.file.param.allowed.paths": str(host["allowed"]), **extra}))
    w.start()
    try:
        with httpx.Client(base_url=w.rest.url, timeout=30) as client:
            yield client
    finally:
        w.stop()


def refused(api: httpx.Client, name: str, config: dict[str, str]) -> dict[str, list[str]]:
    """Create the connector; it must be refused (400) and not exist afterwards."""
    r = api.post("/connectors", json={"name": name, "config": config})
    assert r.status_code == 400, r.text
    assert api.get("/connectors").json() == []
    return r.json()["errors"]


def source(path: str | Path) -> dict[str, str]:
    return {"connector.class": SOURCE, "path": str(path), "topic": "t"}


def test_file_paths_outside_the_allow_list_are_refused(tmp_path, host):
    allowed, outside = host["allowed"], host["outside"]
    with worker(tmp_path, host) as api:
        cases = {
            "outside": outside / "secret.txt",
            "dot-dot": f"{allowed}/in/../../outside/secret.txt",
            "symlinked-dir": allowed / "link-out" / "secret.txt",
            "glob-outside": f"{outside}/*.txt",
            "system": "/etc/passwd",
            "relative": "in/a.txt",
        }
        for name, path in cases.items():
            errors = refused(api, name, source(path))
            assert list(errors) == ["path"], (name, errors)
            assert "file.connector.allowed.paths" in errors["path"][0], errors
        sink = refused(api, "sink-out", {"connector.class": SINK, "topics": "t",
                                         "path": str(outside / "out")})
        assert "outside the directories" in sink["path"][0]
        dot_dot = refused(api, "dd", source(f"{allowed}/../outside/secret.txt"))
        assert f"resolves to {outside}/secret.txt" in dot_dot["path"][0]
        sink_dot_dot = refused(api, "sink-dd", {"connector.class": SINK, "topics": "t",
                                                "path": f"{allowed}/out/../../outside/out"})
        assert f"resolves to {outside}/out" in sink_dot_dot["path"][0]
        # inside is fine (validated only: running a FileSource needs Spark)
        ok = api.put(f"/connector-plugins/{SOURCE}/config/validate",
                     json=source(f"{allowed}/in/*.txt")).json()
        assert not [c for c in ok["configs"] if c["value"]["name"] == "path"
                    and c["value"]["errors"]]


def test_files_a_symlink_leads_out_of_the_allow_list_are_skipped_at_run_time(host):
    inside = str(host["allowed"] / "in")
    assert {os.path.basename(f) for f in list_files(inside)} == {"a.txt", "leak.txt"}
    assert [os.path.basename(f) for f in list_files(inside, [str(host["allowed"])])] == \
        ["a.txt"]
    glob = f"{host['allowed']}/**/*.txt"
    assert [os.path.basename(f) for f in list_files(glob, [str(host["allowed"])])] == ["a.txt"]


@pytest.mark.parametrize("link", ["topic", "partition"])
def test_a_file_sink_fails_rather_than_follow_a_symlink_out_of_the_allow_list(tmp_path, host,
                                                                              link):
    """A symlink made inside the sink's directory after it was validated - where the topic's
    or a partition's directory goes - fails the task, naming the path, and nothing is
    created or written where it leads."""
    from support.inprocess import produce
    from support.waiting import wait_until

    from kctl.states import State

    allowed, outside = host["allowed"], host["outside"]
    root = allowed / "out"
    (root / "t").mkdir(parents=True)
    where = root / "t" if link == "topic" else root / "t" / "partition=0"
    if link == "topic":
        (root / "t").rmdir()
    where.symlink_to(outside, target_is_directory=True)
    before = sorted(p.name for p in outside.iterdir())
    w = StandaloneWorker(WorkerConfig({
        "state.dir": str(tmp_path / "state"), "listeners": "http://127.0.0.1:0",
        "file.connector.allowed.paths": str(allowed)}))
    w.start()
    try:
        produce(w.transport, "t", [b'{"a": 1}'])
        w.herder.create_connector("sink", {"connector.class": SINK, "topics": "t",
                                           "path": str(root), "flush.size": "1",
                                           "value.converter": "StringConverter"})
        status = wait_until(lambda: (s := w.herder.connector_status("sink")).tasks and
                            s.tasks[0].state is State.FAILED and s, timeout=60,
                            message="the sink task FAILED")
    finally:
        w.stop()
    trace = status.tasks[0].trace
    assert f"{root}/t" in trace and "file.connector.allowed.paths" in trace, trace
    assert sorted(p.name for p in outside.iterdir()) == before


def test_placeholders_outside_allowed_paths_or_of_unknown_providers_are_refused(tmp_path,
                                                                                 host):
    outside, allowed = host["outside"], host["allowed"]
    with worker(tmp_path, host) as api:
        base = {"connector.class": "support.connectors.CounterSourceConnector",
                "topic": "t", "tasks.max": "1"}
        errors = refused(api, "steal", {**base, "db.password":
                                        f"${{file:{outside}/db.properties:password}}"})
        assert "allowed.paths" in errors["db.password"][0]
        assert "hunter22" not in str(errors)
        escape = refused(api, "escape", {**base, "db.password":
                                         f"${{file:{allowed}/../outside/db.properties:password}}"})
        assert "allowed.paths" in escape["db.password"][0]
        unknown = refused(api, "vault", {**base, "db.password": "${vault:secret/db:password}"})
        assert "names config provider 'vault', which this worker does not have" in \
            unknown["db.password"][0]
        ok = api.post("/connectors", json={"name": "ok", "config": {
            **base, "db.password": f"${{file:{allowed}/secrets.properties:password}}"}})
        assert ok.status_code == 201, ok.text


@pytest.mark.parametrize("policy, allowed, refused_keys", [
    ("None", [], ["producer.override.linger.ms", "producer.override.sasl.jaas.config"]),
    ("Principal", ["producer.override.sasl.jaas.config"], ["producer.override.linger.ms"]),
    ("org.apache.kafka.connect.connector.policy.AllConnectorClientConfigOverridePolicy",
     ["producer.override.sasl.jaas.config", "producer.override.linger.ms"], []),
])
def test_client_overrides_follow_the_worker_policy(tmp_path, host, policy, allowed,
                                                   refused_keys):
    overrides = {"producer.override.linger.ms": "5",
                 "producer.override.sasl.jaas.config":
                     'org.apache.kafka.common.security.plain.PlainLoginModule required '
                     'username="u" password="p";'}
    with worker(tmp_path, host, **{"connector.client.config.override.policy": policy}) as api:
        r = api.put("/connector-plugins/support.connectors.CounterSourceConnector/config/"
                    "validate", json={"topic": "t", **overrides})
        errors = {c["value"]["name"]: c["value"]["errors"] for c in r.json()["configs"]
                  if c["value"]["errors"]}
        assert sorted(errors) == sorted(refused_keys)
        for key in refused_keys:
            assert f"policy does not allow '{key.split('.', 2)[2]}'" in errors[key][0]
        assert all(k not in errors for k in allowed)
