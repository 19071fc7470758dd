"""A paused sink task that is handed partitions keeps them paused until it is resumed.

Story: a sink connector is created paused, with records already in its topic; its task
joins the group and is assigned the partition while paused (the poll that keeps its
membership alive runs the rebalance). Nothing may be read then: a record fetched and set
aside while paused would be skipped after the resume, and the next commit would cover it.
On resume every record arrives, from the first.
"""

from __future__ import annotations

from support import probes
from support.inprocess import produce, running_worker, unique
from support.waiting import wait_until

from kctl.states import State, TargetState, TaskId


def test_a_sink_created_paused_delivers_every_record_once_resumed(tmp_path, transport_settings):
    topic, name = unique("paused-in"), unique("paused-sink")
    probes.FLUSH_ALLOWED[name].set()
    with running_worker(tmp_path / "state", transport_settings) as w:
        produce(w.transport, topic, [str(i).encode() for i in range(20)])
        w.herder.create_connector(name, {
            "connector.class": "support.probes.GatedSinkConnector", "topics": topic,
            "value.converter": "JsonConverter", "value.converter.schemas.enable": "false"},
            initial_state=TargetState.PAUSED)
        task = TaskId(name, 0)
        wait_until(lambda: task in w.herder._w.tasks and w.herder._w.tasks[task].consumer.assignment(),
                   timeout=60, message="the paused task was assigned its partition")
        wait_until(lambda: w.herder.connector_status(name).tasks
                   and w.herder.connector_status(name).tasks[0].state is State.PAUSED,
                   timeout=30, message="the task reports PAUSED")
        # what is checked is that nothing happens: let the paused loop poll a few times
        # more, with its partition assigned, to fetch what it must not
        wt = w.herder._w.tasks[task]
        polls, real = [0], wt.while_paused

        def counted() -> None:
            real()
            polls[0] += 1

        wt.while_paused = counted
        wait_until(lambda: polls[0] >= 3, timeout=30, message="three polls while paused")
        assert probes.WRITTEN[name] == []
        w.herder.resume_connector(name)
        wait_until(lambda: len(probes.WRITTEN[name]) >= 20, timeout=60,
                   message="every record once resumed")
        assert probes.WRITTEN[name] == list(range(20))

