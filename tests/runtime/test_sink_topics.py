"""A sink never creates the topics it reads: the source that writes them does.

Story: a sink connector starts before its input topic exists; the topic is still absent
while the sink runs (Kafka Connect's sinks never create topics), then a source creates it
with the three partitions it asked for, and the sink's task reads every record from all
three partitions.
"""

from __future__ import annotations

from support import connectors
from support.inprocess import running_worker, unique
from support.waiting import wait_until

from kctl.states import State, TaskId


def test_a_sink_waits_for_its_topic_and_the_source_creates_it(tmp_path, transport_settings):
    topic, sink, source = unique("later"), unique("early-sink"), unique("late-source")
    with running_worker(tmp_path / "state", transport_settings) as w:
        w.herder.create_connector(sink, {
            "connector.class": "support.connectors.CollectingSinkConnector", "topics": topic})
        wait_until(lambda: w.herder.connector_status(sink).tasks
                   and w.herder.connector_status(sink).tasks[0].state is State.RUNNING,
                   timeout=60, message="the sink task runs")
        wait_until(lambda: TaskId(sink, 0) in w.herder._w.tasks, timeout=30,
                   message="the sink task's consumer subscribed")
        assert topic not in w.transport.admin().list_topics()

        w.herder.create_connector(source, {
            "connector.class": "support.connectors.CounterSourceConnector", "topic": topic,
            "count": 30, "tasks.max": 1, "topic.creation.default.partitions": 3,
            "topic.creation.default.replication.factor": 1})
        wait_until(lambda: w.transport.admin().list_topics().get(topic) == 3, timeout=60,
                   message="the source created the topic with its partitions")
        wait_until(lambda: len(connectors.SINK_RECEIVED[sink]) >= 30, timeout=90,
                   message="the sink reads what the source wrote")
        assert sorted(v for *_, v in connectors.SINK_RECEIVED[sink]) == list(range(30))
