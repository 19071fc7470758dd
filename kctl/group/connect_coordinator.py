"""The Connect worker's half of the group protocol (Kafka's WorkerCoordinator), written once.

What a worker puts in JoinGroup (its URL, how far it has read the config topic and, under
the cooperative subprotocols, what it runs now), what the leader runs (the connect
assignor of the selected subprotocol, with the assignor memory only the leader keeps) and
what every worker does with its assignment (which connectors and tasks to stop and start,
whether to rejoin after a revocation or a scheduled delay) live here. The simulator behind
`kctl rebalance explain` and a distributed worker's group driver both use this class.

The wire encoding is Kafka Connect's: `ConnectProtocol` (subprotocol `default`, version 0)
and `IncrementalCooperativeConnectProtocol` (`compatible` version 1, `sessioned` version
2), so member metadata and assignments read the same in any Kafka tool.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kctl.errors import ProtocolError
from kctl.group.assignors.connect import (
    EMPTY,
    PROTOCOL_VERSIONS,
    ConnectAssignment,
    ConnectAssignor,
    ConnectorsAndTasks,
    WorkerMetadata,
    connect_assignor,
)
from kctl.group.protocol import AssignmentOutcome, JoinMember
from kctl.states import TaskId

__all__ = [
    "CONNECT_OFFERS",
    "ConfigSnapshot",
    "ConnectHandler",
    "decode_assignment",
    "decode_metadata",
    "encode_assignment",
    "encode_metadata",
]

# Connect subprotocols a worker offers, most preferred first (ConnectProtocolCompatibility).
CONNECT_OFFERS: Mapping[str, tuple[str, ...]] = {
    "eager": ("default",),
    "default": ("default",),
    "compatible": ("compatible", "default"),
    "sessioned": ("sessioned", "compatible", "default"),
}


class ConfigSnapshot(Protocol):
    """What a worker has read of the config topic: connector -> task count, and the offset
    it has read up to (the leader refuses to assign while a member is ahead of it)."""

    @property
    def connectors(self) -> Mapping[str, int]: ...

    @property
    def config_offset(self) -> int: ...


class ConnectHandler:
    """A Connect worker's protocol half, driven by `GroupMember`.

    Holds the leader's assignor memory: a new worker starts without it, so the memory
    dies with the worker that led the group.
    """

    protocol_type = "connect"

    def __init__(self, name: str, world: ConfigSnapshot, protocol: str, max_delay_ms: int,
                 *, url: str | None = None):
        if protocol not in CONNECT_OFFERS:
            raise ProtocolError(f"unknown connect.protocol {protocol!r}; expected one of "
                                f"{', '.join(CONNECT_OFFERS)}")
        self.name = name
        self.world = world
        self.url = url if url is not None else f"http://{name}:8083"
        self.offers = CONNECT_OFFERS[protocol]
        self.max_delay_ms = max_delay_ms
        self.memory: Any = None
        # generation -> (the assignor's named sets, the scheduled delay): what explain shows
        self.reports: dict[int, tuple[dict[str, Any], int]] = {}
        self._assignors: dict[str, ConnectAssignor] = {}

    def empty(self) -> ConnectorsAndTasks:
        return EMPTY

    def is_empty(self, work: ConnectorsAndTasks) -> bool:
        return work.is_empty

    def is_eager(self, protocol: str) -> bool:
        return PROTOCOL_VERSIONS[protocol] == 0

    def metadata(self, owned: ConnectorsAndTasks, generation: int) -> tuple[tuple[str, Any], ...]:
        return tuple(
            (
                p,
                WorkerMetadata(
                    url=self.url,
                    config_offset=self.world.config_offset,
                    owned=EMPTY if PROTOCOL_VERSIONS[p] == 0 else owned,
                    protocol_version=PROTOCOL_VERSIONS[p],
                ),
            )
            for p in self.offers
        )

    def assign(
        self,
        *,
        leader: str,
        protocol: str,
        generation: int,
        members: Sequence[JoinMember],
        now_ms: int,
        last_completed_generation: int,
    ) -> Mapping[str, ConnectAssignment]:
        assignor = self._assignors.get(protocol)
        if assignor is None:
            assignor = connect_assignor(
                protocol, scheduled_rebalance_max_delay_ms=self.max_delay_ms
            )
            self._assignors[protocol] = assignor
        metadata: dict[str, WorkerMetadata] = {m.member_id: m.metadata for m in members}
        result = assignor.assign(
            leader=leader,
            leader_url=metadata[leader].url,
            generation=generation,
            members=metadata,
            configured=dict(self.world.connectors),
            config_offset=self.world.config_offset,
            now_ms=now_ms,
            memory=self.memory,
            last_completed_generation=last_completed_generation,
        )
        self.memory = result.memory
        self.reports[generation] = (result.sets.to_json(), result.delay_ms)
        return result.assignments

    def on_assignment(
        self,
        *,
        protocol: str,
        assignment: ConnectAssignment | None,
        owned: ConnectorsAndTasks,
        generation: int,
        now_ms: int,
    ) -> AssignmentOutcome[ConnectorsAndTasks]:
        if assignment is None:
            assignment = ConnectAssignment("", "", 0, version=PROTOCOL_VERSIONS[protocol])
        if assignment.error:
            # The leader's config was behind: read further and try again.
            return AssignmentOutcome(owned, EMPTY, EMPTY, rejoin=True, reason="config mismatch")
        after = assignment.apply_to(owned)
        cooperative = assignment.version > 0
        return AssignmentOutcome(
            owned=after,
            stop=owned - after,
            start=after - owned,
            rejoin=cooperative and not assignment.revoked.is_empty,
            rejoin_after_ms=assignment.delay_ms if assignment.delay_ms > 0 else None,
        )


# ----------------------------------------------------------------------------- wire

# A sentinel task number: "the connector itself" in a connector's list of tasks.
CONNECTOR_TASK = -1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def i16(self, v: int) -> None:
        self.parts.append(_I16.pack(v))

    def i32(self, v: int) -> None:
        self.parts.append(_I32.pack(v))

    def i64(self, v: int) -> None:
        self.parts.append(_I64.pack(v))

    def string(self, v: str) -> None:
        raw = v.encode()
        self.i16(len(raw))
        self.parts.append(raw)

    def nullable_bytes(self, v: bytes | None) -> None:
        if v is None:
            self.i32(-1)
        else:
            self.i32(len(v))
            self.parts.append(v)

    def work(self, work: ConnectorsAndTasks) -> None:
        """Connect's ConnectorAssignment array: per connector, its task numbers, -1 for
        the connector itself."""
        by_connector: dict[str, list[int]] = {c: [CONNECTOR_TASK] for c in work.connectors}
        for t in work.tasks:
            by_connector.setdefault(t.connector, []).append(t.task)
        self.i32(len(by_connector))
        for name in sorted(by_connector):
            self.string(name)
            tasks = sorted(by_connector[name])
            self.i32(len(tasks))
            for n in tasks:
                self.i32(n)

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes, what: str):
        self.data = memoryview(data)
        self.pos = 0
        self.what = what

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolError(f"truncated connect {self.what}: needs {n} more bytes at "
                                f"byte {self.pos} of {len(self.data)}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def string(self) -> str:
        return bytes(self._take(self.i16())).decode()

    def nullable_bytes(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else bytes(self._take(n))

    def work(self) -> ConnectorsAndTasks:
        n = self.i32()
        connectors: set[str] = set()
        tasks: set[TaskId] = set()
        for _ in range(max(n, 0)):  # -1: a null array, as Java writes an absent one
            name = self.string()
            for _ in range(self.i32()):
                number = self.i32()
                if number == CONNECTOR_TASK:
                    connectors.add(name)
                else:
                    tasks.add(TaskId(name, number))
        return ConnectorsAndTasks(frozenset(connectors), frozenset(tasks))

    @property
    def at_end(self) -> bool:
        return self.pos >= len(self.data)


def encode_metadata(meta: WorkerMetadata) -> bytes:
    """JoinGroup metadata: version, URL, config offset and (cooperative) the assignment the
    worker runs now, itself encoded as an assignment."""
    w = _Writer()
    w.i16(meta.protocol_version)
    w.string(meta.url)
    w.i64(meta.config_offset)
    if meta.protocol_version > 0:
        owned = None
        if not meta.owned.is_empty:
            owned = encode_assignment(ConnectAssignment(
                "", "", meta.config_offset, assigned=meta.owned,
                version=meta.protocol_version))
        w.nullable_bytes(owned)
    return w.getvalue()


def decode_metadata(data: bytes) -> WorkerMetadata:
    r = _Reader(data, "worker metadata")
    version = r.i16()
    if version < 0:
        raise ProtocolError(f"unsupported connect subscription version {version}")
    url = r.string()
    offset = r.i64()
    owned = EMPTY
    if version > 0 and not r.at_end:
        raw = r.nullable_bytes()
        if raw is not None:
            owned = decode_assignment(raw).assigned
    return WorkerMetadata(url=url, config_offset=offset, owned=owned,
                          protocol_version=min(version, 2))


def encode_assignment(a: ConnectAssignment) -> bytes:
    """SyncGroup assignment: version 0 (whole assignment) or 1/2 (assigned, revoked and
    the scheduled delay)."""
    w = _Writer()
    w.i16(a.version)
    w.i16(a.error)
    w.string(a.leader)
    w.string(a.leader_url)
    w.i64(a.config_offset)
    w.work(a.assigned)
    if a.version > 0:
        w.work(a.revoked)
        w.i32(a.delay_ms)
    return w.getvalue()


def decode_assignment(data: bytes) -> ConnectAssignment:
    r = _Reader(data, "assignment")
    version = r.i16()
    if version < 0:
        raise ProtocolError(f"unsupported connect assignment version {version}")
    error = r.i16()
    leader = r.string()
    leader_url = r.string()
    offset = r.i64()
    assigned = r.work()
    revoked, delay = EMPTY, 0
    if version > 0:
        revoked = r.work() if not r.at_end else EMPTY
        delay = r.i32() if not r.at_end else 0
    return ConnectAssignment(leader, leader_url, offset, assigned=assigned, revoked=revoked,
                             delay_ms=delay, error=error, version=min(version, 2))

