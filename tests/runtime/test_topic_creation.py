"""Topics a source creates take the connector's `topic.creation.default.*` settings, as a
Kafka Connect source may set them, and the worker's defaults otherwise; on the embedded log
and on the broker."""

from __future__ import annotations

from support.inprocess import running_worker, unique
from support.waiting import wait_until

from kctl.states import State

SOURCE = "support.connectors.CounterSourceConnector"


def test_a_source_creates_its_topics_with_its_own_or_the_workers_partition_count(
        tmp_path, transport_settings):
    own, default, bad = unique("own"), unique("default"), unique("bad")
    own_topic, default_topic = unique("three-partitions"), unique("two-partitions")
    settings = {**transport_settings, "topic.creation.default.partitions": 2}
    with running_worker(tmp_path / "state", settings) as w:
        h, admin = w.herder, w.transport.admin()
        h.create_connector(own, {"connector.class": SOURCE, "topic": own_topic, "count": 5,
                                 "topic.creation.default.partitions": 3,
                                 "topic.creation.default.replication.factor": 1})
        h.create_connector(default, {"connector.class": SOURCE, "topic": default_topic,
                                     "count": 5})
        h.create_connector(bad, {"connector.class": SOURCE, "topic": unique("never"),
                                 "topic.creation.default.partitions": "none"})

        topics = wait_until(lambda: (t := admin.list_topics()).keys() >= {own_topic, default_topic}
                            and t, timeout=30, message="both topics created")
        assert topics[own_topic] == 3
        assert topics[default_topic] == 2

        st = wait_until(lambda: (s := h.connector_status(bad)).tasks and
                        s.tasks[0].state is State.FAILED and s, timeout=30,
                        message="the task with an unusable partition count FAILED")
        assert "Invalid value 'none' for topic.creation.default.partitions" in st.tasks[0].trace
