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

from kctl.group.assignors.connect import ConnectorsAndTasks
from kctl.group.protocol import GroupMember, JoinGroup

__all__ = ["GenerationCompleted", "GenerationRecord", "GenerationRecorder", "record_key"]


def record_key(worker: str, generation: int) -> str:
    """One record per worker and generation: compaction keeps the last of each."""
    return f"generation-{worker}-{generation}"


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
            sets=dict(doc.get("sets", {})))


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
        self._members: tuple[str, ...] = ()
        self._stopped: Any = member.handler.empty()
        self._started: Any = member.handler.empty()

    def sent(self, request: Any) -> None:
        if isinstance(request, JoinGroup) and not self._join_reason:
            # the first reason since the last generation is its cause; later rejoins of
            # the same rebalance give none
            self._join_reason = request.reason

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
        record = GenerationRecord(
            worker=m.client_id, member_id=m.member_id, generation=m.generation, at_ms=at_ms,
            trigger=self._join_reason or "rebalance started by the group",
            protocol=m.protocol or "", leader=m.leader, owned=m.owned,
            assigned=self._started, revoked=self._stopped, delay_ms=delay,
            members=self._members if m.is_leader else (), sets=sets)
        self._stopped = self._started = m.handler.empty()
        self._join_reason = ""
        return record
