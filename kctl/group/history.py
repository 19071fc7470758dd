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

__all__ = ["GenerationCompleted", "GenerationRecord", "record_key"]


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
