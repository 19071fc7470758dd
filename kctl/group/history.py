"""What one worker saw of one generation: the record a live rebalance history is built from.

Each worker records every generation it completes: why it joined, who led, the members
(the leader knows them all), what it was assigned and had revoked, the scheduled delay and,
on the leader, the set algebra its assignor computed. The JSON uses the field names of the
simulator's rounds (`kctl rebalance explain -o json`), so records from every worker of a
cluster can be merged by generation and rendered by the same renderer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kctl.group.assignors.connect import (
    AssignorMemory,
    ConnectAssignment,
    ConnectorsAndTasks,
    WorkerMetadata,
)
from kctl.group.messages import JoinGroup
from kctl.group.protocol import GroupMember

__all__ = [
    "INPUTS_KEPT",
    "AssignorInputs",
    "GenerationCompleted",
    "GenerationRecord",
    "GenerationRecorder",
    "departure_key",
    "record_key",
]

# How many generations of assignor inputs a leader keeps in memory until they are recorded.
INPUTS_KEPT = 8


def record_key(worker: str, generation: int) -> str:
    """One record per worker and generation: compaction keeps the last of each."""
    return f"generation-{worker}-{generation}"


def departure_key(worker: str, generation: int) -> str:
    """A worker's note that it left the group cleanly after completing `generation`: one
    per departure, so a later stop never overwrites what an earlier one recorded."""
    return f"departure-{worker}-{generation}"


def _work(work: Any) -> Any:
    if isinstance(work, ConnectorsAndTasks):
        return work.to_json()
    return [str(tp) for tp in sorted(work)]


@dataclass(frozen=True)
class GenerationRecord:
    worker: str
    member_id: str
    generation: int
    at_ms: int  # wall-clock ms when the worker completed the generation
    trigger: str  # the reason this worker gave when it (re)joined
    protocol: str
    leader: str
    owned: Any  # what the worker runs after acting on the assignment
    assigned: Any
    revoked: Any
    delay_ms: int = 0
    members: tuple[str, ...] = ()  # the leader's view; empty on followers
    sets: Mapping[str, Any] = field(default_factory=dict)  # the leader's assignor sets
    # the leader's: what its assignor was given and answered (AssignorInputs.to_json())
    inputs: Mapping[str, Any] = field(default_factory=dict)
    url: str = ""  # this worker's REST URL
    started_ms: int = 0  # wall-clock ms of its first JoinGroup of this rebalance

    @property
    def is_leader(self) -> bool:
        return self.member_id == self.leader

    def to_json(self) -> dict[str, Any]:
        return {
            "worker": self.worker,
            "member_id": self.member_id,
            "generation": self.generation,
            "at_ms": self.at_ms,
            "trigger": self.trigger,
            "protocol": self.protocol,
            "leader": self.leader,
            "members": list(self.members),
            "owned": _work(self.owned),
            "assigned": _work(self.assigned),
            "revoked": _work(self.revoked),
            "delay_ms": self.delay_ms,
            "sets": dict(self.sets),
            "inputs": dict(self.inputs),
            "url": self.url,
            "started_ms": self.started_ms,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> GenerationRecord:
        def work(v: Any) -> Any:
            return ConnectorsAndTasks.from_json(v) if isinstance(v, Mapping) else tuple(v)

        return cls(
            worker=str(doc["worker"]), member_id=str(doc["member_id"]),
            generation=int(doc["generation"]), at_ms=int(doc["at_ms"]),
            trigger=str(doc.get("trigger", "")), protocol=str(doc.get("protocol", "")),
            leader=str(doc.get("leader", "")), owned=work(doc.get("owned", {})),
            assigned=work(doc.get("assigned", {})), revoked=work(doc.get("revoked", {})),
            delay_ms=int(doc.get("delay_ms", 0)), members=tuple(doc.get("members", ())),
            sets=dict(doc.get("sets", {})), inputs=dict(doc.get("inputs") or {}),
            url=str(doc.get("url", "")), started_ms=int(doc.get("started_ms", 0)))


@dataclass(frozen=True)
class GenerationCompleted:
    """Driver -> application: this worker completed a generation (persist the record)."""

    record: GenerationRecord


class GenerationRecorder:
    """What a driver notes between two generations of its member, so each generation the
    member completes gets its record: why it joined (the first reason since the last one),
    the members the leader saw, and what the member stopped and started meanwhile. Every
    driver (the broker's, the in-process one) records through this, so their records agree."""

    def __init__(self, member: GroupMember[Any]):
        self.member = member
        self._join_reason = ""
        self._join_started_ms = 0
        self._members: tuple[str, ...] = ()
        self._stopped: Any = member.handler.empty()
        self._started: Any = member.handler.empty()

    def sent(self, request: Any, at_ms: int = 0) -> None:
        if isinstance(request, JoinGroup) and not self._join_reason:
            # the first reason since the last generation is its cause; later rejoins of
            # the same rebalance give none
            self._join_reason = request.reason
            self._join_started_ms = self._join_started_ms or at_ms

    def joined(self, members: tuple[str, ...]) -> None:
        """The member ids a JoinGroup answer listed (only the leader's lists any)."""
        self._members = members

    def stopped(self, work: Any) -> None:
        self._stopped = self._stopped | work

    def started(self, work: Any) -> None:
        self._started = self._started | work

    def completed(self, assignment: Any, at_ms: int) -> GenerationRecord:
        """The record of the generation the member has just completed (then start over)."""
        m = self.member
        sets: Mapping[str, Any] = {}
        delay = int(getattr(assignment, "delay_ms", 0) or 0)
        reports = getattr(m.handler, "reports", {})
        if m.is_leader and m.generation in reports:
            sets, delay = reports[m.generation]
        inputs = getattr(m.handler, "inputs", {}).get(m.generation) if m.is_leader else None
        record = GenerationRecord(
            worker=m.client_id, member_id=m.member_id, generation=m.generation, at_ms=at_ms,
            trigger=self._join_reason or "rebalance started by the group",
            protocol=m.protocol or "", leader=m.leader, owned=m.owned,
            assigned=self._started, revoked=self._stopped, delay_ms=delay,
            members=self._members if m.is_leader else (), sets=sets,
            inputs=inputs.to_json() if inputs is not None else {},
            url=str(getattr(m.handler, "url", "") or ""), started_ms=self._join_started_ms)
        self._stopped = self._started = m.handler.empty()
        self._join_reason = ""
        self._join_started_ms = 0
        return record


# ----------------------------------------------------------------------------- assignor inputs


def _memory_json(memory: AssignorMemory | None) -> dict[str, Any] | None:
    if memory is None:
        return None
    return {
        "previous_assignment": memory.previous_assignment.to_json(),
        "previous_revocation": memory.previous_revocation.to_json(),
        "previous_generation": memory.previous_generation,
        "previous_members": sorted(memory.previous_members),
        "revoked_in_previous": memory.revoked_in_previous,
        "candidate_workers": list(memory.candidate_workers),
        "scheduled_rebalance_ms": memory.scheduled_rebalance_ms,
        "delay_ms": memory.delay_ms,
        "successive_revoking_rebalances": memory.successive_revoking_rebalances,
    }


def _memory_from_json(doc: Mapping[str, Any] | None) -> AssignorMemory | None:
    if doc is None:
        return None
    due = doc.get("scheduled_rebalance_ms")
    return AssignorMemory(
        previous_assignment=ConnectorsAndTasks.from_json(doc.get("previous_assignment", {})),
        previous_revocation=ConnectorsAndTasks.from_json(doc.get("previous_revocation", {})),
        previous_generation=int(doc.get("previous_generation", -1)),
        previous_members=frozenset(doc.get("previous_members", ())),
        revoked_in_previous=bool(doc.get("revoked_in_previous", False)),
        candidate_workers=tuple(doc.get("candidate_workers", ())),
        scheduled_rebalance_ms=None if due is None else int(due),
        delay_ms=int(doc.get("delay_ms", 0)),
        successive_revoking_rebalances=int(doc.get("successive_revoking_rebalances", 0)),
    )


def _metadata_json(meta: WorkerMetadata) -> dict[str, Any]:
    return {"url": meta.url, "config_offset": meta.config_offset, "owned": meta.owned.to_json(),
            "protocol_version": meta.protocol_version}


def _metadata_from_json(doc: Mapping[str, Any]) -> WorkerMetadata:
    return WorkerMetadata(url=str(doc.get("url", "")),
                          config_offset=int(doc.get("config_offset", 0)),
                          owned=ConnectorsAndTasks.from_json(doc.get("owned", {})),
                          protocol_version=int(doc.get("protocol_version", 2)))


def _assignment_from_json(doc: Mapping[str, Any]) -> ConnectAssignment:
    return ConnectAssignment(
        leader=str(doc.get("leader", "")), leader_url=str(doc.get("leader_url", "")),
        config_offset=int(doc.get("config_offset", 0)),
        assigned=ConnectorsAndTasks.from_json(doc.get("assigned", {})),
        revoked=ConnectorsAndTasks.from_json(doc.get("revoked", {})),
        delay_ms=int(doc.get("delay_ms", 0)), error=int(doc.get("error", 0)),
        version=int(doc.get("version", 2)))


@dataclass(frozen=True)
class AssignorInputs:
    """Everything a Connect leader's assignor was given in one generation, and its answer:
    enough to run the same assignor again and compare (`kctl rebalance explain --replay`).

    `now_ms` and the memory's `scheduled_rebalance_ms` are on the leader's monotonic clock.
    """

    protocol: str
    leader: str
    leader_url: str
    generation: int
    members: Mapping[str, WorkerMetadata]
    configured: Mapping[str, int]
    config_offset: int
    now_ms: int
    memory: AssignorMemory | None
    last_completed_generation: int
    max_delay_ms: int
    assignments: Mapping[str, ConnectAssignment]

    def to_json(self) -> dict[str, Any]:
        return {
            "protocol": self.protocol, "leader": self.leader, "leader_url": self.leader_url,
            "generation": self.generation,
            "members": {m: _metadata_json(meta) for m, meta in sorted(self.members.items())},
            "configured": dict(sorted(self.configured.items())),
            "config_offset": self.config_offset, "now_ms": self.now_ms,
            "memory": _memory_json(self.memory),
            "last_completed_generation": self.last_completed_generation,
            "max_delay_ms": self.max_delay_ms,
            "assignments": {m: a.to_json() for m, a in sorted(self.assignments.items())},
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> AssignorInputs:
        return cls(
            protocol=str(doc["protocol"]), leader=str(doc["leader"]),
            leader_url=str(doc.get("leader_url", "")), generation=int(doc["generation"]),
            members={m: _metadata_from_json(v) for m, v in doc.get("members", {}).items()},
            configured={c: int(n) for c, n in doc.get("configured", {}).items()},
            config_offset=int(doc.get("config_offset", 0)), now_ms=int(doc.get("now_ms", 0)),
            memory=_memory_from_json(doc.get("memory")),
            last_completed_generation=int(doc.get("last_completed_generation", -1)),
            max_delay_ms=int(doc.get("max_delay_ms", 0)),
            assignments={m: _assignment_from_json(a)
                         for m, a in doc.get("assignments", {}).items()})
