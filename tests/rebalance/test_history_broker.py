"""Real generation records from workers' group members on the test broker, merged.

Story: w1, w2 and w3 form a `sessioned` group one after another; w3 leaves cleanly (with
the note a stopping worker writes); w2 stops heartbeating, as a killed worker does. The
history tells each round's cause from the records alone: w2 and w3 joining, w3 leaving,
w2 losing its session, with its work named as lost; and every round the leader recorded
replays through the same assignor to the assignment it sent.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

import pytest

from kctl.group.assignors.connect import EMPTY, ConnectorsAndTasks
from kctl.group.connect_coordinator import ConnectHandler
from kctl.group.history import GenerationCompleted
from kctl.group.protocol import GroupMember, MemberFailed, MemberState, StartWork, StopWork
from kctl.rebalance.history import cluster_history, replay
from kctl.transport.kafka_group import CONNECT_CODEC, BrokerGroupDriver

pytestmark = pytest.mark.broker

SESSION_MS = 2000


@dataclass
class Snapshot:
    connectors: dict[str, int] = field(default_factory=lambda: {"ct1": 3, "ct2": 3})
    config_offset: int = 4


@dataclass
class Worker:
    name: str
    driver: BrokerGroupDriver
    owned: ConnectorsAndTasks = EMPTY
    records: list[dict] = field(default_factory=list)

    def poll(self) -> None:
        for action in self.driver.poll(0.02):
            if isinstance(action, StartWork):
                self.owned = self.owned | action.work
            elif isinstance(action, StopWork):
                self.owned = self.owned - action.work
            elif isinstance(action, GenerationCompleted):
                self.records.append(action.record.to_json())
            elif isinstance(action, MemberFailed):
                raise AssertionError(f"{self.name} failed: {action}")


def worker(bootstrap: str, group: str, name: str) -> Worker:
    handler = ConnectHandler(name, Snapshot(), "sessioned", max_delay_ms=60_000,
                             url=f"http://{name}:8083")
    member = GroupMember(name, handler, session_timeout_ms=SESSION_MS,
                         rebalance_timeout_ms=SESSION_MS, heartbeat_interval_ms=300)
    return Worker(name, BrokerGroupDriver(bootstrap, group, member, CONNECT_CODEC))


def run_until(workers: list[Worker], done, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for w in workers:
            w.poll()
        if done():
            return
    raise AssertionError("timed out: " + ", ".join(
        f"{w.name}={w.driver.member.state.value}/g{w.driver.member.generation}" for w in workers))


def settled(workers: list[Worker]):
    def check() -> bool:
        members = [w.driver.member for w in workers]
        return (all(m.state is MemberState.STABLE for m in members)
                and len({m.generation for m in members}) == 1
                and all(w.records and w.records[-1]["generation"] == members[0].generation
                        for w in workers))
    return check


def test_the_records_of_a_real_group_tell_why_each_round_happened(kafka_broker):
    group = f"history-{uuid.uuid4().hex[:8]}"
    w1, w2, w3 = (worker(kafka_broker.bootstrap, group, n) for n in ("w1", "w2", "w3"))
    everyone = [w1, w2, w3]
    try:
        live: list[Worker] = []
        for w in everyone:
            w.driver.start()
            live.append(w)
            run_until(live, settled(live))

        # w3 leaves cleanly, and leaves the note a stopping worker writes
        w3.driver.leave("worker shutting down")
        departures = [{"worker": "w3", "at_ms": int(time.time() * 1000)}]
        run_until([w1, w2], settled([w1, w2]))

        # w2 goes silent: only its session's expiry tells the group
        lost_from = w2.owned
        # (w1 then waits for the delay, a rejoin scheduled: the lost work is held for w2)
        run_until([w1], lambda: w1.records[-1]["members"] == [w1.driver.member.member_id]
                  and w1.driver.member.state is MemberState.STABLE,
                  timeout=SESSION_MS / 1000 * 10)

        records = [r for w in everyone for r in w.records]
        doc = cluster_history(records, departures)
        told = [(c["cause"], c.get("worker")) for r in doc["rounds"] for c in r["causes"]]
        assert told[0] == ("group formed", None)
        for cause in [("worker joined", "w2"), ("worker joined", "w3"), ("worker left", "w3"),
                      ("worker lost its session", "w2")]:
            assert cause in told, (cause, [r["trigger"] for r in doc["rounds"]])
        assert told.index(("worker left", "w3")) < told.index(("worker lost its session", "w2"))

        lost_round = next(r for r in doc["rounds"] if {"cause": "worker lost its session",
                                                       "worker": "w2"} in r["causes"])
        assert lost_round["members"] == ["w1"] and lost_round["leader"] == "w1"
        lost = ConnectorsAndTasks.from_json(lost_round["sets"]["lost"])
        # w2's work is lost (w3's still waits too) and held for w2 to come back
        assert not lost_from.is_empty and lost_from.issubset(lost)
        assert lost_round["delay_ms"] > 0

        leaders = [r for r in doc["rounds"] if r["replayable"]]
        assert leaders, "no leader recorded its assignor's inputs"
        for r in leaders:
            result = replay(records, r["generation"])
            assert result["reproduced"], (r["generation"], result["differences"])
    finally:
        for w in (w1, w2):
            w.driver.close()
        w3.driver.close()
