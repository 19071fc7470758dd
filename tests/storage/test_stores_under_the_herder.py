"""The file stores and the embedded log under the standalone herder, without REST or Spark:
connectors, their target state and their offsets come back after a worker restart."""

from __future__ import annotations

import pytest
from support import connectors as sc
from support.waiting import wait_until

from kctl.launch import file_stores
from kctl.runtime.plugins import Plugins
from kctl.runtime.standalone import StandaloneHerder
from kctl.runtime.worker import Worker
from kctl.runtime.worker_config import WorkerConfig
from kctl.states import State, TargetState
from kctl.transport.embedded import EmbeddedTransport

SOURCE = "support.connectors.CounterSourceConnector"
SINK = "support.connectors.CollectingSinkConnector"


class NoSpark:
    def spark(self):
        raise AssertionError("these connectors do not use Spark")

    def stop(self):
        pass


class MiniWorker:
    """What StandaloneWorker wires together, minus REST and Spark."""

    def __init__(self, state_dir):
        self.config = WorkerConfig({"state.dir": str(state_dir), "offset.flush.interval.ms": 50})
        self.transport = EmbeddedTransport(state_dir)
        stores = file_stores(state_dir)
        self.offsets, self.configs, self.statuses = stores.offsets, stores.configs, stores.statuses
        plugins = Plugins([])
        self.herder = StandaloneHerder("w1", plugins, self.configs, self.statuses, self.offsets)
        self.herder.start(Worker(self.config, worker_id="w1", transport=self.transport,
                                 offset_store=self.offsets, status=self.herder, plugins=plugins,
                                 spark=NoSpark()))

    def stop(self):
        self.herder.stop()
        for s in (self.offsets, self.configs, self.statuses):
            s.stop()
        self.transport.close()


@pytest.fixture
def workers(tmp_path):
    started: list[MiniWorker] = []

    def start() -> MiniWorker:
        w = MiniWorker(tmp_path / "state")
        started.append(w)
        return w

    yield start
    for w in started:
        w.stop()


def test_a_pipeline_resumes_from_its_offsets_and_states_after_a_restart(workers, request):
    src, snk, topic = f"src-{request.node.name}", f"snk-{request.node.name}", "counted"
    w = workers()
    h = w.herder
    h.create_connector(src, {"connector.class": SOURCE, "topic": topic, "count": 300,
                             "tasks.max": 2})
    h.create_connector(snk, {"connector.class": SINK, "topics": topic})
    wait_until(lambda: len(sc.SINK_RECEIVED[snk]) >= 600, message="600 records in the sink")
    h.pause_connector(snk)
    wait_until(lambda: h.connector_status(snk).state is State.PAUSED, message="sink paused")
    wait_until(lambda: len(h.connector_offsets(src)) == 2, message="source offsets committed")
    w.stop()

    before = len(sc.SINK_RECEIVED[snk])
    w2 = workers()
    h2 = w2.herder
    assert sorted(h2.connectors()) == sorted([src, snk])
    assert w2.configs.target_state(snk) is TargetState.PAUSED
    offsets = {o["partition"]["task"]: o["offset"]["i"] for o in h2.connector_offsets(src)}
    assert offsets == {0: 299, 1: 299}  # the source does not produce its records again
    assert set(h2.connector_topics(src)) == {topic}
    h2.resume_connector(snk)
    wait_until(lambda: h2.connector_status(snk).state is State.RUNNING, message="sink resumed")
    committed = {o["partition"]["kafka_partition"]: o["offset"]["kafka_offset"]
                 for o in h2.connector_offsets(snk)}
    assert sum(committed.values()) == 600  # the sink group committed everything it was given
    assert len(sc.SINK_RECEIVED[snk]) == before  # and nothing is delivered twice
