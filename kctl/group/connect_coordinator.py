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

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kctl.errors import ProtocolError
from kctl.group._wire import Reader, Writer
from kctl.group.assignors.connect import (
    EMPTY,
    PROTOCOL_VERSIONS,
    ConnectAssignment,
    ConnectAssignor,
    ConnectorsAndTasks,
    WorkerMetadata,
    connect_assignor,
)
from kctl.group.history import INPUTS_KEPT, AssignorInputs
from kctl.group.messages import JoinMember
from kctl.group.protocol import AssignmentOutcome
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
        # the leader's view of the last generation it assigned: client id -> advertised URL
        # (where a request for another member's task is forwarded, Kafka's ownerUrl)
        self.member_urls: dict[str, str] = {}
        # generation -> what the assignor was given and answered: `rebalance explain --replay`
        self.inputs: dict[int, AssignorInputs] = {}
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
                    epoch=generation,
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
        self.member_urls = {m.client_id: m.metadata.url for m in members}
        memory_before = self.memory
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
        if self.memory is None or generation > self.memory.previous_generation:
            self.memory = result.memory
        # else: the coordinator answered a rejoin with a generation this leader already
        # assigned, so no rebalance took place and its members keep that generation's
        # assignment; remembering this round's would make the next one wrong (Kafka
        # always starts a generation when the leader rejoins; some brokers do not)
        self.reports[generation] = (result.sets.to_json(), result.delay_ms)
        self.inputs[generation] = AssignorInputs(
            protocol=protocol, leader=leader, leader_url=metadata[leader].url,
            generation=generation, members=metadata, configured=dict(self.world.connectors),
            config_offset=self.world.config_offset, now_ms=now_ms, memory=memory_before,
            last_completed_generation=last_completed_generation,
            max_delay_ms=self.max_delay_ms, assignments=dict(result.assignments))
        for old in [g for g in self.inputs if g < generation - INPUTS_KEPT]:
            del self.inputs[old]
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

def _write_work(w: Writer, work: ConnectorsAndTasks) -> None:
    """Connect's ConnectorAssignment array: per connector, its task numbers, -1 for the
    connector itself."""
    by_connector: dict[str, list[int]] = {c: [CONNECTOR_TASK] for c in work.connectors}
    for t in work.tasks:
        by_connector.setdefault(t.connector, []).append(t.task)
    w.i32(len(by_connector))
    for name in sorted(by_connector):
        w.string(name)
        tasks = sorted(by_connector[name])
        w.i32(len(tasks))
        for n in tasks:
            w.i32(n)


def _read_work(r: Reader) -> ConnectorsAndTasks:
    n = r.i32()
    connectors: set[str] = set()
    tasks: set[TaskId] = set()
    for _ in range(max(n, 0)):  # -1: a null array, as Java writes an absent one
        name = r.string()
        for _ in range(r.i32()):
            number = r.i32()
            if number == CONNECTOR_TASK:
                connectors.add(name)
            else:
                tasks.add(TaskId(name, number))
    return ConnectorsAndTasks(frozenset(connectors), frozenset(tasks))


def encode_metadata(meta: WorkerMetadata) -> bytes:
    """JoinGroup metadata: version, URL, config offset and (cooperative) the assignment the
    worker runs now, itself encoded as an assignment; then kctl's assignment epoch (int32).

    The epoch trails Connect's fields, where Kafka Connect's readers (a Schema read that
    stops after its last field) ignore it. It changes whenever the worker completed a
    generation since its last join, so a coordinator that starts a generation only for
    changed metadata (the test broker) rebalances on every rejoin, as Kafka's does when
    the leader rejoins: lost work is reassigned when the scheduled delay expires."""
    w = Writer()
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
    w.i32(meta.epoch)
    return w.getvalue()


def decode_metadata(data: bytes) -> WorkerMetadata:
    r = Reader(data, "connect worker metadata")
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
    epoch = r.i32() if len(r.data) - r.pos >= 4 else -1  # a Java worker sends none
    return WorkerMetadata(url=url, config_offset=offset, owned=owned,
                          protocol_version=min(version, 2), epoch=epoch)


def encode_assignment(a: ConnectAssignment) -> bytes:
    """SyncGroup assignment: version 0 (whole assignment) or 1/2 (assigned, revoked and
    the scheduled delay)."""
    w = Writer()
    w.i16(a.version)
    w.i16(a.error)
    w.string(a.leader)
    w.string(a.leader_url)
    w.i64(a.config_offset)
    _write_work(w, a.assigned)
    if a.version > 0:
        _write_work(w, a.revoked)
        w.i32(a.delay_ms)
    return w.getvalue()


def decode_assignment(data: bytes) -> ConnectAssignment:
    r = Reader(data, "connect assignment")
    version = r.i16()
    if version < 0:
        raise ProtocolError(f"unsupported connect assignment version {version}")
    error = r.i16()
    leader = r.string()
    leader_url = r.string()
    offset = r.i64()
    assigned = _read_work(r)
    revoked, delay = EMPTY, 0
    if version > 0:
        revoked = _read_work(r) if not r.at_end else EMPTY
        delay = r.i32() if not r.at_end else 0
    return ConnectAssignment(leader, leader_url, offset, assigned=assigned, revoked=revoked,
                             delay_ms=delay, error=error, version=min(version, 2))

