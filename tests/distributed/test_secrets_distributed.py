"""Secrets in a cluster: the task configs a follower generates from a resolved password go
to the leader (the internal endpoint) and into the config topic with the placeholder back
in; a write sent to a follower with `[hidden]` (forwarded to the leader) keeps the stored
password."""

from __future__ import annotations

import uuid

import httpx
import pytest
from support.cluster import REBALANCE_MS, REJOIN_DELAY_MS, SESSION_MS
from support.secret_connectors import digest
from support.waiting import through_rebalances, wait_until

from kctl.launch import DistributedWorker
from kctl.runtime.dlq import read_topic
from kctl.runtime.worker_config import WorkerConfig

pytestmark = pytest.mark.broker

ENV_SECRET = "env-clu5ter-s3cret-Nd38"
LITERAL = "literal-clu5ter-s3cret-Jr94"


def cluster_config(broker, group: str) -> WorkerConfig:
    return WorkerConfig({
        "bootstrap.servers": broker.bootstrap, "group.id": group,
        "config.storage.topic": f"{group}-configs", "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status",
        "config.storage.replication.factor": 1, "offset.storage.replication.factor": 1,
        "status.storage.replication.factor": 1, "offset.storage.partitions": 2,
        "status.storage.partitions": 2,
        "listeners": "http://127.0.0.1:0", "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": 500, "rebalance.timeout.ms": REBALANCE_MS,
        "revocation.rejoin.delay.ms": REJOIN_DELAY_MS,
        "scheduled.rebalance.max.delay.ms": 0, "offset.flush.interval.ms": 200,
        "topic.creation.default.replication.factor": 1,
        "config.providers": "env", "config.providers.env.class": "env"})


def test_task_configs_and_writes_keep_secrets_out_of_the_config_topic(kafka_broker, tmp_path,
                                                                      monkeypatch):
    monkeypatch.setenv("KCTL_TEST_CLUSTER_PASSWORD", ENV_SECRET)
    group = f"secrets-{uuid.uuid4().hex[:6]}"
    probe = tmp_path / "probe.txt"
    workers: list[DistributedWorker] = []
    try:
        for _ in range(2):
            w = DistributedWorker(cluster_config(kafka_broker, group))
            w.start()
            workers.append(w)
        wait_until(lambda: all(w.herder.healthy()[0] for w in workers), timeout=60,
                   message="both workers joined")
        follower = next(w for w in workers if not w.herder.is_leader)
        configs = {
            "env-pw": "${env:KCTL_TEST_CLUSTER_PASSWORD}", "literal-pw": LITERAL}
        with httpx.Client(base_url=follower.rest.url, timeout=60) as api:
            for name, password in configs.items():
                r = through_rebalances(lambda n=name, p=password: api.post(
                    "/connectors", json={"name": n, "config": {
                        "connector.class": "support.secret_connectors.PasswordSourceConnector",
                        "tasks.max": "2", "connection.password": p,
                        "probe.file": str(probe)}}))
                assert r.status_code == 201, r.text

            def running() -> bool:
                for name in configs:
                    s = workers[0].herder.connector_status(name)
                    if len(s.tasks) != 2 or any(t.state.value != "RUNNING" for t in s.tasks):
                        return False
                return True

            wait_until(running, timeout=60, message="both connectors running")
            lines = probe.read_text().splitlines()
            for name, secret in (("env-pw", ENV_SECRET), ("literal-pw", LITERAL)):
                for i in range(2):
                    assert f"task {name}-{i} {digest(secret)} {digest(secret)}" in lines, lines
            for name in configs:
                for task in api.get(f"/connectors/{name}/tasks").json():
                    assert task["config"]["connection.password"] in (
                        "${env:KCTL_TEST_CLUSTER_PASSWORD}", "[hidden]")
                    assert ENV_SECRET not in str(task) and LITERAL not in str(task)

            shown = api.get("/connectors/literal-pw/config").json()
            assert shown["connection.password"] == "[hidden]"
            r = through_rebalances(lambda: api.put(
                "/connectors/literal-pw/config", json={**shown, "connection.user": "ops"}))
            assert r.status_code == 200, r.text
            wait_until(lambda: all(w.configs.connector_config("literal-pw")["connection.user"]
                                   == "ops" for w in workers), timeout=30, message="applied")
            for w in workers:
                assert w.configs.connector_config("literal-pw")["connection.password"] == LITERAL

        records = read_topic(workers[0].transport, f"{group}-configs")
        text = b"".join((r.value or b"") + (r.key or b"") for r in records).decode("utf-8",
                                                                                   "replace")
        assert "${env:KCTL_TEST_CLUSTER_PASSWORD}" in text
        assert ENV_SECRET not in text
    finally:
        for w in workers:
            w.stop()
