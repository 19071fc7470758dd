"""A kctl cluster: worker processes with one group.id on the real Kafka-protocol broker.

Stories: three workers share connectors created through any of them; a sink connector's
tasks on three workers share its topic's partitions as one consumer group; a fourth joins and,
under `sessioned`, only what moves to it restarts (under `default` everything does), as
`kctl rebalance explain` predicts for the same joins; every worker is stopped and started
again and the cluster comes back as it was, from its topics.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path

import pytest
import yaml
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka import TopicPartition as KTP
from confluent_kafka.admin import AdminClient
from support.cluster import Cluster
from support.waiting import wait_until

from kctl.group.assignors.connect import ConnectorsAndTasks
from kctl.rebalance.scenario import Scenario
from kctl.rebalance.simulator import simulate
from kctl.states import TaskId
from kctl.transport.base import ProducerRecord, TopicSpec
from kctl.transport.kafka import KafkaTransport

pytestmark = [pytest.mark.broker, pytest.mark.slow]

TASKS = {"ct1": 4, "ct2": 2}


def counter_source(path: Path, name: str, tasks: int, **extra: object) -> Path:
    f = path / f"{name}.yaml"
    f.write_text(yaml.safe_dump({"name": name, "config": {
        "connector.class": "support.connectors.CounterSourceConnector",
        "topic": f"{name}-out", "tasks.max": tasks, "count": 10**9, "per.poll": 1,
        "poll.sleep.ms": 50, **extra}}))
    return f


def work_of(cluster: Cluster) -> dict[str, ConnectorsAndTasks]:
    """worker id -> the connectors and tasks it runs, from the cluster's statuses."""
    owned: dict[str, tuple[set[str], set[TaskId]]] = {
        w.worker_id: (set(), set()) for w in cluster.live()}
    for name in TASKS:
        for key, worker in cluster.placement(name).items():
            if key == name:
                owned[worker][0].add(name)
            else:
                owned[worker][1].add(TaskId(name, int(key.rsplit("-", 1)[1])))
    return {w: ConnectorsAndTasks(frozenset(c), frozenset(t)) for w, (c, t) in owned.items()}


def shape(work: dict[str, ConnectorsAndTasks]) -> dict[str, tuple]:
    return {w: (a.connectors, Counter(t.connector for t in a.tasks)) for w, a in work.items()}


def settled(cluster: Cluster) -> bool:
    return all(cluster.running(n, t) for n, t in TASKS.items())


@pytest.fixture
def cluster(kafka_broker, tmp_path, request):
    c = Cluster(tmp_path, kafka_broker.bootstrap, **getattr(request, "param", {}))
    yield c
    c.stop()


@pytest.mark.parametrize("cluster", [{"connect.protocol": "sessioned"},
                                     {"connect.protocol": "default"}],
                         indirect=True, ids=["sessioned", "default"])
def test_three_workers_share_connectors_and_a_fourth_joins(cluster, tmp_path):
    w1, w2, w3 = cluster.add(), cluster.add(), cluster.add()
    protocol = cluster.settings["connect.protocol"]

    # connectors created through different workers (w2 and w3 forward to the leader)
    w2.kctl("connector", "create", str(counter_source(tmp_path, "ct1", TASKS["ct1"])))
    w3.kctl("connector", "create", str(counter_source(tmp_path, "ct2", TASKS["ct2"])))
    wait_until(lambda: settled(cluster), timeout=90, message="all tasks RUNNING",
               on_timeout=cluster.logs)
    before = work_of(cluster)
    assert all(not work.is_empty for work in before.values()), before  # spread over all 3
    assert sum(len(w.tasks) for w in before.values()) == sum(TASKS.values())

    # status shows each task's worker, through any worker
    table = w1.kctl("connector", "status", "ct1").stdout
    for task_worker in {t["worker_id"] for t in cluster.status("ct1")["tasks"]}:
        assert task_worker in table

    starts_before = sum(w.task_starts() for w in cluster.live())
    w4 = cluster.add()
    wait_until(lambda: settled(cluster) and not work_of(cluster)[w4.worker_id].is_empty,
               timeout=90, message="w4 runs its share", on_timeout=cluster.logs)
    after = work_of(cluster)

    # balanced: connectors and tasks differ by one at most between workers
    for kind in ("connectors", "tasks"):
        counts = [len(getattr(work, kind)) for work in after.values()]
        assert max(counts) - min(counts) <= 1, (kind, after)

    restarted = sum(w.task_starts() for w in cluster.live()) - starts_before
    moved = {t for w, work in after.items() for t in work.tasks
             if t not in before.get(w, ConnectorsAndTasks()).tasks}
    if protocol == "sessioned":
        assert restarted == len(moved), "only the tasks that moved were restarted"
        assert moved == after[w4.worker_id].tasks
    else:  # eager: every task stops at the rebalance and starts again
        assert restarted == sum(TASKS.values())

    # the same events replayed in the simulator give the same assignment
    joined = [w.worker_id for w in (w1, w2, w3)]
    predicted = simulate(Scenario.from_dict({
        "kind": "connect", "protocol": protocol, "scheduled_rebalance_max_delay_ms": 0,
        "workers": joined, "connectors": {},
        "events": [{"connector_add": {"ct1": 0}}, {"tasks_change": {"ct1": 4}},
                   {"connector_add": {"ct2": 0}}, {"tasks_change": {"ct2": 2}},
                   {"join": w4.worker_id}]})).final
    # which of a connector's equal tasks lands where can hang on the order the broker
    # answered the joins in; what the assignor decided (which connectors, how many of
    # each connector's tasks per worker) must be the same
    assert shape(after) == shape(dict(predicted))


def test_sink_tasks_on_three_workers_read_disjoint_partitions_and_commit_to_their_group(
        cluster, tmp_path, kafka_broker):
    """Each sink task is a member of the consumer group connect-<name>, which kctl's own
    cooperative-sticky assignor shares out: one task per worker, two partitions each, every
    record read once, and the offsets each member committed are what Kafka's admin client
    (so any lag tool) and `kctl connector offsets get` show."""
    topic, name = f"fan-{uuid.uuid4().hex[:8]}", f"fan-sink-{uuid.uuid4().hex[:8]}"
    transport = KafkaTransport(kafka_broker.bootstrap)
    transport.admin().create_topics([TopicSpec(topic, 6)])

    def produce(start: int) -> None:
        p = transport.producer()
        for i in range(start, start + 600):
            p.send(ProducerRecord(topic, json.dumps(i).encode(), partition=i % 6))
        assert p.flush(30) == 0
        p.close()

    out = tmp_path / "fan.jsonl"

    def lines() -> list[dict]:
        return [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []

    for _ in range(3):
        cluster.add()
    config = tmp_path / f"{name}.yaml"
    config.write_text(yaml.safe_dump({"name": name, "config": {
        "connector.class": "support.sinks.JsonLinesSinkConnector", "topics": topic,
        "tasks.max": 3, "path": str(out), "record.origin": True,
        "value.converter": "JsonConverter", "value.converter.schemas.enable": False}}))
    produce(0)
    cluster.workers[1].kctl("connector", "create", str(config))
    wait_until(lambda: cluster.running(name, 3) and len(lines()) >= 600, timeout=90,
               on_timeout=cluster.logs, message="three sink tasks read the first 600 records")
    placement = cluster.placement(name)
    assert len({placement[f"{name}-{t}"] for t in range(3)}) == 3  # one task per worker
    assert sorted(x["value"] for x in lines()) == list(range(600))

    # the group is settled: what arrives now is read by whoever holds its partition
    produce(600)
    wait_until(lambda: len(lines()) >= 1200, timeout=60, message="the next 600 records")
    second = [x for x in lines() if x["value"] >= 600]
    assert sorted(x["value"] for x in second) == list(range(600, 1200))
    readers = {p: {x["task"] for x in second if x["partition"] == p} for p in range(6)}
    assert all(len(tasks) == 1 for tasks in readers.values()), readers
    assert Counter(t for [t] in readers.values()) == {0: 2, 1: 2, 2: 2}

    group = f"connect-{name}"
    request = ConsumerGroupTopicPartitions(group, [KTP(topic, p) for p in range(6)])
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    wait_until(lambda: {p.partition: p.offset for p in admin.list_consumer_group_offsets(
        [request])[group].result(30).topic_partitions} == dict.fromkeys(range(6), 200),
        timeout=30, message="every task committed its partitions' ends to the group")
    shown = json.loads(cluster.workers[2].kctl("connector", "offsets", "get", name,
                                               "-o", "json").stdout)
    assert sorted((o["partition"]["kafka_partition"], o["offset"]["kafka_offset"])
                  for o in shown["offsets"]) == [(p, 200) for p in range(6)]
    transport.close()


def test_a_stopped_and_restarted_cluster_comes_back_from_its_topics(cluster, tmp_path):
    w1, w2 = cluster.add(), cluster.add()
    for name in ("running", "paused", "stopped"):
        w1.kctl("connector", "create", str(counter_source(tmp_path, name, 2, count=30,
                                                           **{"per.poll": 5})))
    wait_until(lambda: all(cluster.running(n, 2) for n in ("running", "paused", "stopped")),
               timeout=90, on_timeout=cluster.logs)
    wait_until(lambda: all(
        {o["offset"]["i"] for o in w2.offsets(n)}
        == {29} for n in ("running", "paused", "stopped")), timeout=60,
        message="every task produced its 30 records")
    w2.kctl("connector", "pause", "paused")
    w1.kctl("connector", "stop", "stopped")
    wait_until(lambda: cluster.status("paused")["connector"]["state"] == "PAUSED"
               and cluster.status("stopped")["connector"]["state"] == "STOPPED", timeout=60)

    # one at a time, each time until the rest runs everything: on the test broker a group
    # whose last member leaves in the middle of a rebalance never completes another join
    # (real Kafka does not have this quirk)
    w2.stop()
    wait_until(lambda: {w for n in ("running", "paused") for w in
                        cluster.placement(n).values()} == {w1.worker_id}, timeout=90,
               message="w1 runs everything", on_timeout=cluster.logs)
    w1.stop()
    v1, v2 = cluster.add(), cluster.add()  # new processes, same group and topics

    wait_until(lambda: cluster.running("running", 2), timeout=90, on_timeout=cluster.logs)
    wait_until(lambda: cluster.status("paused")["connector"]["state"] == "PAUSED", timeout=60)
    assert cluster.status("stopped")["connector"]["state"] == "STOPPED"
    assert cluster.status("stopped")["tasks"] == []
    listed = json.loads(v2.kctl("connector", "list", "-o", "json").stdout)
    assert sorted(c["name"] if isinstance(c, dict) else c for c in listed) == [
        "paused", "running", "stopped"]
    for name in ("running", "paused", "stopped"):
        offsets = json.loads(v1.kctl("connector", "offsets", "get", name, "-o", "json").stdout)
        assert Counter(o["offset"]["i"] for o in offsets["offsets"]) == {29: 2}
