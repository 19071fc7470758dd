"""The group protocol's messages: JoinGroup, SyncGroup, Heartbeat and LeaveGroup with their
responses, Kafka's error codes as the protocol uses them, and the defaults both sides share.

Frozen values, no behaviour: the coordinator (`group/coordinator.py`) and the member state
machine (`group/protocol.py`) exchange them, and a driver maps them onto a wire.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

__all__ = [
    "COORDINATOR_MOVED",
    "DEFAULT_HEARTBEAT_INTERVAL_MS",
    "DEFAULT_REBALANCE_TIMEOUT_MS",
    "DEFAULT_SESSION_TIMEOUT_MS",
    "FENCED",
    "MEMBER_ERRORS",
    "NO_GENERATION",
    "CoordinatorReply",
    "ErrorCode",
    "Heartbeat",
    "HeartbeatResponse",
    "JoinGroup",
    "JoinGroupResponse",
    "JoinMember",
    "LeaveGroup",
    "LeaveGroupResponse",
    "Request",
    "SyncGroup",
    "SyncGroupResponse",
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
