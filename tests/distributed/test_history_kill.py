"""What a killed worker stopped, told by the history of a cluster of worker processes. (A
full restart's shutdown and start are told by tests/distributed/test_history_in_process.py
on real herders: the test broker can keep a group leaderless after every worker of it
stopped at once, see CONTRIBUTING.md.)

Story: three `kctl worker start` processes run a DataGen source of six tasks (sessioned).
One that is not the leader gets `kill -9`: it writes nothing more, so the round that notices
it counts what it ran from the leader's assignment and says so; `explain --generation` of
that round shows those stops (it showed zeros). Then a second worker is stopped with
Ctrl-C: its round says "worker left" and counts what it stopped from its departure note.
Every line of both answers comes from `kctl ... -o json`, as a script would read it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from support.cluster import Cluster
from support.waiting import wait_until

from kctl.group.assignors.connect import ConnectorsAndTasks

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

        def told_whole(d: dict) -> dict | None:
            """The round that notices the kill, once every survivor's own record of it is in
            (until then a survivor's row is told from the leader's assignment)."""
            r = noticed(d, "worker lost its session", victim.worker_id)
            return d if r and all(source == "worker record" for w, source in
                                  r["sources"].items() if w != victim.worker_id) else None

        doc = wait_until(lambda: told_whole(history(last)), timeout=90, interval=1,
                         message="the round that notices the kill, told whole",
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

