"""The coordinator under random request orders: whatever members do, its books stay sane."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kctl.group.coordinator import Coordinator, GroupState
from kctl.group.messages import (
    ErrorCode,
    Heartbeat,
    JoinGroup,
    JoinGroupResponse,
    LeaveGroup,
    SyncGroup,
    SyncGroupResponse,
)

NAMES = ["a", "b", "c", "d"]


class CoordinatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.c = Coordinator()
        self.now = 0
        self.generations: list[int] = [0]
        self.known: dict[str, str] = {}  # client -> member id
        self.sync_answers: dict[int, set[str]] = {}

    def send(self, request) -> None:
        for reply in self.c.handle(request, self.now):
            # "" addresses the sender of the request being answered.
            self.observe(reply.to or request.member_id, reply.response)

    def observe(self, to: str, response) -> None:
        if isinstance(response, JoinGroupResponse) and response.error is ErrorCode.NONE:
            # Every member of a generation hears the same leader and protocol.
            assert response.leader in self.c.members
            assert response.generation == self.c.generation
        if isinstance(response, SyncGroupResponse) and response.error is ErrorCode.NONE:
            self.sync_answers.setdefault(response.generation, set()).add(to)

    @rule(name=st.sampled_from(NAMES))
    def join(self, name: str) -> None:
        member_id = self.known.get(name, "")
        replies = self.c.handle(JoinGroup(member_id, name, "connect", (("p", name),)), self.now)
        for reply in replies:
            if reply.response.error is ErrorCode.MEMBER_ID_REQUIRED:
                self.known[name] = reply.response.member_id
                self.send(JoinGroup(self.known[name], name, "connect", (("p", name),)))
            elif reply.response.error is ErrorCode.UNKNOWN_MEMBER_ID:
                del self.known[name]
            else:
                self.observe(reply.to or member_id, reply.response)

    @rule(name=st.sampled_from(NAMES))
    def leave(self, name: str) -> None:
        if name in self.known:
            self.send(LeaveGroup(self.known.pop(name)))

    @rule(name=st.sampled_from(NAMES), stale=st.booleans())
    def heartbeat(self, name: str, stale: bool) -> None:
        if name in self.known:
            generation = self.c.generation - 1 if stale else self.c.generation
            replies = self.c.handle(Heartbeat(self.known[name], generation), self.now)
            error = replies[0].response.error
            if self.c.state is GroupState.STABLE and self.known[name] in self.c.members:
                assert error is (ErrorCode.ILLEGAL_GENERATION if stale else ErrorCode.NONE)

    @precondition(lambda self: self.c.state is GroupState.COMPLETING_REBALANCE)
    @rule()
    def leader_syncs(self) -> None:
        leader = self.c.leader
        assert leader is not None
        self.send(SyncGroup(leader, self.c.generation, {m: m for m in self.c.members}))
        assert self.c.state is GroupState.STABLE

    @rule(name=st.sampled_from(NAMES))
    def follower_syncs(self, name: str) -> None:
        if name in self.known and self.known[name] != self.c.leader:
            self.send(SyncGroup(self.known[name], self.c.generation))

    @rule(ms=st.sampled_from([0, 1_000, 11_000, 61_000]))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        for reply in self.c.poll(self.now):
            self.observe(reply.to, reply.response)

    @invariant()
    def books_are_consistent(self) -> None:
        c = self.c
        assert (c.state is GroupState.EMPTY) == (not c.members)
        if c.members:
            assert c.leader in c.members
        assert c.generation >= self.generations[-1]
        self.generations.append(c.generation)
        if c.state is GroupState.STABLE:
            # Stable means every member holds what the leader computed for it.
            assert all(info.assignment == m for m, info in c.members.items())
        # A member only ever receives the assignment of its own generation once it is
        # stable, and only members of that generation receive one.
        for generation, receivers in self.sync_answers.items():
            assert generation <= c.generation
            if generation == c.generation and c.state is GroupState.STABLE:
                assert receivers <= set(c.members) | set(self.known.values())


CoordinatorMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None
)
test_coordinator_under_random_requests = CoordinatorMachine.TestCase
