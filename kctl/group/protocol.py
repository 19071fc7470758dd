"""The group membership protocol without I/O: the member state machine.

It and the coordinator (`group/coordinator.py`) each take an event and the current time and return actions (messages to send,
work to start or stop, timers to set); neither owns a socket, a thread or a clock, so
the same code runs under the deterministic simulator and behind a driver that turns
actions into real Kafka requests (`transport/kafka_group.py`). Behaviour follows Kafka's GroupCoordinator /
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
from kctl.group.messages import (
    DEFAULT_HEARTBEAT_INTERVAL_MS,
    DEFAULT_REBALANCE_TIMEOUT_MS,
    DEFAULT_SESSION_TIMEOUT_MS,
    NO_GENERATION,
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
    "AssignmentOutcome",
    "GroupHandler",
    "GroupMember",
    "HeartbeatDue",
    "Leave",
    "MemberEvent",
    "MemberFailed",
    "MemberOutput",
    "MemberState",
    "RequestRejoin",
    "ScheduleTimer",
    "Send",
    "Start",
    "StartWork",
    "StopWork",
]

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
    """Application -> member: join the group, as `member_id` when given (one an earlier
    process of this worker held: a coordinator that still knows it resumes that member,
    one that does not answers UNKNOWN_MEMBER_ID and the member joins anew)."""

    member_id: str = ""


@dataclass(frozen=True)
class Leave:
    """Application -> member: stop cleanly (LeaveGroup)."""

    reason: str = ""


@dataclass(frozen=True)
class JoinAfresh:
    """Application -> member: its membership completes no generation; give it up without
    a LeaveGroup (the coordinator expires it, as a member that vanished, which a leader it
    still names for a round it never ends also needs) and join as a new member."""

    reason: str


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


# What the application and the coordinator's answers hand a member, and what it hands back.
MemberEvent = (Start | Leave | JoinAfresh | RequestRejoin | HeartbeatDue | JoinGroupResponse
               | SyncGroupResponse | HeartbeatResponse | LeaveGroupResponse)
MemberOutput = Send | StopWork[W] | StartWork[W] | ScheduleTimer | MemberFailed
# A handler takes the one event type its table entry names (the table dispatches on it).
_MemberHandler = Callable[[Any, int], "list[MemberOutput[W]]"]


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
    owned: W = field(init=False)
    next_heartbeat_ms: int | None = None
    # A heartbeat sent and not answered yet: the next waits for its answer, as in Kafka's
    # clients (a coordinator that answers slowly would otherwise get one more each
    # interval, and the client's limit of requests in flight then holds back a JoinGroup).
    # One unanswered for a session timeout is given up, as a timed-out request is.
    heartbeat_in_flight: bool = False
    heartbeat_sent_ms: int = 0
    rejoin_at_ms: int | None = None
    rejoin_reason: str = ""
    # After revoking, rejoin this much later instead of at once (Kafka: at once). A broker
    # that answers a follower's SyncGroup by polling (the test broker: once a second)
    # would otherwise see the revoking members rejoin before the other members have their
    # assignment of this generation, and they miss the round: a join then takes three or
    # four generations instead of two.
    revocation_rejoin_delay_ms: int = 0
    _table: dict[tuple[MemberState, type[MemberEvent]], _MemberHandler[W]] = field(
        default_factory=dict, repr=False)

    def __post_init__(self) -> None:
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
            t[(state, JoinAfresh)] = self._on_join_afresh
        t[(S.UNJOINED, LeaveGroupResponse)] = self._ignore
        t[(S.UNJOINED, Leave)] = self._ignore
        # The answer to a heartbeat sent just before leaving.
        t[(S.UNJOINED, HeartbeatResponse)] = self._on_heartbeat_response
        t[(S.JOINING, JoinGroupResponse)] = self._on_join_response
        t[(S.AWAITING_SYNC, SyncGroupResponse)] = self._on_sync_response
        t[(S.STABLE, RequestRejoin)] = self._on_request_rejoin
        t[(S.JOINING, RequestRejoin)] = self._ignore  # already joining
        t[(S.AWAITING_SYNC, RequestRejoin)] = self._on_request_rejoin_later
        t[(S.STABLE, HeartbeatDue)] = self._on_heartbeat_due
        t[(S.JOINING, HeartbeatDue)] = self._ignore
        t[(S.AWAITING_SYNC, HeartbeatDue)] = self._ignore

    # -- public surface

    def handle(self, event: MemberEvent, now_ms: int) -> list[MemberOutput[W]]:
        handler = self._table.get((self.state, type(event)))
        if handler is None:
            raise ProtocolError(
                f"member {self.client_id!r} in state {self.state.value} cannot take "
                f"{type(event).__name__}"
            )
        return handler(event, now_ms)

    def poll(self, now_ms: int) -> list[MemberOutput[W]]:
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

    def _ignore(self, event: MemberEvent, now: int) -> list[MemberOutput[W]]:
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

    def _on_start(self, event: Start, now: int) -> list[MemberOutput[W]]:
        if event.member_id:
            self.member_id = event.member_id
        self.state = MemberState.JOINING
        return [self._join_request("join")]

    def _on_rejoin_unjoined(self, event: RequestRejoin, now: int) -> list[MemberOutput[W]]:
        self.state = MemberState.JOINING
        return [self._join_request(event.reason or "join")]

    def _on_leave(self, event: Leave, now: int) -> list[MemberOutput[W]]:
        actions: list[MemberOutput[W]] = []
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
        self.heartbeat_in_flight = False  # an answer to it, if any, changes nothing now
        self.rejoin_at_ms = None
        if forget_member:
            self.member_id = ""

    def _rejoin(self, reason: str, now: int) -> list[MemberOutput[W]]:
        """onJoinPrepare: eager members give up everything before joining again."""
        actions: list[MemberOutput[W]] = []
        if self.protocol is not None and self.handler.is_eager(self.protocol):
            if not self.handler.is_empty(self.owned):
                actions.append(StopWork(self.owned, "eager rebalance"))
            self.owned = self.handler.empty()
        self.state = MemberState.JOINING
        self.next_heartbeat_ms = None
        self.heartbeat_in_flight = False
        self.rejoin_at_ms = None
        actions.append(self._join_request(reason))
        return actions

    def _lose_membership(self, error: ErrorCode, now: int) -> list[MemberOutput[W]]:
        """The coordinator no longer knows this generation/member: the work is lost
        (Kafka's onPartitionsLost), and the member joins afresh."""
        actions: list[MemberOutput[W]] = []
        if not self.handler.is_empty(self.owned):
            actions.append(StopWork(self.owned, error.name))
        self._reset(forget_member=error is ErrorCode.UNKNOWN_MEMBER_ID)
        self.state = MemberState.JOINING
        actions.append(self._join_request(error.name))
        return actions

    def _on_join_afresh(self, event: JoinAfresh, now: int) -> list[MemberOutput[W]]:
        actions: list[MemberOutput[W]] = []
        if not self.handler.is_empty(self.owned):  # lost, as to an unknown member id
            actions.append(StopWork(self.owned, ErrorCode.UNKNOWN_MEMBER_ID.name))
        self._reset(forget_member=True)
        self.state = MemberState.JOINING
        actions.append(self._join_request(event.reason))
        return actions

    def _on_join_response(self, resp: JoinGroupResponse, now: int) -> list[MemberOutput[W]]:
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

    def _on_sync_response(self, resp: SyncGroupResponse, now: int) -> list[MemberOutput[W]]:
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
        actions: list[MemberOutput[W]] = []
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

    def _on_heartbeat_due(self, event: HeartbeatDue, now: int) -> list[MemberOutput[W]]:
        self.next_heartbeat_ms = now + (self.heartbeat_interval_ms or DEFAULT_HEARTBEAT_INTERVAL_MS)
        timer = ScheduleTimer(self.next_heartbeat_ms, "heartbeat")
        if self.heartbeat_in_flight and now - self.heartbeat_sent_ms < self.session_timeout_ms:
            return [timer]
        self.heartbeat_in_flight, self.heartbeat_sent_ms = True, now
        return [Send(Heartbeat(self.member_id, self.generation)), timer]

    def _on_heartbeat_response(self, resp: HeartbeatResponse, now: int) -> list[MemberOutput[W]]:
        self.heartbeat_in_flight = False
        if resp.error is ErrorCode.NONE or self.state is not MemberState.STABLE:
            return []
        if resp.error is ErrorCode.REBALANCE_IN_PROGRESS:
            return self._rejoin("", now)
        if resp.error in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID):
            return self._lose_membership(resp.error, now)
        return [MemberFailed(resp.error)]

    def _on_request_rejoin(self, event: RequestRejoin, now: int) -> list[MemberOutput[W]]:
        return self._rejoin(event.reason, now)

    def _on_request_rejoin_later(self, event: RequestRejoin, now: int) -> list[MemberOutput[W]]:
        # Mid-sync: finish this generation, then rejoin right after it.
        self.rejoin_at_ms = now
        self.rejoin_reason = event.reason
        return []
