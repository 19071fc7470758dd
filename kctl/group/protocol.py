"""The group membership protocol without I/O: a coordinator and a member state machine.

Both sides take an event and the current time and return actions (messages to send,
work to start or stop, timers to set); neither owns a socket, a thread or a clock, so
the same code runs under the deterministic simulator and, later, behind a driver that
turns actions into real Kafka requests. Behaviour follows Kafka's GroupCoordinator /
GroupMetadata (broker side) and AbstractCoordinator / WorkerCoordinator /
ConsumerCoordinator (client side), simplified where a detail only matters on a wire.

Every (state, event) pair either has a handler in an explicit table or raises
`ProtocolError`, so a message arriving in a state that cannot take it is loud.

Payloads stay generic: the coordinator moves opaque metadata and assignment values
keyed by protocol name; what they mean (Connect worker state, consumer subscriptions)
lives in a `GroupHandler` that the member is built with. The leader member calls its
handler's pure assignor to compute everyone's assignment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Generic, Protocol, TypeVar

from kctl.errors import ProtocolError

__all__ = [
    "COORDINATOR_MOVED",
    "DEFAULT_HEARTBEAT_INTERVAL_MS",
    "DEFAULT_REBALANCE_TIMEOUT_MS",
    "DEFAULT_SESSION_TIMEOUT_MS",
    "FENCED",
    "MEMBER_ERRORS",
    "NO_GENERATION",
    "AssignmentOutcome",
    "Coordinator",
    "CoordinatorReply",
    "ErrorCode",
    "GroupHandler",
    "GroupMember",
    "GroupState",
    "Heartbeat",
    "HeartbeatDue",
    "HeartbeatResponse",
    "JoinGroup",
    "JoinGroupResponse",
    "JoinMember",
    "Leave",
    "LeaveGroup",
    "LeaveGroupResponse",
    "MemberFailed",
    "MemberState",
    "RequestRejoin",
    "ScheduleTimer",
    "Send",
    "Start",
    "StartWork",
    "StopWork",
    "SyncGroup",
    "SyncGroupResponse",
    "select_protocol",
]

NO_GENERATION = -1
DEFAULT_SESSION_TIMEOUT_MS = 10_000
DEFAULT_HEARTBEAT_INTERVAL_MS = 3_000
DEFAULT_REBALANCE_TIMEOUT_MS = 60_000  # Connect's rebalance.timeout.ms


class ErrorCode(Enum):
    """The Kafka error codes of group membership, named once (values are Kafka's numbers).
    The member's state machine answers those in MEMBER_ERRORS; a driver handles the
    others (a coordinator that moved, offsets refused to a fenced member)."""

    NONE = 0
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    UNKNOWN_MEMBER_ID = 25
    REBALANCE_IN_PROGRESS = 27
    MEMBER_ID_REQUIRED = 79
    FENCED_INSTANCE_ID = 82


MEMBER_ERRORS = frozenset({
    ErrorCode.NONE, ErrorCode.ILLEGAL_GENERATION, ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
    ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.MEMBER_ID_REQUIRED})
# "ask another broker who coordinates this group, then resend"
COORDINATOR_MOVED = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                               ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})
# an offset commit refused because the partitions are not this member's any more
FENCED = frozenset({ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID,
                    ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.FENCED_INSTANCE_ID})


# ----------------------------------------------------------------------------- messages


@dataclass(frozen=True)
class JoinGroup:
    """Member -> coordinator. `protocols` is in the member's order of preference."""

    member_id: str
    client_id: str
    protocol_type: str
    protocols: tuple[tuple[str, Any], ...]
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    rebalance_timeout_ms: int = DEFAULT_REBALANCE_TIMEOUT_MS
    reason: str = ""


@dataclass(frozen=True)
class JoinMember:
    """One entry of the member list the leader receives."""

    member_id: str
    client_id: str
    metadata: Any


@dataclass(frozen=True)
class JoinGroupResponse:
    error: ErrorCode
    member_id: str
    generation: int = NO_GENERATION
    protocol: str | None = None
    leader: str = ""
    members: tuple[JoinMember, ...] = ()  # only the leader gets them, in join order


@dataclass(frozen=True)
class SyncGroup:
    """Member -> coordinator; only the leader sends assignments."""

    member_id: str
    generation: int
    assignments: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class SyncGroupResponse:
    error: ErrorCode
    assignment: Any = None
    generation: int = NO_GENERATION


@dataclass(frozen=True)
class Heartbeat:
    member_id: str
    generation: int


@dataclass(frozen=True)
class HeartbeatResponse:
    error: ErrorCode


@dataclass(frozen=True)
class LeaveGroup:
    member_id: str
    reason: str = ""


@dataclass(frozen=True)
class LeaveGroupResponse:
    error: ErrorCode


Request = JoinGroup | SyncGroup | Heartbeat | LeaveGroup
Response = JoinGroupResponse | SyncGroupResponse | HeartbeatResponse | LeaveGroupResponse


@dataclass(frozen=True)
class CoordinatorReply:
    """Coordinator -> member. `to` is a member id, or "" for the sender of the request
    being handled (a new member has no id yet)."""

    to: str
    response: Response


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


_Handler = Callable[[Any, Any, int], list[Any]]


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
        self._table: dict[tuple[GroupState, type], _Handler] = {
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


# ----------------------------------------------------------------------------- member

W = TypeVar("W")


@dataclass(frozen=True)
class AssignmentOutcome(Generic[W]):
    """What a member does with a SyncGroup assignment (computed by its handler)."""

    owned: W
    stop: W
    start: W
    rejoin: bool = False  # cooperative: something was revoked, so join again at once
    rejoin_after_ms: int | None = None  # Connect's scheduled rebalance delay
    reason: str = ""


class GroupHandler(Protocol[W]):
    """The protocol-specific half of a member (Kafka's WorkerCoordinator or
    ConsumerCoordinator): it builds metadata, runs the assignor when leader and reads
    assignments. Work values are opaque to the core."""

    protocol_type: str

    def empty(self) -> W: ...

    def is_empty(self, work: W) -> bool: ...

    def metadata(self, owned: W, generation: int) -> tuple[tuple[str, Any], ...]: ...

    def is_eager(self, protocol: str) -> bool: ...

    def assign(
        self,
        *,
        leader: str,
        protocol: str,
        generation: int,
        members: Sequence[JoinMember],
        now_ms: int,
        last_completed_generation: int,
    ) -> Mapping[str, Any]: ...

    def on_assignment(
        self, *, protocol: str, assignment: Any, owned: W, generation: int, now_ms: int
    ) -> AssignmentOutcome[W]: ...


class MemberState(Enum):
    UNJOINED = "UNJOINED"
    JOINING = "JOINING"
    AWAITING_SYNC = "AWAITING_SYNC"
    STABLE = "STABLE"


@dataclass(frozen=True)
class Start:
    """Application -> member: join the group."""


@dataclass(frozen=True)
class Leave:
    """Application -> member: stop cleanly (LeaveGroup)."""

    reason: str = ""


@dataclass(frozen=True)
class RequestRejoin:
    """Application -> member: something changed (config, metadata, a scheduled delay)."""

    reason: str


@dataclass(frozen=True)
class HeartbeatDue:
    """Send a heartbeat now (a driver's timer, or a simulator's prompt)."""


@dataclass(frozen=True)
class Send:
    request: Request


@dataclass(frozen=True)
class StopWork(Generic[W]):
    work: W
    reason: str = ""


@dataclass(frozen=True)
class StartWork(Generic[W]):
    work: W


@dataclass(frozen=True)
class ScheduleTimer:
    at_ms: int
    purpose: str  # "heartbeat" | "rejoin"


@dataclass(frozen=True)
class MemberFailed:
    error: ErrorCode
    detail: str = ""


_MemberHandler = Callable[[Any, int], list[Any]]


@dataclass
class GroupMember(Generic[W]):
    """The client side of group membership for one worker or consumer."""

    client_id: str
    handler: GroupHandler[W]
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    rebalance_timeout_ms: int = DEFAULT_REBALANCE_TIMEOUT_MS
    heartbeat_interval_ms: int | None = None
    state: MemberState = MemberState.UNJOINED
    member_id: str = ""
    generation: int = NO_GENERATION
    last_completed_generation: int = NO_GENERATION
    protocol: str | None = None
    leader: str = ""
    owned: Any = None
    next_heartbeat_ms: int | None = None
    rejoin_at_ms: int | None = None
    rejoin_reason: str = ""
    # After revoking, rejoin this much later instead of at once (Kafka: at once). A broker
    # that answers a follower's SyncGroup by polling (the test broker: once a second)
    # would otherwise see the revoking members rejoin before the other members have their
    # assignment of this generation, and they miss the round: a join then takes three or
    # four generations instead of two.
    revocation_rejoin_delay_ms: int = 0
    _table: dict[tuple[MemberState, type], _MemberHandler] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.owned is None:
            self.owned = self.handler.empty()
        if self.heartbeat_interval_ms is None:
            self.heartbeat_interval_ms = min(
                DEFAULT_HEARTBEAT_INTERVAL_MS, max(1, self.session_timeout_ms // 3)
            )
        S = MemberState
        t = self._table
        t[(S.UNJOINED, Start)] = self._on_start
        # a member the group refused (no protocol in common) tries again when asked
        t[(S.UNJOINED, RequestRejoin)] = self._on_rejoin_unjoined
        for state in (S.JOINING, S.AWAITING_SYNC, S.STABLE):
            t[(state, Leave)] = self._on_leave
            t[(state, HeartbeatResponse)] = self._on_heartbeat_response
            t[(state, LeaveGroupResponse)] = self._ignore
        t[(S.UNJOINED, LeaveGroupResponse)] = self._ignore
        t[(S.UNJOINED, Leave)] = self._ignore
        # The answer to a heartbeat sent just before leaving.
        t[(S.UNJOINED, HeartbeatResponse)] = self._ignore
        t[(S.JOINING, JoinGroupResponse)] = self._on_join_response
        t[(S.AWAITING_SYNC, SyncGroupResponse)] = self._on_sync_response
        t[(S.STABLE, RequestRejoin)] = self._on_request_rejoin
        t[(S.JOINING, RequestRejoin)] = self._ignore  # already joining
        t[(S.AWAITING_SYNC, RequestRejoin)] = self._on_request_rejoin_later
        t[(S.STABLE, HeartbeatDue)] = self._on_heartbeat_due
        t[(S.JOINING, HeartbeatDue)] = self._ignore
        t[(S.AWAITING_SYNC, HeartbeatDue)] = self._ignore

    # -- public surface

    def handle(self, event: Any, now_ms: int) -> list[Any]:
        handler = self._table.get((self.state, type(event)))
        if handler is None:
            raise ProtocolError(
                f"member {self.client_id!r} in state {self.state.value} cannot take "
                f"{type(event).__name__}"
            )
        return handler(event, now_ms)

    def poll(self, now_ms: int) -> list[Any]:
        """Fire due timers: heartbeats and a scheduled rejoin."""
        if self.state is not MemberState.STABLE:
            return []
        if self.rejoin_at_ms is not None and now_ms >= self.rejoin_at_ms:
            self.rejoin_at_ms = None
            return self._rejoin(self.rejoin_reason or "scheduled rebalance", now_ms)
        if self.next_heartbeat_ms is not None and now_ms >= self.next_heartbeat_ms:
            return self._on_heartbeat_due(HeartbeatDue(), now_ms)
        return []

    def next_deadline(self) -> int | None:
        if self.state is not MemberState.STABLE:
            return None
        deadlines = [d for d in (self.rejoin_at_ms, self.next_heartbeat_ms) if d is not None]
        return min(deadlines) if deadlines else None

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.member_id == self.leader

    # -- handlers

    def _ignore(self, event: Any, now: int) -> list[Any]:
        return []

    def _join_request(self, reason: str) -> Send:
        return Send(
            JoinGroup(
                self.member_id,
                self.client_id,
                self.handler.protocol_type,
                self.handler.metadata(self.owned, self.last_completed_generation),
                self.session_timeout_ms,
                self.rebalance_timeout_ms,
                reason,
            )
        )

    def _on_start(self, event: Start, now: int) -> list[Any]:
        self.state = MemberState.JOINING
        return [self._join_request("join")]

    def _on_rejoin_unjoined(self, event: RequestRejoin, now: int) -> list[Any]:
        self.state = MemberState.JOINING
        return [self._join_request(event.reason or "join")]

    def _on_leave(self, event: Leave, now: int) -> list[Any]:
        actions: list[Any] = []
        if not self.handler.is_empty(self.owned):
            actions.append(StopWork(self.owned, "leaving"))
        if self.member_id:
            actions.append(Send(LeaveGroup(self.member_id, event.reason)))
        self._reset(forget_member=True)
        self.state = MemberState.UNJOINED
        return actions

    def _reset(self, *, forget_member: bool) -> None:
        self.owned = self.handler.empty()
        self.generation = NO_GENERATION
        self.next_heartbeat_ms = None
        self.rejoin_at_ms = None
        if forget_member:
            self.member_id = ""

    def _rejoin(self, reason: str, now: int) -> list[Any]:
        """onJoinPrepare: eager members give up everything before joining again."""
        actions: list[Any] = []
        if self.protocol is not None and self.handler.is_eager(self.protocol):
            if not self.handler.is_empty(self.owned):
                actions.append(StopWork(self.owned, "eager rebalance"))
            self.owned = self.handler.empty()
        self.state = MemberState.JOINING
        self.next_heartbeat_ms = None
        self.rejoin_at_ms = None
        actions.append(self._join_request(reason))
        return actions

    def _lose_membership(self, error: ErrorCode, now: int) -> list[Any]:
        """The coordinator no longer knows this generation/member: the work is lost
        (Kafka's onPartitionsLost), and the member joins afresh."""
        actions: list[Any] = []
        if not self.handler.is_empty(self.owned):
            actions.append(StopWork(self.owned, error.name))
        self._reset(forget_member=error is ErrorCode.UNKNOWN_MEMBER_ID)
        self.state = MemberState.JOINING
        actions.append(self._join_request(error.name))
        return actions

    def _on_join_response(self, resp: JoinGroupResponse, now: int) -> list[Any]:
        if resp.error is ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = resp.member_id
            return [self._join_request("join")]
        if resp.error is ErrorCode.UNKNOWN_MEMBER_ID:
            self.member_id = ""
            return [self._join_request("join")]
        if resp.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL:
            self.state = MemberState.UNJOINED
            return [MemberFailed(resp.error, "no protocol in common with the group")]
        if resp.error is not ErrorCode.NONE:
            return [self._join_request(resp.error.name)]
        self.member_id = resp.member_id
        self.generation = resp.generation
        self.protocol = resp.protocol
        self.leader = resp.leader
        self.state = MemberState.AWAITING_SYNC
        assignments = None
        if self.is_leader:
            assert resp.protocol is not None
            assignments = dict(
                self.handler.assign(
                    leader=self.member_id,
                    protocol=resp.protocol,
                    generation=resp.generation,
                    members=resp.members,
                    now_ms=now,
                    last_completed_generation=self.last_completed_generation,
                )
            )
        return [Send(SyncGroup(self.member_id, self.generation, assignments))]

    def _on_sync_response(self, resp: SyncGroupResponse, now: int) -> list[Any]:
        if resp.error is ErrorCode.REBALANCE_IN_PROGRESS:
            return self._rejoin("", now)
        if resp.error in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID):
            return self._lose_membership(resp.error, now)
        if resp.error is not ErrorCode.NONE:
            return [MemberFailed(resp.error)]
        assert self.protocol is not None
        outcome = self.handler.on_assignment(
            protocol=self.protocol,
            assignment=resp.assignment,
            owned=self.owned,
            generation=self.generation,
            now_ms=now,
        )
        actions: list[Any] = []
        if not self.handler.is_empty(outcome.stop):
            actions.append(StopWork(outcome.stop, "revoked"))
        if not self.handler.is_empty(outcome.start):
            actions.append(StartWork(outcome.start))
        self.owned = outcome.owned
        self.last_completed_generation = self.generation
        self.state = MemberState.STABLE
        if outcome.rejoin and self.revocation_rejoin_delay_ms <= 0:
            return actions + self._rejoin(outcome.reason or "rejoin after revocation", now)
        if outcome.rejoin:
            due = now + self.revocation_rejoin_delay_ms
            if self.rejoin_at_ms is None or due < self.rejoin_at_ms:
                self.rejoin_at_ms = due
                self.rejoin_reason = outcome.reason or "rejoin after revocation"
            actions.append(ScheduleTimer(self.rejoin_at_ms, "rejoin"))
        self.next_heartbeat_ms = now + (self.heartbeat_interval_ms or DEFAULT_HEARTBEAT_INTERVAL_MS)
        actions.append(ScheduleTimer(self.next_heartbeat_ms, "heartbeat"))
        if outcome.rejoin_after_ms is not None:
            due = now + outcome.rejoin_after_ms
            # A rejoin asked for during the sync (or after a revocation) stays due first.
            if self.rejoin_at_ms is None or due < self.rejoin_at_ms:
                self.rejoin_at_ms = due
                self.rejoin_reason = outcome.reason or "scheduled rebalance delay expired"
            actions.append(ScheduleTimer(self.rejoin_at_ms, "rejoin"))
        return actions

    def _on_heartbeat_due(self, event: HeartbeatDue, now: int) -> list[Any]:
        self.next_heartbeat_ms = now + (self.heartbeat_interval_ms or DEFAULT_HEARTBEAT_INTERVAL_MS)
        return [
            Send(Heartbeat(self.member_id, self.generation)),
            ScheduleTimer(self.next_heartbeat_ms, "heartbeat"),
        ]

    def _on_heartbeat_response(self, resp: HeartbeatResponse, now: int) -> list[Any]:
        if resp.error is ErrorCode.NONE or self.state is not MemberState.STABLE:
            return []
        if resp.error is ErrorCode.REBALANCE_IN_PROGRESS:
            return self._rejoin("", now)
        if resp.error in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID):
            return self._lose_membership(resp.error, now)
        return [MemberFailed(resp.error)]

    def _on_request_rejoin(self, event: RequestRejoin, now: int) -> list[Any]:
        return self._rejoin(event.reason, now)

    def _on_request_rejoin_later(self, event: RequestRejoin, now: int) -> list[Any]:
        # Mid-sync: finish this generation, then rejoin right after it.
        self.rejoin_at_ms = now
        self.rejoin_reason = event.reason
        return []
