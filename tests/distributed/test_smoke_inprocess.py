import uuid

import pytest
from support.cluster import REBALANCE_MS, REJOIN_DELAY_MS, SESSION_MS
from support.waiting import wait_until

from kctl.launch import DistributedWorker
from kctl.runtime.worker_config import WorkerConfig

pytestmark = pytest.mark.broker


def cluster_config(broker, group, **extra):
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
        "topic.creation.default.replication.factor": 1, **extra})


def test_two_workers_share_a_connector(kafka_broker, tmp_path):
    group = f"cluster-{uuid.uuid4().hex[:6]}"
    workers = []
    try:
        for _ in range(2):
            w = DistributedWorker(cluster_config(kafka_broker, group))
            w.start()
            workers.append(w)
        wait_until(lambda: all(w.herder.healthy()[0] for w in workers), timeout=60)
        topic = f"t-{uuid.uuid4().hex[:6]}"
        workers[1].herder.create_connector if False else None
        import httpx
        r = httpx.post(workers[1].rest.url + "/connectors", json={"name": "c1", "config": {
            "connector.class": "support.connectors.CounterSourceConnector", "topic": topic,
            "tasks.max": "4", "count": "50"}}, timeout=60)
        assert r.status_code == 201, r.text
        def spread():
            s = workers[0].herder.connector_status("c1")
            return len(s.tasks) == 4 and all(t.state.value == "RUNNING" for t in s.tasks) and s
        s = wait_until(spread, timeout=60)
        owners = {t.worker_id for t in s.tasks}
        print(s, [w.herder.group_info() for w in workers])
        assert len(owners) == 2
    finally:
        for w in workers:
            w.stop()


def test_status_right_after_create_names_no_worker_that_does_not_run_it(kafka_broker,
                                                                         tmp_path):
    """Before any worker reports on a new connector, its status is UNASSIGNED with no
    worker named (it used to name whichever worker was asked)."""
    import httpx

    group = f"cluster-{uuid.uuid4().hex[:6]}"
    workers = []
    try:
        for _ in range(2):
            w = DistributedWorker(cluster_config(kafka_broker, group))
            w.start()
            workers.append(w)
        wait_until(lambda: all(w.herder.healthy()[0] for w in workers), timeout=60)
        name = "fresh"
        seen: list[tuple[str, str, str, str | None]] = []  # (what, state, worker, trace)

        def look() -> None:
            for w in workers:
                try:
                    s = w.herder.connector_status(name)
                except Exception:
                    continue  # not read back by this worker yet
                seen.append((name, s.state.value, s.worker_id, s.trace))
                seen.extend((f"{name}-{t.task}", t.state.value, t.worker_id, t.trace)
                            for t in s.tasks)

        r = httpx.post(workers[1].rest.url + "/connectors", json={"name": name, "config": {
            "connector.class": "support.connectors.CounterSourceConnector",
            "topic": f"t-{uuid.uuid4().hex[:6]}", "tasks.max": "4", "count": "50"}},
            timeout=60)
        assert r.status_code == 201, r.text

        def running() -> bool:
            look()
            s = workers[0].herder.connector_status(name)
            return s.state.value == "RUNNING" and len(s.tasks) == 4 and all(
                t.state.value == "RUNNING" for t in s.tasks)

        wait_until(running, timeout=60, interval=0.02)
        final = workers[0].herder.connector_status(name)
        runs_on = {name: final.worker_id, **{f"{name}-{t.task}": t.worker_id
                                             for t in final.tasks}}
        unplaced = [(what, w, trace) for what, state, w, trace in seen
                    if state == "UNASSIGNED" and w != runs_on[what]]
        assert unplaced, "the status was read before every part was placed"
        assert all(w == "" and "Not assigned to a worker yet" in (trace or "")
                   for _, w, trace in unplaced), unplaced
    finally:
        for w in workers:
            w.stop()
