"""The sans-IO group core, driven by hand: requests and a time in, replies and actions out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kctl.errors import ProtocolError
from kctl.group.coordinator import Coordinator, GroupState, select_protocol
from kctl.group.messages import (
    CoordinatorReply,
    ErrorCode,
    Heartbeat,
    HeartbeatResponse,
    JoinGroup,
    JoinGroupResponse,
    JoinMember,
    LeaveGroup,
    SyncGroup,
    SyncGroupResponse,
)
from kctl.group.protocol import (
    AssignmentOutcome,
    GroupMember,
    HeartbeatDue,
    Leave,
    MemberFailed,
    MemberState,
    RequestRejoin,
    Send,
    Start,
    StartWork,
    StopWork,
)

# ----------------------------------------------------------------------------- coordinator


def join(
    c: Coordinator, client: str, now: int = 0, protocols: Sequence[str] = ("p",), **kw: Any
) -> str:
    """A new member's two-step join (KIP-394); returns its member id."""
    offered = tuple((p, f"{client}-meta") for p in protocols)
    first = c.handle(JoinGroup("", client, "connect", offered, **kw), now)
    assert first[0].response.error is ErrorCode.MEMBER_ID_REQUIRED
    member_id = first[0].response.member_id
    assert c.handle(JoinGroup(member_id, client, "connect", offered, **kw), now) == []
    return member_id


def rejoin(
    c: Coordinator, member_id: str, now: int = 0, reason: str = ""
) -> list[CoordinatorReply]:
    return c.handle(JoinGroup(member_id, member_id, "connect", (("p", "m"),), reason=reason), now)


def responses(replies: list[CoordinatorReply], kind: type) -> dict[str, Any]:
    return {r.to: r.response for r in replies if isinstance(r.response, kind)}


def stable_group(*clients: str) -> tuple[Coordinator, dict[str, str]]:
    c = Coordinator()
    ids = {name: join(c, name) for name in clients}
    replies = c.poll(0)
    joined = responses(replies, JoinGroupResponse)
    leader = next(r.leader for r in joined.values())
    c.handle(SyncGroup(leader, 1, {i: f"work-of-{i}" for i in ids.values()}), 0)
    for member_id in ids.values():
        if member_id != leader:
            c.handle(SyncGroup(member_id, 1), 0)
    assert c.state is GroupState.STABLE
    return c, ids


def test_first_joiner_leads_generation_one_and_only_the_leader_sees_the_members():
    c = Coordinator()
    w1 = join(c, "w1")
    w2 = join(c, "w2")
    assert c.state is GroupState.PREPARING_REBALANCE
    replies = responses(c.poll(0), JoinGroupResponse)
    assert set(replies) == {w1, w2}
    assert {r.generation for r in replies.values()} == {1}
    assert {r.leader for r in replies.values()} == {w1}
    assert [m.member_id for m in replies[w1].members] == [w1, w2]
    assert replies[w2].members == ()
    assert c.state is GroupState.COMPLETING_REBALANCE


def test_followers_wait_in_sync_until_the_leader_brings_the_assignment():
    c = Coordinator()
    w1, w2 = join(c, "w1"), join(c, "w2")
    c.poll(0)
    assert c.handle(SyncGroup(w2, 1), 0) == []  # parked
    replies = responses(c.handle(SyncGroup(w1, 1, {w1: "a", w2: "b"}), 0), SyncGroupResponse)
    assert {k: v.assignment for k, v in replies.items()} == {w1: "a", w2: "b"}
    assert c.state is GroupState.STABLE
    # A late follower is answered from the stored assignment.
    again = c.handle(SyncGroup(w2, 1), 0)
    assert again[0].response.assignment == "b"


def test_a_new_member_turns_heartbeats_into_rebalance_in_progress():
    c, ids = stable_group("w1", "w2")
    assert c.handle(Heartbeat(ids["w1"], 1), 5)[0].response.error is ErrorCode.NONE
    join(c, "w3", now=10)
    assert c.state is GroupState.PREPARING_REBALANCE
    assert c.trigger == "join w3"
    for member_id in (ids["w1"], ids["w2"]):
        assert (
            c.handle(Heartbeat(member_id, 1), 10)[0].response.error
            is ErrorCode.REBALANCE_IN_PROGRESS
        )
    # The join completes only when the old members are back.
    assert c.poll(10) == []
    rejoin(c, ids["w1"], 10)
    rejoin(c, ids["w2"], 10)
    done = responses(c.poll(10), JoinGroupResponse)
    assert {r.generation for r in done.values()} == {2}
    assert len(done) == 3


def test_stale_generations_and_strangers_are_told_so():
    c, ids = stable_group("w1")
    assert c.handle(Heartbeat(ids["w1"], 0), 0)[0].response.error is ErrorCode.ILLEGAL_GENERATION
    assert c.handle(SyncGroup(ids["w1"], 7), 0)[0].response.error is ErrorCode.ILLEGAL_GENERATION
    assert c.handle(Heartbeat("nobody", 1), 0)[0].response.error is ErrorCode.UNKNOWN_MEMBER_ID
    assert c.handle(SyncGroup("nobody", 1), 0)[0].response.error is ErrorCode.UNKNOWN_MEMBER_ID
    unknown = c.handle(JoinGroup("nobody", "x", "connect", (("p", 1),)), 0)
    assert unknown[0].response.error is ErrorCode.UNKNOWN_MEMBER_ID
    assert c.handle(LeaveGroup("nobody"), 0)[0].response.error is ErrorCode.UNKNOWN_MEMBER_ID


def test_members_without_a_common_protocol_are_refused():
    c, _ = stable_group("w1")
    refused = c.handle(JoinGroup("", "w2", "connect", (("other", 1),)), 0)
    assert refused[0].response.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    wrong_type = c.handle(JoinGroup("", "w2", "consumer", (("p", 1),)), 0)
    assert wrong_type[0].response.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert c.state is GroupState.STABLE


def test_the_protocol_is_the_most_preferred_that_everyone_supports():
    c = Coordinator()
    join(c, "w1", protocols=("sessioned", "compatible", "default"))
    join(c, "w2", protocols=("compatible", "default"))
    replies = responses(c.poll(0), JoinGroupResponse)
    assert {r.protocol for r in replies.values()} == {"compatible"}


def test_when_the_leader_leaves_the_next_member_in_join_order_leads():
    c, ids = stable_group("w1", "w2", "w3")
    c.handle(LeaveGroup(ids["w1"]), 100)
    assert c.trigger == "leave w1"
    rejoin(c, ids["w3"], 100)
    rejoin(c, ids["w2"], 100)
    replies = responses(c.poll(100), JoinGroupResponse)
    assert {r.leader for r in replies.values()} == {ids["w2"]}
    assert c.generation == 2


def test_a_silent_member_expires_after_its_session_timeout():
    c, ids = stable_group("w1", "w2")
    c.handle(Heartbeat(ids["w1"], 1), 9_000)
    assert c.next_deadline() == 10_000  # w2 was last seen at 0
    c.poll(9_999)
    assert ids["w2"] in c.members
    c.poll(10_000)
    assert ids["w2"] not in c.members
    assert c.state is GroupState.PREPARING_REBALANCE
    assert c.trigger == "w2 session expired"


def test_members_that_do_not_rejoin_in_time_are_dropped_at_the_rebalance_timeout():
    c, ids = stable_group("w1", "w2")
    rejoin(c, ids["w1"], 0, reason="config changed")
    assert c.trigger == "config changed"
    # w2 keeps heartbeating (so its session lives) but never rejoins.
    for t in range(3_000, 60_000, 3_000):
        c.handle(Heartbeat(ids["w2"], 1), t)
        assert c.poll(t) == []
    replies = responses(c.poll(60_000), JoinGroupResponse)
    assert set(replies) == {ids["w1"]}
    assert ids["w2"] not in c.members


def test_a_join_during_completing_rebalance_sends_parked_members_back():
    c = Coordinator()
    w1, w2 = join(c, "w1"), join(c, "w2")
    c.poll(0)
    c.handle(SyncGroup(w2, 1), 0)  # parked, waiting for the leader
    first = c.handle(JoinGroup("", "w3", "connect", (("p", 1),)), 0)
    w3 = first[0].response.member_id
    replies = c.handle(JoinGroup(w3, "w3", "connect", (("p", 1),)), 0)
    assert responses(replies, SyncGroupResponse)[w2].error is ErrorCode.REBALANCE_IN_PROGRESS
    assert c.state is GroupState.PREPARING_REBALANCE
    assert c.handle(SyncGroup(w1, 1, {}), 0)[0].response.error is ErrorCode.REBALANCE_IN_PROGRESS


def test_the_last_member_leaving_empties_the_group():
    c, ids = stable_group("w1")
    c.handle(LeaveGroup(ids["w1"]), 0)
    assert c.state is GroupState.EMPTY
    assert c.leader is None


def test_a_dead_group_takes_nothing():
    c, ids = stable_group("w1")
    c.kill()
    with pytest.raises(ProtocolError, match=r"Dead.*Heartbeat"):
        c.handle(Heartbeat(ids["w1"], 1), 0)


@given(st.lists(st.permutations(["a", "b", "c"]), min_size=1, max_size=6))
def test_selected_protocol_is_supported_by_everyone_and_the_vote_winner(prefs):
    chosen = select_protocol(prefs)
    assert all(chosen in p for p in prefs)
    votes = [p[0] for p in prefs]
    assert votes.count(chosen) == max(votes.count(v) for v in votes)


def test_no_common_protocol_selects_nothing():
    assert select_protocol([["a"], ["b"]]) is None


# ----------------------------------------------------------------------------- member


class ListHandler:
    """A toy protocol: work is a frozenset of strings, dealt round-robin by the leader."""

    protocol_type = "connect"

    def __init__(self, items: Sequence[str], eager: bool):
        self.items = list(items)
        self.eager = eager

    def empty(self) -> frozenset[str]:
        return frozenset()

    def is_empty(self, work: frozenset[str]) -> bool:
        return not work

    def is_eager(self, protocol: str) -> bool:
        return self.eager

    def metadata(self, owned: frozenset[str], generation: int) -> tuple[tuple[str, Any], ...]:
        return (("toy", owned),)

    def assign(
        self,
        *,
        leader: str,
        protocol: str,
        generation: int,
        members: Sequence[JoinMember],
        now_ms: int,
        last_completed_generation: int,
    ) -> Mapping[str, Any]:
        ids = sorted(m.member_id for m in members)
        return {m: frozenset(self.items[i :: len(ids)]) for i, m in enumerate(ids)}

    def on_assignment(
        self, *, protocol: str, assignment: Any, owned: frozenset[str], generation: int, now_ms: int
    ) -> AssignmentOutcome[frozenset[str]]:
        target = assignment or frozenset()
        if self.eager:
            return AssignmentOutcome(target, owned - target, target - owned)
        keep = owned & target
        revoked = owned - target
        # Cooperative: give up what moves, take only what nobody else may still run.
        return AssignmentOutcome(
            keep | (target - owned), revoked, target - owned, rejoin=bool(revoked)
        )


def member(
    name: str, *, eager: bool, items: Sequence[str] = ("a", "b", "c", "d")
) -> GroupMember[Any]:
    return GroupMember(client_id=name, handler=ListHandler(items, eager))


def sends(actions: list[Any]) -> list[Any]:
    return [a.request for a in actions if isinstance(a, Send)]


def bring_up(
    m: GroupMember[Any], generation: int = 1, assignment: Any = frozenset({"a", "b"})
) -> None:
    """Walk a lone member to STABLE, playing the coordinator by hand."""
    m.handle(Start(), 0)
    m.handle(JoinGroupResponse(ErrorCode.MEMBER_ID_REQUIRED, m.client_id), 0)
    m.handle(
        JoinGroupResponse(ErrorCode.NONE, m.client_id, generation, "toy", "leader-elsewhere"), 0
    )
    m.handle(SyncGroupResponse(ErrorCode.NONE, assignment, generation), 0)
    assert m.state is MemberState.STABLE


def test_a_member_joins_twice_when_told_its_id_then_syncs_as_leader():
    m = member("w1", eager=False)
    first = sends(m.handle(Start(), 0))
    assert first == [JoinGroup("", "w1", "connect", (("toy", frozenset()),), reason="join")]
    second = sends(m.handle(JoinGroupResponse(ErrorCode.MEMBER_ID_REQUIRED, "w1-x"), 0))
    assert second[0].member_id == "w1-x"
    listing = (JoinMember("w1-x", "w1", frozenset()), JoinMember("w2-y", "w2", frozenset()))
    sync = sends(m.handle(JoinGroupResponse(ErrorCode.NONE, "w1-x", 1, "toy", "w1-x", listing), 0))
    assert m.state is MemberState.AWAITING_SYNC
    assert sync[0].assignments == {"w1-x": frozenset({"a", "c"}), "w2-y": frozenset({"b", "d"})}
    actions = m.handle(SyncGroupResponse(ErrorCode.NONE, frozenset({"a", "c"}), 1), 0)
    assert [a.work for a in actions if isinstance(a, StartWork)] == [frozenset({"a", "c"})]
    assert m.state is MemberState.STABLE and m.owned == frozenset({"a", "c"})


def test_an_eager_member_stops_everything_before_it_rejoins():
    m = member("w1", eager=True)
    bring_up(m)
    actions = m.handle(HeartbeatResponse(ErrorCode.REBALANCE_IN_PROGRESS), 10)
    assert [a.work for a in actions if isinstance(a, StopWork)] == [frozenset({"a", "b"})]
    assert sends(actions)[0].protocols == (("toy", frozenset()),)
    assert m.state is MemberState.JOINING and m.owned == frozenset()


def test_a_cooperative_member_keeps_its_work_and_reports_it_when_rejoining():
    m = member("w1", eager=False)
    bring_up(m)
    actions = m.handle(HeartbeatResponse(ErrorCode.REBALANCE_IN_PROGRESS), 10)
    assert not [a for a in actions if isinstance(a, StopWork)]
    assert sends(actions)[0].protocols == (("toy", frozenset({"a", "b"})),)
    assert m.owned == frozenset({"a", "b"})


def test_a_cooperative_member_revokes_only_what_moves_then_rejoins_at_once():
    m = member("w1", eager=False)
    bring_up(m)
    m.handle(RequestRejoin("config changed"), 10)
    m.handle(JoinGroupResponse(ErrorCode.NONE, "w1", 2, "toy", "other"), 10)
    actions = m.handle(SyncGroupResponse(ErrorCode.NONE, frozenset({"a"}), 2), 10)
    assert [a.work for a in actions if isinstance(a, StopWork)] == [frozenset({"b"})]
    assert sends(actions)[0].reason == "rejoin after revocation"
    assert m.state is MemberState.JOINING and m.owned == frozenset({"a"})


def test_losing_the_generation_drops_the_work_and_rejoins():
    m = member("w1", eager=False)
    bring_up(m)
    actions = m.handle(HeartbeatResponse(ErrorCode.UNKNOWN_MEMBER_ID), 10)
    assert [a.work for a in actions if isinstance(a, StopWork)] == [frozenset({"a", "b"})]
    assert sends(actions)[0].member_id == ""  # forgets its id and joins afresh


def test_a_stable_member_heartbeats_on_its_interval():
    m = member("w1", eager=False)
    bring_up(m)
    assert m.next_deadline() == 3_000
    assert m.poll(2_999) == []
    beat = sends(m.poll(3_000))
    assert beat == [Heartbeat("w1", 1)]
    assert m.next_deadline() == 6_000


def test_a_heartbeat_waits_for_the_answer_to_the_one_before():
    """A coordinator that answers slowly gets one heartbeat at a time, as from Kafka's
    clients: piling them up fills the connection's requests in flight, and a JoinGroup
    then cannot be sent in time."""
    m = member("w1", eager=False)
    bring_up(m)
    assert sends(m.poll(3_000)) == [Heartbeat("w1", 1)]
    for due in (6_000, 9_000):  # unanswered: the timer runs on, nothing more is sent
        assert sends(m.poll(due)) == [] and m.next_deadline() == due + 3_000
    assert m.handle(HeartbeatResponse(ErrorCode.NONE), 9_500) == []
    assert sends(m.poll(12_000)) == [Heartbeat("w1", 1)]
    # one never answered is given up after a session timeout, as a timed-out request
    assert sends(m.poll(15_000)) == []
    assert sends(m.poll(m.session_timeout_ms + 12_000)) == [Heartbeat("w1", 1)]
    m.handle(HeartbeatResponse(ErrorCode.NONE), 12_000 + m.session_timeout_ms)
    # a rebalance starts afresh: a heartbeat of the old generation blocks nothing after it
    t = 12_000 + m.session_timeout_ms
    assert sends(m.poll(t + 3_000)) == [Heartbeat("w1", 1)]
    m.handle(RequestRejoin("config changed"), t + 3_100)
    m.handle(JoinGroupResponse(ErrorCode.NONE, "w1", 2, "toy", "other"), t + 3_200)
    m.handle(SyncGroupResponse(ErrorCode.NONE, frozenset({"a", "b"}), 2), t + 3_200)
    assert sends(m.poll(t + 6_200)) == [Heartbeat("w1", 2)]


def test_leaving_stops_the_work_and_says_goodbye():
    m = member("w1", eager=False)
    bring_up(m)
    actions = m.handle(Leave(), 5)
    assert [a.work for a in actions if isinstance(a, StopWork)] == [frozenset({"a", "b"})]
    assert sends(actions) == [LeaveGroup("w1")]
    assert m.state is MemberState.UNJOINED


def test_a_member_the_group_refused_joins_again_when_asked():
    """INCONSISTENT_GROUP_PROTOCOL leaves the member out of the group; the application
    retries later (with a backoff) by asking it to rejoin, as it would a stable member."""
    m = member("w1", eager=False)
    m.handle(Start(), 0)
    m.handle(JoinGroupResponse(ErrorCode.MEMBER_ID_REQUIRED, "w1-x"), 0)
    failed = m.handle(JoinGroupResponse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "w1-x"), 0)
    assert [type(a) for a in failed] == [MemberFailed] and m.state is MemberState.UNJOINED
    again = sends(m.handle(RequestRejoin("retrying to join"), 500))
    assert [(j.member_id, j.reason) for j in again] == [("w1-x", "retrying to join")]
    assert m.state is MemberState.JOINING


@pytest.mark.parametrize(
    ("state_setup", "event"),
    [
        ("unjoined", SyncGroupResponse(ErrorCode.NONE)),
        ("unjoined", JoinGroupResponse(ErrorCode.NONE, "x")),
        ("unjoined", HeartbeatDue()),
        ("joining", SyncGroupResponse(ErrorCode.NONE)),
        ("joining", Start()),
        ("stable", JoinGroupResponse(ErrorCode.NONE, "x")),
        ("stable", SyncGroupResponse(ErrorCode.NONE)),
        ("stable", Start()),
    ],
)
def test_unexpected_events_are_protocol_errors_naming_state_and_event(state_setup, event):
    m = member("w1", eager=False)
    if state_setup == "joining":
        m.handle(Start(), 0)
    elif state_setup == "stable":
        bring_up(m)
    state = m.state
    with pytest.raises(ProtocolError) as info:
        m.handle(event, 0)
    assert state.value in str(info.value) and type(event).__name__ in str(info.value)
    assert m.state is state  # nothing moved


def test_a_member_can_rejoin_a_while_after_revoking_and_heartbeats_meanwhile():
    """revocation_rejoin_delay_ms: the other members' SyncGroup is answered before the
    revoking member starts the next generation (a broker that answers it by polling
    would otherwise cut them out of the round)."""
    m = GroupMember(client_id="w1", handler=ListHandler(("a", "b", "c", "d"), eager=False),
                    heartbeat_interval_ms=500, revocation_rejoin_delay_ms=1_200)
    bring_up(m)
    m.handle(RequestRejoin("config changed"), 10)
    m.handle(JoinGroupResponse(ErrorCode.NONE, "w1", 2, "toy", "other"), 10)
    actions = m.handle(SyncGroupResponse(ErrorCode.NONE, frozenset({"a"}), 2), 10)
    assert [a.work for a in actions if isinstance(a, StopWork)] == [frozenset({"b"})]
    assert sends(actions) == [] and m.state is MemberState.STABLE
    assert sends(m.poll(510)) == [Heartbeat("w1", 2)]  # still a member of generation 2
    assert sends(m.poll(1_009)) == []
    again = sends(m.poll(1_210))
    assert [(type(r), r.reason) for r in again] == [(JoinGroup, "rejoin after revocation")]
