"""What a killed worker stopped, and a full restart, told by the history of a cluster of
worker processes.

Story: three `kctl worker start` processes run a DataGen source of six tasks (sessioned).
One that is not the leader gets `kill -9`: it writes nothing more, so the round that notices
it counts what it ran from the leader's assignment and says so; `explain --generation` of
that round shows those stops (it showed zeros). Then a second worker is stopped with
Ctrl-C: its round says "worker left" and counts what it stopped from its departure note.
Every line of both answers comes from `kctl ... -o json`, as a script would read it.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import yaml
from support.browser import dom, screenshot
from support.cluster import Cluster
from support.timelines import chart, texts
from support.waiting import wait_until

from kctl.group.assignors.connect import ConnectorsAndTasks, union_all

pytestmark = [pytest.mark.broker, pytest.mark.slow]

GEN = "killed-gen"


def history(worker) -> dict:
    return json.loads(worker.kctl("-o", "json", "rebalance", "history").stdout)


def ran_on(cluster: Cluster, worker_id: str) -> ConnectorsAndTasks:
    here = [n for n, w in cluster.placement(GEN).items() if w == worker_id]
    return ConnectorsAndTasks.of([n for n in here if n == GEN], [n for n in here if n != GEN])


def noticed(doc: dict, cause: str, worker_id: str) -> dict | None:
    return next((r for r in doc["rounds"]
                 if {"cause": cause, "worker": worker_id} in r["causes"]), None)


def test_a_killed_workers_stops_are_counted_and_marked(kafka_broker, tmp_path: Path):
    cluster = Cluster(tmp_path, kafka_broker.bootstrap, **{"connect.protocol": "sessioned"})
    try:
        w1, w2, w3 = cluster.add(), cluster.add(), cluster.add()
        config = tmp_path / f"{GEN}.yaml"
        config.write_text(yaml.safe_dump({"name": GEN, "config": {
            "connector.class": "DataGen", "topic": "killed-seq", "tasks.max": 6,
            "throughput": 10}}))
        w1.kctl("connector", "create", str(config))
        wait_until(lambda: cluster.running(GEN, 6)
                   and len(set(cluster.placement(GEN).values())) == 3, timeout=120,
                   message="datagen on all three workers", on_timeout=cluster.logs)

        leader = max(cluster.generations(), key=lambda g: g["generation"])["leader"]
        victim, stopping, last = sorted(
            (w1, w2, w3), key=lambda w: leader.startswith(w.worker_id + "-"))
        ran = ran_on(cluster, victim.worker_id)
        assert ran.tasks, "the victim runs some tasks"
        victim.kill()

        doc = wait_until(lambda: (lambda d: d if noticed(d, "worker lost its session",
                                                         victim.worker_id) else None)(
            history(last)), timeout=90, interval=1, message="the round that notices the kill",
            on_timeout=cluster.logs)
        round_ = noticed(doc, "worker lost its session", victim.worker_id)
        assert ConnectorsAndTasks.from_json(round_["revoked"][victim.worker_id]) == ran
        assert round_["sources"][victim.worker_id] == "gone (leader's assignment)"
        one = json.loads(last.kctl("-o", "json", "rebalance", "explain", "--generation",
                                   str(round_["generation"])).stdout)
        assert one["summary"]["tasks_stopped"] >= len(ran.tasks) > 0
        shown = last.kctl("rebalance", "explain", "--generation",
                          str(round_["generation"])).stdout
        assert "told from the leader's last assignment" in shown

        wait_until(lambda: cluster.running(GEN, 6), timeout=90, message="datagen settled",
                   on_timeout=cluster.logs)
        held = ran_on(cluster, stopping.worker_id)
        stopping.stop()  # Ctrl-C: it leaves with its note
        doc = wait_until(lambda: (lambda d: d if noticed(d, "worker left",
                                                         stopping.worker_id) else None)(
            history(last)), timeout=90, interval=1, message="the round of the clean stop",
            on_timeout=cluster.logs)
        left = noticed(doc, "worker left", stopping.worker_id)
        assert left["sources"][stopping.worker_id] == "departure note"
        assert ConnectorsAndTasks.from_json(left["revoked"].get(stopping.worker_id, {})) == held
        # the kill's round still says what it said
        assert noticed(doc, "worker lost its session", victim.worker_id) == round_
    finally:
        cluster.stop()


def test_a_full_restart_shows_its_shutdown_and_its_start(kafka_broker, tmp_path: Path):
    """Both workers get Ctrl-C at once and start again: the history shows a shutdown round
    (what each stopped, from its note) and the group forming again, with how long it was
    down; the timeline draws the outage as a gap in every lane."""
    cluster = Cluster(tmp_path, kafka_broker.bootstrap, **{"connect.protocol": "sessioned"})
    try:
        w1, w2 = cluster.add(), cluster.add()
        config = tmp_path / f"{GEN}.yaml"
        config.write_text(yaml.safe_dump({"name": GEN, "config": {
            "connector.class": "DataGen", "topic": "restart-seq", "tasks.max": 4,
            "throughput": 10}}))
        w1.kctl("connector", "create", str(config))
        wait_until(lambda: cluster.running(GEN, 4), timeout=120, message="datagen running",
                   on_timeout=cluster.logs)

        for w in (w1, w2):  # at once, as a user stopping the whole cluster
            w.proc.send_signal(signal.SIGINT)
        for w in (w1, w2):
            assert w.proc.wait(60) == 0, w.log()[-3000:]
        for w in (w1, w2):  # and start again together
            w.launch()
        for w in (w1, w2):
            w.wait_for_rest()
            wait_until(w.joined, timeout=180, message=f"{w.name} joined again",
                       on_timeout=cluster.logs)
        wait_until(lambda: cluster.running(GEN, 4), timeout=120, message="datagen again",
                   on_timeout=cluster.logs)

        def restarted() -> dict | None:
            doc = history(w1)
            rounds = doc["rounds"]
            at = next((i for i, r in enumerate(rounds) if r.get("event") == "shutdown"), None)
            return doc if at is not None and at + 1 < len(rounds) else None

        doc = wait_until(restarted, timeout=60, interval=1, message="the restart recorded",
                         on_timeout=cluster.logs)
        at = next(i for i, r in enumerate(doc["rounds"]) if r.get("event") == "shutdown")
        shutdown, again = doc["rounds"][at], doc["rounds"][at + 1]
        assert shutdown["causes"][0]["cause"] == "group stopped"
        stopped = union_all(ConnectorsAndTasks.from_json(w)
                            for w in shutdown["revoked"].values())
        # everything ran until the workers stopped it as they left
        assert stopped == ConnectorsAndTasks.of([GEN], [f"{GEN}-{i}" for i in range(4)])
        assert set(shutdown["sources"].values()) <= {"departure note",
                                                     "gone (leader's assignment)"}
        assert again["causes"][0]["cause"] == "group formed again"
        assert "after a full restart (down " in again["trigger"]

        page = tmp_path / "restart.html"
        w1.kctl("rebalance", "history", "--html", str(page))
        shown = dom(page.as_uri(), size="1600,1000")
        assert "shutdown" in [t for _, t in texts(chart(shown, 0))]
        screenshot(page.as_uri(), "timeline-live-full-restart", size="1600,1000")
    finally:
        cluster.stop()
