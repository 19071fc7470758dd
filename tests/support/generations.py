"""Generation records as workers write them, for the tests of `rebalance history`,
`explain --generation` and `--replay` (library, REST and CLI alike)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from kctl.group.assignors.connect import ConnectorsAndTasks
from kctl.group.history import GenerationRecord
from kctl.rebalance.scenario import Scenario
from kctl.rebalance.simulator import simulate

T0 = 1_764_000_000_000  # some wall-clock ms (2025-11-24T16:00:00Z)


def work(*items: str) -> ConnectorsAndTasks:
    return ConnectorsAndTasks.of([i for i in items if "-" not in i],
                                 [i for i in items if "-" in i])


def record(worker: str, generation: int, at_s: float, *, leader: str = "w1", trigger: str = "",
           owned: Iterable[str] = (), assigned: Iterable[str] = (),
           revoked: Iterable[str] = (), members: Iterable[str] = (), delay_ms: int = 0,
           sets: dict | None = None, inputs: dict | None = None,
           protocol: str = "sessioned") -> dict[str, Any]:
    """One worker's record of one generation, as its driver builds it, `at_s` after T0."""
    return GenerationRecord(
        worker=worker, member_id=f"{worker}-id", generation=generation,
        at_ms=T0 + int(at_s * 1000), trigger=trigger, protocol=protocol,
        leader=f"{leader}-id", owned=work(*owned), assigned=work(*assigned),
        revoked=work(*revoked), delay_ms=delay_ms,
        members=tuple(f"{m}-id" for m in members), sets=sets or {}, inputs=inputs or {},
        url=f"http://{worker}:8083", started_ms=T0 + int(at_s * 1000) - 200).to_json()


def story_records() -> list[dict[str, Any]]:
    """w1 forms the group, w2 joins, ct1 is created, w3 joins, w3 leaves cleanly, w2 dies."""
    return [
        record("w1", 1, 0, trigger="join", members=["w1"]),
        record("w1", 2, 5, members=["w1", "w2"]),
        record("w2", 2, 5, trigger="join"),
        record("w1", 3, 10, trigger="connector ct1 created", members=["w1", "w2"],
               owned=["ct1", "ct1-0"], assigned=["ct1", "ct1-0"],
               inputs={"config_offset": 7}),
        record("w2", 3, 10, owned=["ct1-1"], assigned=["ct1-1"]),
        record("w1", 4, 20, members=["w1", "w2", "w3"], owned=["ct1", "ct1-0"]),
        record("w2", 4, 20, owned=["ct1-1"]),
        record("w3", 4, 20, trigger="join"),
        record("w1", 5, 30, members=["w1", "w2"], owned=["ct1", "ct1-0"]),
        record("w2", 5, 30, owned=["ct1-1"]),
        record("w1", 6, 45, members=["w1"], owned=["ct1", "ct1-0"], delay_ms=8000,
               sets={"lost": work("ct1-1").to_json()}),
        record("w1", 7, 53, trigger="scheduled rebalance delay expired", members=["w1"],
               owned=["ct1", "ct1-0", "ct1-1"], assigned=["ct1-1"]),
    ]


def leader_records(scenario: dict) -> list[dict[str, Any]]:
    """What each round's leader would record: the inputs its real `ConnectHandler` was given
    while the simulator drove it, as JSON."""
    records: list[dict[str, Any]] = []

    def observe(round_: Any, sim: Any) -> None:
        handler = sim.nodes[round_.leader].member.handler if round_.leader in sim.nodes else None
        inputs = getattr(handler, "inputs", {}).get(round_.generation)
        if inputs is not None:
            records.append({"worker": round_.leader, "member_id": inputs.leader,
                            "leader": inputs.leader, "generation": round_.generation,
                            "at_ms": round_.at_ms, "inputs": json.loads(
                                json.dumps(inputs.to_json()))})

    simulate(Scenario.from_dict(scenario), observer=observe)
    return records
