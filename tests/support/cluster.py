"""A kctl cluster of worker processes on the real Kafka-protocol broker, driven through the
CLI and REST as a user would."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from support.waiting import wait_until
from support.worker import LISTENER, Worker

SESSION_MS = 4000
REBALANCE_MS = 6000  # a member stopping tasks (up to 2 s each) still rejoins in time
# Sink tasks' consumer groups, test-sized: the test broker completes a JoinGroup half a
# session timeout after the first member's, so the default 10 s made every sink group round
# 5 s (the worker's `consumer.` prefix sets the sink consumers' defaults).
# (max.poll.interval.ms is also how long a sink consumer's member may go without completing a
# generation before it joins again as a new member)
SINK_CONSUMERS = {"consumer.session.timeout.ms": 4000, "consumer.heartbeat.interval.ms": 500,
                  "consumer.max.poll.interval.ms": 10000}
# The test broker answers a waiting SyncGroup once a second: a worker that revoked work
# rejoins a little later, so the others' assignments of that generation arrive first and a
# join takes Kafka's two generations, not three or four.
REJOIN_DELAY_MS = 1200
# The test broker answers a waiting fetch only when its wait is over, so a record written
# meanwhile is read that much later; Kafka's 500 ms would slow every config, status and
# record hand-over, 50 ms would make every idle consumer of three workers fetch 20 times a
# second (about 1.5% of a core of broker time each).
FETCH_MAX_WAIT_MS = 200


def cluster_settings(bootstrap: str, group: str, **extra: Any) -> dict[str, Any]:
    """Worker settings for one cluster: its group, its three topics, test-sized timeouts."""
    return {
        "bootstrap.servers": bootstrap, "group.id": group,
        "config.storage.topic": f"{group}-configs", "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status", "schema.registry.topic": f"{group}-schemas",
        "config.storage.replication.factor": 1, "offset.storage.replication.factor": 1,
        "status.storage.replication.factor": 1, "offset.storage.partitions": 5,
        "status.storage.partitions": 2, "topic.creation.default.replication.factor": 1,
        "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 500,
        "rebalance.timeout.ms": REBALANCE_MS, "scheduled.rebalance.max.delay.ms": 0,
        "revocation.rejoin.delay.ms": REJOIN_DELAY_MS, "fetch.max.wait.ms": FETCH_MAX_WAIT_MS,
        "offset.flush.interval.ms": 200, "task.shutdown.graceful.timeout.ms": 2000,
        "spark.master": "local[1]", "spark.driver.memory": "512m",
        "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1",
        "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        "spark.start": "lazy",  # only the tests that run Spark jobs start a JVM
        **SINK_CONSUMERS, **extra}


class ClusterWorker(Worker):
    """A distributed worker process; `name` is its directory under the test's tmp dir."""

    def __init__(self, root: Path, name: str, settings: Mapping[str, Any]):
        work = root / name
        work.mkdir(parents=True, exist_ok=True)
        super().__init__(work)
        self.name = name
        (work / "worker.yaml").write_text(yaml.safe_dump({
            **settings, "listeners": LISTENER, "state.dir": str(work / "state")}))

    @property
    def worker_id(self) -> str:
        """host:port, as the group and the status topic name this worker."""
        return self.url.split("://", 1)[1]

    def start(self, *connector_files: Path) -> None:
        super().start(*connector_files)
        wait_until(self.joined, timeout=90, message=f"{self.name} joined its group")

    def joined(self) -> bool:
        try:
            return httpx.get(f"{self.url}/health", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def metric(self, name: str, labels: tuple = ()) -> float:
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for f in text_string_to_metric_families(text) for s in f.samples}
        return samples.get((f"kafka_connect_connect_worker_metrics_{name}", labels), 0.0)

    def task_starts(self) -> int:
        return int(self.metric("task_startup_attempts_total"))


class Cluster:
    def __init__(self, root: Path, bootstrap: str, **extra: Any):
        self.root = root
        self.group = f"kctl-cluster-{uuid.uuid4().hex[:8]}"
        self.settings = cluster_settings(bootstrap, self.group, **extra)
        self.workers: list[ClusterWorker] = []

    def add(self, **overrides: Any) -> ClusterWorker:
        w = ClusterWorker(self.root, f"w{len(self.workers) + 1}", {**self.settings, **overrides})
        w.start()
        self.workers.append(w)
        return w

    def live(self) -> list[ClusterWorker]:
        return [w for w in self.workers if w.proc is not None and w.proc.poll() is None]

    def status(self, connector: str, via: ClusterWorker | None = None) -> dict:
        return (via or self.live()[0]).status(connector)

    def placement(self, connector: str) -> dict[str, str]:
        """connector or task id -> worker id, for what is RUNNING."""
        s = self.status(connector)
        out = {}
        if s["connector"]["state"] == "RUNNING":
            out[connector] = s["connector"]["worker_id"]
        for t in s["tasks"]:
            if t["state"] == "RUNNING":
                out[f"{connector}-{t['id']}"] = t["worker_id"]
        return out

    def running(self, connector: str, tasks: int) -> bool:
        try:
            s = self.status(connector)
        except AssertionError:
            return False
        return s["connector"]["state"] == "RUNNING" and len(s["tasks"]) == tasks and all(
            t["state"] == "RUNNING" for t in s["tasks"])

    def generations(self) -> list[dict[str, Any]]:
        """Every worker's record of every generation it completed, read from the status
        topic as `kctl rebalance history` will read it."""
        from kctl.storage.topic_stores import KafkaStatusBackingStore
        from kctl.transport.kafka import KafkaTransport

        transport = KafkaTransport(self.settings["bootstrap.servers"])
        store = KafkaStatusBackingStore(transport, self.settings)
        store.start()
        try:
            return store.generations()
        finally:
            store.stop()
            transport.close()

    def stop(self) -> None:
        for w in self.workers:
            w.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {w.name}\n{w.log()[-4000:]}" for w in self.workers)
