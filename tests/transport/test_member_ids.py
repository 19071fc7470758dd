"""A worker's group members join with the member ids its previous process held.

Stories: the record under `state.dir` hands each member an id no other member of the process
holds, the one that last led the group first, follows the ids the coordinator gives, keeps
them after the members close, and is used by one process at a time. On the test broker, a
sink group whose leader left while the group re-formed (every later member waits for an
assignment nobody sends, see CONTRIBUTING.md) forms again once a consumer of the worker that
led it joins: it joins with the leader's member id and is the leader again; a member of that
worker told of a leader it held before joins as that leader.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from support.waiting import wait_until

from kctl.api.records import TopicPartition
from kctl.transport.base import TopicSpec
from kctl.transport.kafka import KafkaConsumer, KafkaTransport
from kctl.transport.member_ids import FILE_NAME, MemberIds


def test_members_take_distinct_ids_follow_new_ones_and_keep_them_after_closing(tmp_path):
    ids = MemberIds(tmp_path)
    assert ids.take("g") == ""
    ids.replace("g", "", "a")
    ids.replace("g", "", "b")
    assert json.loads((tmp_path / FILE_NAME).read_text()) == {"g": ["a", "b"]}
    ids.replace("g", "b", "b", leads=True)  # b leads the group: its id goes first
    ids.give_back("g", "a")
    ids.give_back("g", "b")
    assert json.loads((tmp_path / FILE_NAME).read_text()) == {"g": ["b", "a"]}

    first, second = ids.take("g"), ids.take("g")
    assert {first, second} == {"a", "b"} and ids.take("g") == ""  # no id twice
    ids.replace("g", first, "c")  # the coordinator did not know it: it gave another
    ids.replace("g", second, "")  # joined afresh: that membership is given up
    assert json.loads((tmp_path / FILE_NAME).read_text()) == {"g": ["c"]}
    ids.give_back("g", "c")
    ids.close()

    # the next process finds them
    again = MemberIds(tmp_path)
    assert again.take("g") == "c" and again.take("other") == ""
    again.close()


def test_one_process_at_a_time_keeps_ids_in_a_state_dir(tmp_path):
    first, second = MemberIds(tmp_path), MemberIds(tmp_path)
    first.replace("g", "", "a")
    assert second.take("g") == ""  # the first holds the file: the second keeps nothing
    second.replace("g", "", "b")
    assert json.loads((tmp_path / FILE_NAME).read_text()) == {"g": ["a"]}
    first.close()
    second.close()


@pytest.mark.broker
def test_a_group_left_by_its_leader_mid_round_forms_when_that_worker_returns(kafka_broker,
                                                                              tmp_path: Path):
    conf = {"session.timeout.ms": 4000, "heartbeat.interval.ms": 500,
            "max.poll.interval.ms": 10000}
    group, topic = f"connect-{uuid.uuid4().hex[:10]}", f"mi-{uuid.uuid4().hex[:10]}"
    dirs = {name: tmp_path / name for name in ("w1", "w2", "w3")}
    transports = {name: KafkaTransport(kafka_broker.bootstrap, member_ids=MemberIds(d))
                  for name, d in dirs.items()}
    everything = {TopicPartition(topic, p) for p in range(2)}
    try:
        transports["w1"].admin().create_topics([TopicSpec(topic, 2)])
        members = {name: transports[name].consumer(group, conf) for name in ("w1", "w2")}
        for m in members.values():
            m.subscribe([topic])

        def owned(consumers: list[KafkaConsumer]) -> set[TopicPartition]:
            for c in consumers:
                c.poll_batch(10, 0.05)
            return set().union(*(c.assignment() for c in consumers))

        wait_until(lambda: owned(list(members.values())) == everything, timeout=60,
                   message="two members formed the group")
        leader = next(n for n, m in members.items() if m._group.member.is_leader)
        follower = next(n for n in members if n != leader)
        leader_id = members[leader]._group.member.member_id
        # every member leaves at once: the follower first, then the leader, mid-round
        members[follower].close()
        members[leader].close()

        # a new worker's consumer waits: the group names the departed leader
        newcomer = transports["w3"].consumer(group, conf)
        newcomer.subscribe([topic])
        wait_until(lambda: newcomer._group.member.leader == leader_id, timeout=30,
                   message="the newcomer told of the departed leader")
        assert owned([newcomer]) == set()

        # the worker that led it returns: its consumer joins with the leader's member id
        transports[leader].close()
        transports[leader] = KafkaTransport(kafka_broker.bootstrap,
                                            member_ids=MemberIds(dirs[leader]))
        returning = transports[leader].consumer(group, conf)
        returning.subscribe([topic])
        wait_until(lambda: owned([newcomer, returning]) == everything, timeout=60,
                   message="the group formed again with the returning leader")
        assert owned([newcomer]) and owned([returning])
        returning.close()
        newcomer.close()
    finally:
        for t in transports.values():
            t.close()


@pytest.mark.broker
def test_a_member_told_of_a_leader_its_worker_held_before_joins_as_that_leader(
        kafka_broker, tmp_path: Path):
    """One worker ran both members of the group; the one its next process starts takes
    whichever id is first on file, is told the other is the leader, and becomes it."""
    conf = {"session.timeout.ms": 4000, "heartbeat.interval.ms": 500,
            "max.poll.interval.ms": 10000}
    group, topic = f"connect-{uuid.uuid4().hex[:10]}", f"mi-{uuid.uuid4().hex[:10]}"
    everything = {TopicPartition(topic, p) for p in range(2)}
    before = KafkaTransport(kafka_broker.bootstrap, member_ids=MemberIds(tmp_path / "w1"))
    transports = [before]
    try:
        before.admin().create_topics([TopicSpec(topic, 2)])
        members = [before.consumer(group, conf) for _ in range(2)]
        for m in members:
            m.subscribe([topic])

        def owned(consumers: list[KafkaConsumer]) -> set[TopicPartition]:
            for c in consumers:
                c.poll_batch(10, 0.05)
            return set().union(*(c.assignment() for c in consumers))

        wait_until(lambda: owned(members) == everything, timeout=60,
                   message="two members formed the group")
        leader = next(m for m in members if m._group.member.is_leader)
        follower = next(m for m in members if m is not leader)
        leader_id, follower_id = (m._group.member.member_id for m in (leader, follower))
        follower.close()
        leader.close()
        before.close()
        # the follower's id first: the next process's member takes it
        (tmp_path / "w1" / FILE_NAME).write_text(json.dumps({group: [follower_id, leader_id]}))

        after = KafkaTransport(kafka_broker.bootstrap, member_ids=MemberIds(tmp_path / "w1"))
        transports.append(after)
        returning = after.consumer(group, conf)
        returning.subscribe([topic])
        wait_until(lambda: owned([returning]) == everything, timeout=60,
                   message="the returning worker's member formed the group")
        assert returning._group.member.member_id == leader_id
        assert json.loads((tmp_path / "w1" / FILE_NAME).read_text()) == {group: [leader_id]}
        returning.close()
    finally:
        for t in transports:
            t.close()
