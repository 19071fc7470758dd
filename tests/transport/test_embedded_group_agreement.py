"""One coordinator: the embedded log's consumer groups, the simulator behind `kctl rebalance
explain` and the assignor called directly tell the same story, round by round.

The embedded groups drive `kctl.group.coordinator.Coordinator` and `GroupMember` with the
log's clock; the simulator drives the same classes on its fake clock. Each story runs on
both; every completed generation must have the same members and assignments, and each
assignment must be what the assignor computes from the subscriptions the group carried.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support.clock import FakeClock

from kctl.api.records import TopicPartition
from kctl.group.assignors.consumer import (
    CooperativeStickyAssignor,
    RangeAssignor,
    Subscription,
    encode_generation,
)
from kctl.group.assignors.consumer import TopicPartition as GroupTopicPartition
from kctl.rebalance import explain
from kctl.transport.base import TopicSpec
from kctl.transport.embedded import EmbeddedTransport

TOPICS = {"T0": 3, "T1": 4}
SESSION_MS = 10_000


class Story:
    """Consumers named like the simulator's members, on one embedded log and clock."""

    def __init__(self, t: EmbeddedTransport, clock: FakeClock, strategy: str):
        self.t, self.clock, self.strategy = t, clock, strategy
        self.consumers: dict[str, Any] = {}
        self.names: dict[str, str] = {}  # member handle -> story name
        self.revoked: dict[str, list[TopicPartition]] = {}

    def join(self, name: str) -> None:
        c = self.t.consumer("g", {"partition.assignment.strategy": self.strategy,
                                  "session.timeout.ms": SESSION_MS})
        self.revoked[name] = []
        c.subscribe(list(TOPICS), on_revoke=self.revoked[name].extend)
        self.consumers[name] = c
        self.names[c.member_id] = name
        self.poll()

    def leave(self, name: str) -> None:
        self.consumers.pop(name).close()
        self.poll()

    def poll(self, *names: str) -> None:
        for name in names or list(self.consumers):
            self.consumers[name].poll_batch(10, 0)

    def rounds(self) -> dict[int, dict[str, list[str]]]:
        return {r.generation: {self.names[m]: ps for m, ps in r.assignments.items()}
                for r in self.t.groups.history("g")}

    def check_invariants(self) -> None:
        """No partition is held by two members; a stable group covers every partition.
        (A consumer the group expired while it stalled still lists what it held until it
        polls again, and revokes all of it before it reads.)"""
        described = self.t.admin().describe_groups(["g"])["g"]
        members = [self.names[m] for m in described["members"]]
        held = [tp for name in members for tp in self.consumers[name].assignment()]
        assert len(held) == len(set(held)), f"a partition is held twice: {sorted(held)}"
        if described["state"] == "Stable":
            assert set(held) == {TopicPartition(t, p) for t, n in TOPICS.items()
                                 for p in range(n)}


def simulated(strategy: str, members: list[str], events: list[dict]) -> dict[int, dict]:
    doc = explain.simulate_document({
        "kind": "consumer", "protocol": strategy, "topics": TOPICS,
        "session_timeout_ms": SESSION_MS,
        "members": {m: list(TOPICS) for m in members}, "events": events})
    return {r["generation"]: r["assignments"] for r in doc["rounds"]}


@pytest.fixture
def story(tmp_path) -> Callable[[str], Story]:
    opened: list[EmbeddedTransport] = []

    def make(strategy: str) -> Story:
        clock = FakeClock(1000.0)
        t = EmbeddedTransport(tmp_path / strategy, clock=clock)
        opened.append(t)
        t.admin().create_topics([TopicSpec(n, p) for n, p in TOPICS.items()])
        return Story(t, clock, strategy)

    yield make
    for t in opened:
        t.close()


def test_eager_range_group_agrees_with_the_simulator_and_the_assignor(story):
    """a, b and c join one by one; b leaves. Every generation is what range computes."""
    s = story("range")
    for name in ("a", "b", "c"):
        s.join(name)
        s.check_invariants()
    s.leave("b")
    s.check_invariants()

    embedded = s.rounds()
    assert embedded == simulated("range", ["a"], [{"join": {"b": list(TOPICS)}},
                                                  {"join": {"c": list(TOPICS)}},
                                                  {"leave": "b"}])
    assert sorted(embedded) == [1, 2, 3, 4]
    for members in embedded.values():
        direct = RangeAssignor().assign(
            TOPICS, {m: Subscription(tuple(TOPICS)) for m in members})
        assert {m: [str(tp) for tp in a.partitions] for m, a in direct.items()} == members
    # eager: every member gave up everything at every rebalance it was part of
    assert len(s.revoked["a"]) == sum(len(embedded[g]["a"]) for g in (1, 2, 3))


def test_a_member_that_stalls_past_its_session_is_expired_and_rejoins_like_in_explain(story):
    """cooperative-sticky: a, b and c share the topics; c stops polling. The coordinator
    expires c's session, a and b take over its partitions; when c polls again it learns it
    was dropped, gives up what it held and rejoins, and the group moves its share back in
    two rounds. The simulator's `pause` tells the same rounds."""
    s = story("cooperative-sticky")
    for name in ("a", "b", "c"):
        s.join(name)
    before = s.rounds()
    c_held = s.consumers["c"].assignment()
    assert c_held

    # c stalls; a and b keep polling as time passes
    for _ in range(SESSION_MS // 1000 + 2):
        s.clock.advance(1.0)
        s.poll("a", "b")
        s.check_invariants()
    after_expiry = s.rounds()
    expired = max(after_expiry)
    assert set(after_expiry[expired]) == {"a", "b"}, "c's session expired"
    taken = {tp for name in ("a", "b") for tp in s.consumers[name].assignment()}
    assert {TopicPartition(t, p) for t, n in TOPICS.items() for p in range(n)} == taken
    assert s.consumers["c"].assignment() == c_held, "a stalled consumer has not polled"

    # c wakes up: lost membership -> revoke everything, rejoin, two cooperative rounds
    s.poll("c")
    s.poll()
    s.check_invariants()
    assert sorted(s.revoked["c"]) == sorted(c_held)
    final = s.rounds()
    assert set(final[max(final)]) == {"a", "b", "c"}
    assert max(final) == expired + 2

    sim = simulated("cooperative-sticky", ["a"], [{"join": {"b": list(TOPICS)}},
                                                  {"join": {"c": list(TOPICS)}},
                                                  {"pause": {"c": SESSION_MS + 2000}}])
    assert final == sim
    assert before == {g: sim[g] for g in before}

    # each round is the assignor's answer to what the members carried into it
    prior = final[expired]
    subscriptions = {
        m: Subscription(tuple(TOPICS), encode_generation(expired),
                        tuple(GroupTopicPartition.parse(p) for p in ps), expired)
        for m, ps in prior.items()
    } | {"c": Subscription(tuple(TOPICS), encode_generation(-1), (), -1)}
    direct = CooperativeStickyAssignor().assign(TOPICS, subscriptions)
    assert {m: [str(tp) for tp in a.partitions] for m, a in direct.items()} == final[expired + 1]
