"""A worker's work lost with it is reassigned when `scheduled.rebalance.max.delay.ms`
expires, with no other member joining, on a coordinator that starts a generation only for
changed metadata (the test broker, Tansu) as on Kafka's.

Story, on a fake clock: three `sessioned` workers share two connectors; w3 dies (or leaves
cleanly, as Ctrl-C does); the leader holds its work back for the delay, then rejoins. The
rejoin's metadata carries the generation the leader completed since its last join, so even
the broker that hands an unchanged rejoin its current generation back starts a new one,
and the lost work runs on the survivors within two rounds of the delay's end.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import pytest

from kctl.group.assignors.connect import EMPTY, ConnectorsAndTasks, configured_work, union_all
from kctl.group.connect_coordinator import ConnectHandler
from kctl.group.coordinator import Coordinator
from kctl.group.messages import JoinGroup
from kctl.group.protocol import (
    GroupMember,
    Leave,
    MemberFailed,
    MemberState,
    Send,
    Start,
    StartWork,
    StopWork,
)

CONNECTORS = {"ct1": 4, "ct2": 2}
DELAY_MS = 8_000
SESSION_MS = 6_000


@dataclass
class Snapshot:
    connectors: dict[str, int] = field(default_factory=lambda: dict(CONNECTORS))
    config_offset: int = 3


class Group:
    """A coordinator and its members exchanging messages at instants of a fake clock."""

    def __init__(self, *, unchanged_rejoin_rebalances: bool):
        self.now = 0
        self.coordinator = Coordinator(
            "connect-cluster", unchanged_rejoin_rebalances=unchanged_rejoin_rebalances)
        self.members: dict[str, GroupMember[ConnectorsAndTasks]] = {}
        self.owned: dict[str, ConnectorsAndTasks] = {}
        self.dead: set[str] = set()
        self.joins: list[tuple[int, str, JoinGroup]] = []
        self._inbox: deque[tuple[str, Any]] = deque()

    def add(self, name: str) -> None:
        handler = ConnectHandler(name, Snapshot(), "sessioned", DELAY_MS)
        member = GroupMember(name, handler, session_timeout_ms=SESSION_MS,
                             rebalance_timeout_ms=SESSION_MS, heartbeat_interval_ms=500)
        self.members[name] = member
        self.owned[name] = EMPTY
        self._act(name, member.handle(Start(), self.now))
        self._drain()

    def kill(self, name: str) -> None:
        """SIGKILL: no goodbye, no more requests."""
        self.dead.add(name)

    def leave(self, name: str) -> None:
        """Ctrl-C: the worker stops its work and sends LeaveGroup."""
        self._act(name, self.members[name].handle(Leave("worker shutting down"), self.now))
        self._drain()
        self.dead.add(name)

    def live(self) -> list[str]:
        return [n for n in self.members if n not in self.dead]

    def _name(self, member_id: str) -> str:
        return next(n for n, m in self.members.items() if m.member_id == member_id)

    def _act(self, name: str, actions: list[Any]) -> None:
        for action in actions:
            if isinstance(action, Send):
                if isinstance(action.request, JoinGroup):
                    self.joins.append((self.now, name, action.request))
                for reply in self.coordinator.handle(action.request, self.now):
                    to = name if reply.to == "" else self._name(reply.to)
                    self._inbox.append((to, reply.response))
            elif isinstance(action, StartWork):
                assert self.owned[name].isdisjoint(action.work)
                self.owned[name] = self.owned[name] | action.work
            elif isinstance(action, StopWork):
                self.owned[name] = self.owned[name] - action.work
            elif isinstance(action, MemberFailed):
                raise AssertionError(f"{name} failed: {action}")

    def _drain(self) -> None:
        while self._inbox:
            to, response = self._inbox.popleft()
            if to not in self.dead:
                self._act(to, self.members[to].handle(response, self.now))
        for reply in self.coordinator.poll(self.now):
            to = self._name(reply.to)
            if to not in self.dead:
                self._act(to, self.members[to].handle(reply.response, self.now))
        if self._inbox:
            self._drain()

    def run_until(self, end_ms: int) -> None:
        while True:
            for name in self.live():
                self._act(name, self.members[name].poll(self.now))
            self._drain()
            due = [d for d in (self.coordinator.next_deadline(),
                               *(self.members[n].next_deadline() for n in self.live()))
                   if d is not None and d > self.now]
            nxt = min(due, default=end_ms)
            if nxt > end_ms:
                self.now = end_ms
                return
            if self.now == end_ms:
                return
            self.now = nxt

    def generation(self) -> int:
        return self.coordinator.generation

    def settled(self) -> bool:
        members = [self.members[n] for n in self.live()]
        return (all(m.state is MemberState.STABLE for m in members)
                and len({m.generation for m in members}) == 1)


def three_workers(*, unchanged_rejoin_rebalances: bool) -> Group:
    group = Group(unchanged_rejoin_rebalances=unchanged_rejoin_rebalances)
    for name in ("w1", "w2", "w3"):
        group.add(name)
        group.run_until(group.now + 2_000)
    assert group.settled() and union_all(group.owned.values()) == configured_work(CONNECTORS)
    return group


@pytest.mark.parametrize("broker", ["changed metadata only (test broker)", "Kafka"])
@pytest.mark.parametrize("departure", ["SIGKILL", "Ctrl-C"])
def test_lost_work_runs_again_when_the_delay_expires_without_a_new_member(broker, departure):
    group = three_workers(unchanged_rejoin_rebalances=broker == "Kafka")
    lost = group.owned["w3"]
    assert not lost.is_empty
    (group.kill if departure == "SIGKILL" else group.leave)("w3")
    # the coordinator hears of a leave at once, of a death when the session expires
    noticed = group.now + (SESSION_MS if departure == "SIGKILL" else 0)
    generation = group.generation()

    # the leader holds the lost work back for the delay: nobody runs it
    while group.now < noticed + DELAY_MS - 1_000:
        group.run_until(group.now + 250)
        assert union_all(group.owned[n] for n in group.live()).isdisjoint(lost)
    assert group.generation() == generation + 1  # the round that noticed
    group.run_until(noticed + DELAY_MS + 3_000)

    # ... then it runs on the survivors, in at most two more generations, with no join
    assert group.settled()
    assert group.live() == ["w1", "w2"]
    work = [group.owned[n] for n in group.live()]
    assert union_all(work) == configured_work(CONNECTORS)
    assert sum(w.size for w in work) == configured_work(CONNECTORS).size, "runs once"
    assert group.generation() - generation <= 2
    assert abs(work[0].size - work[1].size) <= 1


def test_the_test_brokers_model_answers_an_unchanged_rejoin_with_its_generation():
    """Why the epoch is needed: without a change in the metadata, the leader's rejoin
    comes back with the generation it already has, and the lost work would wait for the
    next member to join (113-121 s measured on the test broker before this fix)."""
    group = three_workers(unchanged_rejoin_rebalances=False)
    leader = next(n for n, m in group.members.items() if m.is_leader)
    member = group.members[leader]
    before = group.generation()
    last = next(j for t, n, j in reversed(group.joins) if n == leader)
    replies = group.coordinator.handle(last, group.now)
    assert [r.response.generation for r in replies] == [before]  # no rebalance: same bytes
    rejoin = member.handler.metadata(member.owned, member.last_completed_generation)
    assert dict(rejoin)["sessioned"].epoch == member.last_completed_generation
    assert rejoin != last.protocols, "a rejoin after a completed generation differs"
