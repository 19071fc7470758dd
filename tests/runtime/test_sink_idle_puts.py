"""Between batches a sink task is called with empty puts, as Kafka Connect calls it, so a sink
that writes on a timer (FileSink's rotate.interval.ms, JdbcSink's buffer) sees the clock while
no records come, not only at the next offset commit."""

from support import probes
from support.inprocess import produce, running_worker, unique
from support.waiting import wait_until


def test_an_idle_sink_is_put_nothing_between_commits(tmp_path):
    topic, name = unique("idle"), unique("idle-sink")
    # commits a minute apart: whatever reaches the task meanwhile comes through put()
    with running_worker(tmp_path / "state", {"offset.flush.interval.ms": 60_000}) as w:
        produce(w.transport, topic, [str(i).encode() for i in range(3)])
        w.herder.create_connector(name, {
            "connector.class": "support.probes.GatedSinkConnector", "topics": topic,
            "value.converter": "JsonConverter", "value.converter.schemas.enable": "false"})
        wait_until(lambda: sum(probes.PUT_SIZES[name]) == 3, timeout=60,
                   message="the three records put")
        after = len(probes.PUT_SIZES[name])
        wait_until(lambda: len(probes.PUT_SIZES[name]) >= after + 3, timeout=10,
                   message="empty puts while no records come")
        assert probes.PUT_SIZES[name][after:] == [0] * (len(probes.PUT_SIZES[name]) - after)
        assert probes.PRE_COMMITS[name] == [], "no offset commit came meanwhile"
        assert sorted(probes.WRITTEN[name]) == [0, 1, 2]
