"""Workers joining a cluster the way operators change one: worker processes on the test
broker, driven through REST and the CLI.

Stories: a worker whose `connect.protocol` the group cannot take says so in one line and
keeps trying (it joins once the group can take it); `connect.protocol` changes from
`default` through `compatible` to `sessioned` one worker at a time while a connector runs.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import yaml
from support.cluster import Cluster, ClusterWorker
from support.waiting import wait_until
from support.worker import Worker

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def counter_source(path: Path, name: str, tasks: int) -> Path:
    f = path / f"{name}.yaml"
    f.write_text(yaml.safe_dump({"name": name, "config": {
        "connector.class": "support.connectors.CounterSourceConnector",
        "topic": f"{name}-out", "tasks.max": tasks, "count": 10**9, "per.poll": 1,
        "poll.sleep.ms": 50}}))
    return f


def health(w: ClusterWorker) -> tuple[int, str]:
    r = httpx.get(f"{w.url}/health", timeout=5)
    return r.status_code, r.text


def with_protocol(w: ClusterWorker, protocol: str) -> None:
    path = w.work / "worker.yaml"
    settings = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**settings, "connect.protocol": protocol}))


def test_a_worker_the_group_refuses_says_why_and_keeps_trying(kafka_broker, tmp_path):
    # the test broker fixes a group's protocol to its first member's first choice, so a
    # worker offering only `default` cannot join a `sessioned` group there
    cluster = Cluster(tmp_path, kafka_broker.bootstrap, **{"connect.protocol": "sessioned"})
    try:
        w1 = cluster.add()
        w2 = ClusterWorker(tmp_path, "w2", {**cluster.settings, "connect.protocol": "default"})
        cluster.workers.append(w2)
        Worker.start(w2)  # its REST comes up; it does not join

        wait_until(lambda: "cannot join group" in w2.log(), timeout=60,
                   message="w2 says why it cannot join", on_timeout=w2.log)
        code, text = health(w2)
        assert code == 503 and "connect.protocol=default" in text
        assert "cannot take RequestRejoin" not in w2.log()

        # once the group can take it (its only member left, the group is empty), it joins
        w1.stop()
        wait_until(w2.joined, timeout=60, message="w2 joins after retrying",
                   on_timeout=w2.log)
        assert "Joined group" in w2.log()
        assert len([line for line in w2.log().splitlines() if "cannot join group" in line]) == 1
    finally:
        cluster.stop()


def test_connect_protocol_changes_one_worker_at_a_time(kafka_broker, tmp_path):
    cluster = Cluster(tmp_path, kafka_broker.bootstrap, **{"connect.protocol": "default"})
    try:
        w1, w2 = cluster.add(), cluster.add()
        w1.kctl("connector", "create", str(counter_source(tmp_path, "rolling", 4)))
        wait_until(lambda: cluster.running("rolling", 4), timeout=90, message="running",
                   on_timeout=cluster.logs)
        for protocol in ("compatible", "sessioned"):
            for w in (w1, w2):
                w.stop()
                with_protocol(w, protocol)
                w.start()  # waits until it has joined
                wait_until(lambda: cluster.running("rolling", 4), timeout=90,
                           message=f"running after {w.name} moved to {protocol}",
                           on_timeout=cluster.logs)
        # every worker offers `sessioned` now; writes through either still work
        w2.kctl("connector", "pause", "rolling")
        wait_until(lambda: cluster.status("rolling")["connector"]["state"] == "PAUSED",
                   timeout=60, message="paused through w2", on_timeout=cluster.logs)
        assert all("cannot join group" not in w.log() for w in (w1, w2))
    finally:
        cluster.stop()
