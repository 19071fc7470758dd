"""Workers joining a cluster the way operators change one: worker processes on the test
broker, driven through REST and the CLI.

Stories: a worker whose `connect.protocol` the group cannot take says so in one line and
keeps trying (it joins once the group can take it); `connect.protocol` changes from
`default` through `compatible` to `sessioned` one worker at a time while a connector runs
(on the test broker the group still runs the protocol it formed with: see that story).
"""

from __future__ import annotations

import json
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
    # the test broker fixes a group's protocol to its first member's first choice for
    # good, so a worker offering only `default` never joins a `sessioned` group there
    # (Kafka would take it: every member supports `default`)
    cluster = Cluster(tmp_path, kafka_broker.bootstrap, **{"connect.protocol": "sessioned"})
    try:
        cluster.add()
        w2 = ClusterWorker(tmp_path, "w2", {**cluster.settings, "connect.protocol": "default"})
        cluster.workers.append(w2)
        Worker.start(w2)  # its REST comes up; it does not join

        wait_until(lambda: "cannot join group" in w2.log(), timeout=60,
                   message="w2 says why it cannot join", on_timeout=w2.log)
        code, text = health(w2)
        assert code == 503 and "connect.protocol=default" in text

        # it keeps trying, with a backoff, and does not say so again at every attempt
        r = httpx.put(f"{w2.url}/admin/loggers/kctl.runtime.distributed",
                      json={"level": "DEBUG"}, timeout=10)
        assert r.status_code == 200, r.text
        wait_until(lambda: w2.log().count("retrying in") >= 2, timeout=60,
                   message="w2 retries", on_timeout=w2.log)
        assert w2.proc.poll() is None and health(w2)[0] == 503
        assert len([line for line in w2.log().splitlines()
                    if "cannot join group" in line and " ERROR " in line]) == 1
        assert "cannot take RequestRejoin" not in w2.log()
        # kafka-python's connection chatter stays out of the log unless asked for
        assert " INFO kafka." not in w2.log()
    finally:
        cluster.stop()


def test_connect_protocol_changes_one_worker_at_a_time(kafka_broker, tmp_path):
    cluster = Cluster(tmp_path, kafka_broker.bootstrap, **{"connect.protocol": "default"})
    try:
        w1, w2 = cluster.add(), cluster.add()
        w1.kctl("connector", "create", str(counter_source(tmp_path, "rolling", 4)))
        wait_until(lambda: cluster.running("rolling", 4), timeout=90, message="running",
                   on_timeout=cluster.logs)
        # a rolling change in three restarts, one worker at a time: the group holds members
        # offering default and compatible, then compatible and sessioned, then sessioned only
        for w, protocol in ((w1, "compatible"), (w2, "sessioned"), (w1, "sessioned")):
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

        # Which protocol the group runs now. Kafka's coordinator would pick `sessioned`, the
        # first choice of every member. The test broker (Tansu 0.6.0) picks a group's
        # protocol once, from its first member's first choice, and keeps it for as long as
        # it keeps the group (in memory, until it stops), even with no member left: the
        # rolling change works (no worker is refused, the connector keeps running) but the
        # group stays on `default`, i.e. eager, on this broker.
        described = json.loads(w1.kctl("group", "describe", "-o", "json").stdout)
        last = max(cluster.generations(), key=lambda g: g["generation"])
        offered = {yaml.safe_load((w.work / "worker.yaml").read_text())["connect.protocol"]
                   for w in (w1, w2)}
        assert offered == {"sessioned"}
        assert last["protocol"] == described["protocol"] == "default"
    finally:
        cluster.stop()


def test_writes_during_a_rebalance_answer_at_once_and_the_cli_waits_them_out(kafka_broker,
                                                                              tmp_path):
    """Creating a connector rebalances the group; a write that arrives meanwhile is
    answered at once, done or 409 naming why (Kafka's behaviour), and the CLI retries
    such a 409 up to its --timeout, saying that it waits."""
    cluster = Cluster(tmp_path, kafka_broker.bootstrap, **{"connect.protocol": "sessioned"})
    try:
        w1, w2 = cluster.add(), cluster.add()
        answers = []
        for i in range(4):
            body = yaml.safe_load(counter_source(tmp_path, f"busy-{i}", 2).read_text())
            while True:  # a REST client that does not retry would see these
                r = httpx.post(f"{w2.url}/connectors", json=body, timeout=5)  # never hangs
                answers.append((r.status_code, r.json().get("message", "")))
                if r.status_code != 409:
                    break
        assert {code for code, _ in answers} <= {201, 409}
        assert [code for code, _ in answers].count(201) == 4
        assert all("rebalanc" in message for code, message in answers if code == 409)

        # the CLI takes the 409s on itself
        for i in range(4, 7):
            r = w1.kctl("connector", "create", str(counter_source(tmp_path, f"busy-{i}", 2)))
            assert r.returncode == 0
            assert all(line.startswith("waiting:") for line in r.stderr.splitlines()
                       if line.strip())
        wait_until(lambda: all(cluster.running(f"busy-{i}", 2) for i in range(7)),
                   timeout=120, message="all running", on_timeout=cluster.logs)
    finally:
        cluster.stop()


def test_a_worker_of_another_group_on_the_same_topics_is_refused(kafka_broker, tmp_path):
    """It would run every connector a second time (an exactly-once sink then holds every
    line twice): the topics remember which group owns them."""
    cluster = Cluster(tmp_path, kafka_broker.bootstrap)
    try:
        w1 = cluster.add()
        stranger = ClusterWorker(tmp_path, "stranger", {**cluster.settings,
                                                        "group.id": "another-group"})
        stranger.launch()
        code = stranger.proc.wait(120)
        log = stranger.log()
        assert code == 2, log[-3000:]
        assert f"belongs to worker group '{cluster.group}'" in log
        assert "'another-group'" in log and w1.worker_id in log
        assert health(w1)[0] == 200
    finally:
        cluster.stop()
