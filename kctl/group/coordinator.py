"""The broker side of the group protocol, without I/O (Kafka's GroupCoordinator and
GroupMetadata): members join, the coordinator picks a protocol and a leader, collects the
leader's assignment and hands each member its part, and expires sessions.

It takes a request and the current time and returns replies, so the simulator, the
in-process driver and the tests run it; on a real cluster the broker plays this part.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from kctl.errors import ProtocolError
from kctl.group.messages import (
    CoordinatorReply,
    ErrorCode,
    Heartbeat,
    HeartbeatResponse,
    JoinGroup,
    JoinGroupResponse,
    JoinMember,
    LeaveGroup,
    LeaveGroupResponse,
    Request,
    SyncGroup,
    SyncGroupResponse,
)

__all__ = [
    "Coordinator",
    "GroupState",
    "select_protocol",
]

# ----------------------------------------------------------------------------- coordinator


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class _MemberInfo:
    member_id: str
    client_id: str
    protocols: tuple[tuple[str, Any], ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    last_seen_ms: int
    awaiting_join: bool = True
    awaiting_sync: bool = False
    assignment: Any = None

    def metadata(self, protocol: str) -> Any:
        return dict(self.protocols)[protocol]


def select_protocol(preferences: Sequence[Sequence[str]]) -> str | None:
    """Kafka's GroupMetadata.selectProtocol: among the protocols every member supports,
    each member votes for its most preferred one; the most votes wins (ties go to the
    first member's preference order)."""
    if not preferences:
        return None
    common = set(preferences[0]).intersection(*map(set, preferences[1:]))
    if not common:
        return None
    votes: dict[str, int] = {}
    for prefs in preferences:
        choice = next(p for p in prefs if p in common)
        votes[choice] = votes.get(choice, 0) + 1
    order = [p for p in preferences[0] if p in common]
    return max(order, key=lambda p: (votes.get(p, 0), -order.index(p)))


# A handler takes the one request type its table entry names (the table dispatches on it).
_Handler = Callable[[Any, int], list[CoordinatorReply]]


class Coordinator:
    """The broker side of one group.

    Join completion is checked in `poll(now)`, not in the request handler: like Kafka's
    delayed-join purgatory it waits for the current burst of requests, so members that
    join "together" (all at one instant) land in one generation.
    """

    def __init__(self, group_id: str = "group", *, initial_rebalance_delay_ms: int = 0,
                 unchanged_rejoin_rebalances: bool = True):
        self.group_id = group_id
        # False models a coordinator (the test broker, Tansu) that answers a Stable
        # group's member rejoining with unchanged metadata with the current generation
        # instead of starting one (Kafka starts one at least when the leader rejoins).
        self.unchanged_rejoin_rebalances = unchanged_rejoin_rebalances
        self.state = GroupState.EMPTY
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol: str | None = None
        self.leader: str | None = None
        self.members: dict[str, _MemberInfo] = {}
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.rebalance_deadline_ms: int | None = None
        self.join_not_before_ms = 0
        self.triggers: list[str] = []
        self._pending_ids: set[str] = set()
        self._id_counter: dict[str, int] = {}
        E, P, C, S = (
            GroupState.EMPTY,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.STABLE,
        )
        self._table: dict[tuple[GroupState, type[Request]], _Handler] = {
            (E, JoinGroup): self._on_join,
            (E, SyncGroup): self._sync_unknown,
            (E, Heartbeat): self._heartbeat_unknown,
            (E, LeaveGroup): self._on_leave,
            (P, JoinGroup): self._on_join,
            (P, SyncGroup): self._sync_preparing,
            (P, Heartbeat): self._heartbeat_rebalancing,
            (P, LeaveGroup): self._on_leave,
            (C, JoinGroup): self._on_join,
            (C, SyncGroup): self._sync_completing,
            (C, Heartbeat): self._heartbeat_rebalancing,
            (C, LeaveGroup): self._on_leave,
            (S, JoinGroup): self._on_join,
            (S, SyncGroup): self._sync_stable,
            (S, Heartbeat): self._heartbeat_stable,
            (S, LeaveGroup): self._on_leave,
        }
        # Dead takes nothing: a driver must route to the group's new coordinator.

    # -- public surface

    def handle(self, request: Request, now_ms: int) -> list[CoordinatorReply]:
        handler = self._table.get((self.state, type(request)))
        if handler is None:
            raise ProtocolError(
                f"group {self.group_id!r} in state {self.state.value} cannot take "
                f"{type(request).__name__}"
            )
        return handler(request, now_ms)

    def poll(self, now_ms: int) -> list[CoordinatorReply]:
        """Fire due timers (session expiry, rebalance timeout) and complete a join that
        everyone has answered."""
        replies: list[CoordinatorReply] = []
        for member in list(self.members.values()):
            deadline = self._session_deadline(member)
            if deadline is not None and now_ms >= deadline:
                replies += self._remove(
                    member.member_id, f"{member.client_id} session expired", now_ms
                )
        if self.state is GroupState.PREPARING_REBALANCE:
            timed_out = (
                self.rebalance_deadline_ms is not None and now_ms >= self.rebalance_deadline_ms
            )
            if timed_out:
                for member in list(self.members.values()):
                    if not member.awaiting_join:
                        replies += self._remove(
                            member.member_id, f"{member.client_id} missed the rebalance", now_ms
                        )
            if self.state is GroupState.PREPARING_REBALANCE and self._join_complete(now_ms):
                replies += self._complete_join(now_ms)
        return replies

    def next_deadline(self) -> int | None:
        """When `poll` next has something to do (None: only a request can change things)."""
        deadlines = [
            d for m in self.members.values() if (d := self._session_deadline(m)) is not None
        ]
        if self.state is GroupState.PREPARING_REBALANCE:
            if self.rebalance_deadline_ms is not None:
                deadlines.append(self.rebalance_deadline_ms)
            if all(m.awaiting_join for m in self.members.values()):
                deadlines.append(self.join_not_before_ms)
        return min(deadlines) if deadlines else None

    def kill(self) -> None:
        """The group moved away (coordinator failover); every later request is an error."""
        self.state = GroupState.DEAD

    # -- requests

    def _on_join(self, req: JoinGroup, now: int) -> list[CoordinatorReply]:
        if self.members and (
            req.protocol_type != self.protocol_type
            or not self._supported().intersection(name for name, _ in req.protocols)
        ):
            return [
                CoordinatorReply(
                    "", JoinGroupResponse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
                )
            ]
        if not req.protocols:
            return [
                CoordinatorReply(
                    "", JoinGroupResponse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
                )
            ]
        if req.member_id == "":
            # KIP-394: hand out an id first; the member rejoins with it.
            member_id = self._new_member_id(req.client_id)
            self._pending_ids.add(member_id)
            return [
                CoordinatorReply("", JoinGroupResponse(ErrorCode.MEMBER_ID_REQUIRED, member_id))
            ]
        replies: list[CoordinatorReply] = []
        member = self.members.get(req.member_id)
        if member is None:
            if req.member_id not in self._pending_ids:
                return [
                    CoordinatorReply(
                        "", JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id)
                    )
                ]
            self._pending_ids.discard(req.member_id)
            member = _MemberInfo(
                req.member_id,
                req.client_id,
                req.protocols,
                req.session_timeout_ms,
                req.rebalance_timeout_ms,
                now,
            )
            self.members[req.member_id] = member
            if self.protocol_type is None:
                self.protocol_type = req.protocol_type
            if self.leader is None:
                self.leader = req.member_id
            reason = f"join {req.client_id}"
        else:
            if (not self.unchanged_rejoin_rebalances and self.state is GroupState.STABLE
                    and member.protocols == req.protocols):
                member.last_seen_ms = now
                return [CoordinatorReply("", self._current_generation(member))]
            member.protocols = req.protocols
            member.session_timeout_ms = req.session_timeout_ms
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
            member.last_seen_ms = now
            reason = req.reason
        member.awaiting_join = True
        member.awaiting_sync = False
        if self.state is not GroupState.PREPARING_REBALANCE:
            replies += self._prepare_rebalance(reason, now)
        elif reason:
            self._add_trigger(reason)
        return replies

    def _current_generation(self, member: _MemberInfo) -> JoinGroupResponse:
        assert self.protocol is not None
        listing = tuple(
            JoinMember(m.member_id, m.client_id, m.metadata(self.protocol))
            for m in self.members.values()
        ) if member.member_id == self.leader else ()
        return JoinGroupResponse(ErrorCode.NONE, member.member_id, self.generation,
                                 self.protocol, self.leader or "", listing)

    def _known(self, member_id: str, now: int) -> _MemberInfo | None:
        member = self.members.get(member_id)
        if member is not None:
            member.last_seen_ms = now
        return member

    def _sync_unknown(self, req: SyncGroup, now: int) -> list[CoordinatorReply]:
        return [CoordinatorReply("", SyncGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID))]

    def _sync_check(self, req: SyncGroup, now: int) -> list[CoordinatorReply] | None:
        if self._known(req.member_id, now) is None:
            return self._sync_unknown(req, now)
        if req.generation != self.generation:
            return [CoordinatorReply("", SyncGroupResponse(ErrorCode.ILLEGAL_GENERATION))]
        return None

    def _sync_preparing(self, req: SyncGroup, now: int) -> list[CoordinatorReply]:
        refused = self._sync_check(req, now)
        return refused or [CoordinatorReply("", SyncGroupResponse(ErrorCode.REBALANCE_IN_PROGRESS))]

    def _sync_stable(self, req: SyncGroup, now: int) -> list[CoordinatorReply]:
        refused = self._sync_check(req, now)
        if refused:
            return refused
        assignment = self.members[req.member_id].assignment
        return [
            CoordinatorReply("", SyncGroupResponse(ErrorCode.NONE, assignment, self.generation))
        ]

    def _sync_completing(self, req: SyncGroup, now: int) -> list[CoordinatorReply]:
        """Park members until the leader brings everyone's assignment, then answer all."""
        refused = self._sync_check(req, now)
        if refused:
            return refused
        self.members[req.member_id].awaiting_sync = True
        if req.member_id != self.leader:
            return []
        assignments = req.assignments or {}
        for m in self.members.values():
            m.assignment = assignments.get(m.member_id)
        self.state = GroupState.STABLE
        replies: list[CoordinatorReply] = []
        for m in self.members.values():
            if m.awaiting_sync:
                m.awaiting_sync = False
                replies.append(
                    CoordinatorReply(
                        m.member_id,
                        SyncGroupResponse(ErrorCode.NONE, m.assignment, self.generation),
                    )
                )
        return replies

    def _heartbeat_unknown(self, req: Heartbeat, now: int) -> list[CoordinatorReply]:
        return [CoordinatorReply("", HeartbeatResponse(ErrorCode.UNKNOWN_MEMBER_ID))]

    def _heartbeat_rebalancing(self, req: Heartbeat, now: int) -> list[CoordinatorReply]:
        if self._known(req.member_id, now) is None:
            return self._heartbeat_unknown(req, now)
        return [CoordinatorReply("", HeartbeatResponse(ErrorCode.REBALANCE_IN_PROGRESS))]

    def _heartbeat_stable(self, req: Heartbeat, now: int) -> list[CoordinatorReply]:
        if self._known(req.member_id, now) is None:
            return self._heartbeat_unknown(req, now)
        if req.generation != self.generation:
            return [CoordinatorReply("", HeartbeatResponse(ErrorCode.ILLEGAL_GENERATION))]
        return [CoordinatorReply("", HeartbeatResponse(ErrorCode.NONE))]

    def _on_leave(self, req: LeaveGroup, now: int) -> list[CoordinatorReply]:
        if req.member_id not in self.members:
            return [CoordinatorReply("", LeaveGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID))]
        client = self.members[req.member_id].client_id
        replies = [CoordinatorReply("", LeaveGroupResponse(ErrorCode.NONE))]
        return replies + self._remove(req.member_id, req.reason or f"leave {client}", now)

    # -- transitions

    def _supported(self) -> set[str]:
        names = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*names) if names else set()

    def _new_member_id(self, client_id: str) -> str:
        taken = self.members.keys() | self._pending_ids
        base = client_id or "member"
        if base not in taken:
            return base
        n = self._id_counter.get(base, 1)
        while f"{base}-{n}" in taken:
            n += 1
        self._id_counter[base] = n + 1
        return f"{base}-{n}"

    def _session_deadline(self, member: _MemberInfo) -> int | None:
        if self.state is GroupState.PREPARING_REBALANCE and member.awaiting_join:
            return None  # kept alive while its join is parked
        if member.awaiting_sync:
            return None
        return member.last_seen_ms + member.session_timeout_ms

    def _add_trigger(self, reason: str) -> None:
        if reason not in self.triggers:
            self.triggers.append(reason)

    def _prepare_rebalance(self, reason: str, now: int) -> list[CoordinatorReply]:
        replies: list[CoordinatorReply] = []
        if self.state is GroupState.COMPLETING_REBALANCE:
            # Members parked in SyncGroup learn that this generation will not finish.
            for m in self.members.values():
                if m.awaiting_sync:
                    m.awaiting_sync = False
                    replies.append(
                        CoordinatorReply(
                            m.member_id, SyncGroupResponse(ErrorCode.REBALANCE_IN_PROGRESS)
                        )
                    )
        initial = self.state is GroupState.EMPTY
        self.state = GroupState.PREPARING_REBALANCE
        self.triggers = []
        self._add_trigger(reason)
        timeout = max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        self.rebalance_deadline_ms = now + timeout
        self.join_not_before_ms = now + (self.initial_rebalance_delay_ms if initial else 0)
        return replies

    def _join_complete(self, now: int) -> bool:
        if not self.members:
            return False
        if now < self.join_not_before_ms:
            return False
        return all(m.awaiting_join for m in self.members.values())

    def _remove(self, member_id: str, reason: str, now: int) -> list[CoordinatorReply]:
        self.members.pop(member_id, None)
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)
        if not self.members:
            self.state = GroupState.EMPTY
            self.protocol = None
            self.protocol_type = None
            self.rebalance_deadline_ms = None
            return []
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            return self._prepare_rebalance(reason, now)
        if self.state is GroupState.PREPARING_REBALANCE:
            self._add_trigger(reason)
        return []

    def _complete_join(self, now: int) -> list[CoordinatorReply]:
        self.generation += 1
        members = list(self.members.values())
        self.protocol = select_protocol([[name for name, _ in m.protocols] for m in members])
        if self.leader not in self.members:
            self.leader = members[0].member_id
        self.state = GroupState.COMPLETING_REBALANCE
        self.rebalance_deadline_ms = None
        assert self.protocol is not None  # joins with no common protocol were refused
        listing = tuple(
            JoinMember(m.member_id, m.client_id, m.metadata(self.protocol)) for m in members
        )
        replies = []
        for m in members:
            m.awaiting_join = False
            m.last_seen_ms = now
            replies.append(
                CoordinatorReply(
                    m.member_id,
                    JoinGroupResponse(
                        ErrorCode.NONE,
                        m.member_id,
                        self.generation,
                        self.protocol,
                        self.leader or "",
                        listing if m.member_id == self.leader else (),
                    ),
                )
            )
        return replies

    @property
    def trigger(self) -> str:
        """Why the current (or last) rebalance started; joins are folded into one phrase."""
        joins = [t.removeprefix("join ") for t in self.triggers if t.startswith("join ")]
        others = [t for t in self.triggers if not t.startswith("join ")]
        parts = ([f"join {', '.join(joins)}"] if joins else []) + others
        return "; ".join(parts)
